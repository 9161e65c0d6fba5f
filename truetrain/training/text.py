"""Text data for language-model jobs: a user's UTF-8 text (a file, or a folder of files)
cut into shards of contiguous bytes plus a held-out split, and the built-in demo corpus.

A text shard's bytes are ``TTTEXT1\\n`` followed by the UTF-8 text itself, so a shard
fetched from IPFS is readable as it is and its keccak256 in the manifest is that of the
text. Shards are cut at line ends (a newline byte is never inside a multi-byte character),
or, in a text without one near the cut, at the next character boundary: every shard and the
held-out split decode as UTF-8 on their own.

The demo corpus needs no download: it is the Python standard library's own source (the
top-level ``*.py`` modules of the running interpreter, in name order), which every machine
that runs truetrain has. Its bytes depend on the Python version; the manifest pins them by
hash like any user's data.
"""

from __future__ import annotations

import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DatasetError

TEXT_MAGIC = b"TTTEXT1\n"
#: Default size of the demo corpus (bytes).
DEMO_BYTES = 2 << 20
#: Default fraction of the text kept for the held-out split.
HELD_OUT = 0.05


def _utf8(data: bytes, where: str) -> bytes:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{where}: not UTF-8 text (invalid byte at offset {exc.start})") from None
    return data


def read_text(path: str | Path) -> bytes:
    """The UTF-8 bytes of a text file, or of every file below a folder (sorted by relative
    path, concatenated). Refuses a missing path, an empty text and bytes that are not UTF-8,
    naming the file."""
    path = Path(path)
    if path.is_file():
        data = _utf8(path.read_bytes(), str(path))
    elif path.is_dir():
        files = sorted((p for p in path.rglob("*") if p.is_file()), key=lambda p: p.relative_to(path).as_posix())
        if not files:
            raise DatasetError(f"{path}: the folder holds no files")
        data = b"".join(_utf8(p.read_bytes(), str(p)) for p in files)
    else:
        raise DatasetError(f"{path}: no such file or folder")
    if not data:
        raise DatasetError(f"{path}: the text is empty")
    return data


def demo_corpus(max_bytes: int = DEMO_BYTES) -> bytes:
    """The built-in corpus: the standard library's top-level modules in name order (any that
    is not UTF-8 left out), up to the last line end within ``max_bytes``."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    out, size = [], 0
    for path in sorted(stdlib.glob("*.py")):
        if size >= max_bytes:
            break
        data = path.read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        out.append(data)
        size += len(data)
    corpus = b"".join(out)
    corpus = corpus[:corpus.rfind(b"\n", 0, max_bytes) + 1]
    if not corpus:
        raise DatasetError(f"no standard-library source under {stdlib} for the demo corpus")
    return corpus


def _cut(data: bytes, pos: int, limit: int) -> int:
    """A cut at or after ``pos`` (before ``limit`` where possible): just past the next
    newline, else the next UTF-8 character boundary."""
    newline = data.find(b"\n", pos, limit)
    if newline >= 0:
        return newline + 1
    while pos < len(data) and 0x80 <= data[pos] < 0xC0:  # a continuation byte: not a boundary
        pos += 1
    return pos


def split_text(data: bytes, num_shards: int, seq_len: int, held_out: float = HELD_OUT) -> tuple[list[bytes], bytes]:
    """``(shards, held_out_text)``: the last ``held_out`` of the text (at least one sequence)
    apart, the rest in ``num_shards`` contiguous pieces of about equal size. Every piece
    holds at least ``seq_len + 1`` bytes (one input sequence and its next-byte targets)."""
    if num_shards < 1:
        raise DatasetError(f"num_shards must be at least 1, got {num_shards}")
    if seq_len < 1:
        raise DatasetError(f"seq_len must be at least 1, got {seq_len}")
    if not 0 < held_out < 1:
        raise DatasetError(f"held_out must be a fraction in (0, 1), got {held_out}")
    _utf8(data, "text")
    need = seq_len + 1
    if len(data) < need * (num_shards + 1):
        raise DatasetError(f"text of {len(data):,} bytes is too short: {num_shards} shards and a held-out "
                           f"split need at least {need} bytes each (sequence length {seq_len} + 1)")
    window = max(need, len(data) // (8 * (num_shards + 1)))  # how far a cut may move to a line end
    ideal = max(need, int(len(data) * (1 - held_out)))
    split = _cut(data, min(ideal, len(data) - need), min(ideal + window, len(data) - need))
    train, rest = data[:split], data[split:]
    cuts = [0]
    for i in range(1, num_shards):
        pos = max(cuts[-1] + need, len(train) * i // num_shards)
        cuts.append(_cut(train, pos, pos + window))
    cuts.append(len(train))
    shards = [train[a:b] for a, b in zip(cuts, cuts[1:])]
    short = [i for i, s in enumerate(shards + [rest]) if len(s) < need]
    if short:
        raise DatasetError(f"text of {len(data):,} bytes is too short: cutting it at line ends leaves a piece "
                           f"under {need} bytes (sequence length {seq_len} + 1); use fewer shards or more text")
    return shards, rest


def encode_text_shard(text: bytes) -> bytes:
    """A text shard's bytes: the magic, then the UTF-8 text."""
    return TEXT_MAGIC + _utf8(text, "text shard")


def decode_text_shard(blob: bytes) -> bytes:
    """The UTF-8 text of a text shard (refuses another format or bytes that are not UTF-8)."""
    if not blob.startswith(TEXT_MAGIC):
        raise DatasetError("not a text shard (bad magic)")
    return _utf8(blob[len(TEXT_MAGIC):], "text shard")


@dataclass(frozen=True)
class TextShard:
    """A text shard's bytes as uint8 tokens."""

    tokens: np.ndarray  # uint8 (n,)

    @classmethod
    def from_bytes(cls, blob: bytes) -> "TextShard":
        return cls(np.frombuffer(decode_text_shard(blob), dtype=np.uint8))

    def __len__(self) -> int:
        return len(self.tokens)


def publish_text(store, shards: list[bytes], held_out: bytes) -> dict:
    """Store every text shard and the held-out split with ``store.add_bytes``; return the
    manifest's ``{"shards": [...], "test_set": {...}}`` entries (samples: bytes of text)."""
    from ..hashing import keccak256, to_hex32

    def ref(text: bytes) -> dict:
        blob = encode_text_shard(text)
        obj = store.add_bytes(blob)
        return {"cid": str(obj.cid), "hash": to_hex32(keccak256(blob)), "samples": len(text)}

    return {"shards": [ref(s) for s in shards], "test_set": ref(held_out)}
