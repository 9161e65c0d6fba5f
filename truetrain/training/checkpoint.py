"""Checkpoints: canonical bytes (what is stored on IPFS) and their keccak256 hash.

The encoding is the one in docs/checkpoint-format.md; the hash is keccak256 of exactly
those bytes, so a checkpoint decoded from bytes hashes to the same value by construction.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import CheckpointError
from ..hashing import keccak256

MAGIC = b"TTCKPT\x00\x01"
_DTYPES = {torch.float32: (1, "<f4"), torch.float64: (2, "<f8"), torch.int64: (3, "<i8"),
           torch.int32: (4, "<i4"), torch.uint8: (5, "|u1")}
_BY_CODE = {code: (dtype, np_dtype) for dtype, (code, np_dtype) in _DTYPES.items()}


@dataclass
class Checkpoint:
    """Training state at one step: tensors by name (``model.*``, ``optim.*``), step, RNG key.

    ``rng_key`` is the only RNG state: batch ``t`` is a pure function of (rng_key, t) (see
    ``rng.batch_indices``), so it is the same on every device.
    """

    step: int
    rng_key: bytes
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        return encode_checkpoint(self)

    @classmethod
    def from_bytes(cls, data: bytes) -> "Checkpoint":
        return decode_checkpoint(data)

    def hash(self) -> bytes:
        """keccak256 of the canonical encoding."""
        return keccak256(self.to_bytes())

    def group(self, prefix: str) -> dict[str, torch.Tensor]:
        """Tensors under ``prefix.`` with the prefix removed (``group("model")``)."""
        cut = len(prefix) + 1
        return {k[cut:]: v for k, v in self.tensors.items() if k.startswith(prefix + ".")}


def encode_checkpoint(ckpt: Checkpoint) -> bytes:
    """Canonical little-endian encoding (see docs/checkpoint-format.md)."""
    if not 0 <= ckpt.step < 2**64:
        raise CheckpointError(f"step out of range: {ckpt.step}")
    if len(ckpt.rng_key) != 32:
        raise CheckpointError("rng_key must be 32 bytes")
    out = [MAGIC, struct.pack("<Q", ckpt.step), bytes(ckpt.rng_key),
           struct.pack("<I", len(ckpt.tensors))]
    for name in sorted(ckpt.tensors, key=lambda n: n.encode()):
        out.append(encode_tensor(name, ckpt.tensors[name]))
    return b"".join(out)


def encode_tensor(name: str, t: torch.Tensor) -> bytes:
    """One named tensor's record: name length and UTF-8 name, dtype code, rank, shape,
    little-endian data (a checkpoint's tensors, a pipeline message's)."""
    t = t.detach()
    if t.dtype not in _DTYPES:
        raise CheckpointError(f"{name}: unsupported dtype {t.dtype}")
    code, np_dtype = _DTYPES[t.dtype]
    raw = name.encode()
    if not raw or len(raw) > 0xFFFF or t.dim() > 255:
        raise CheckpointError(f"{name}: bad name or rank")
    return b"".join([struct.pack("<H", len(raw)) + raw + struct.pack("<BB", code, t.dim()),
                     struct.pack(f"<{t.dim()}Q", *t.shape),
                     t.cpu().contiguous().numpy().astype(np_dtype, copy=False).tobytes()])


def checkpoint_hash(ckpt_or_bytes) -> bytes:
    """keccak256 of a checkpoint's canonical bytes."""
    data = ckpt_or_bytes if isinstance(ckpt_or_bytes, (bytes, bytearray)) else \
        encode_checkpoint(ckpt_or_bytes)
    return keccak256(bytes(data))


def decode_checkpoint(data: bytes) -> Checkpoint:
    """Parse canonical bytes; anything malformed or non-canonical raises CheckpointError."""
    data = bytes(data)
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(data):
            raise CheckpointError(f"checkpoint truncated at byte {pos}")
        chunk = data[pos:pos + n]
        pos += n
        return chunk

    if take(8) != MAGIC:
        raise CheckpointError("not a truetrain checkpoint (bad magic or version)")
    (step,) = struct.unpack("<Q", take(8))
    rng_key = take(32)
    (count,) = struct.unpack("<I", take(4))
    tensors = read_tensors(take, count, len(data))
    if pos != len(data):
        raise CheckpointError(f"{len(data) - pos} trailing bytes after the last tensor")
    return Checkpoint(step, rng_key, tensors)


def read_tensors(take, count: int, size: int) -> dict[str, torch.Tensor]:
    """``count`` records written by :func:`encode_tensor`, names sorted and unique, read
    with ``take(n)`` (the next ``n`` bytes of a buffer of ``size`` bytes)."""
    tensors: dict[str, torch.Tensor] = {}
    previous = None
    for _ in range(count):
        (name_len,) = struct.unpack("<H", take(2))
        raw = take(name_len)
        try:
            name = raw.decode()
        except UnicodeDecodeError as exc:
            raise CheckpointError("tensor name is not UTF-8") from exc
        if not raw or (previous is not None and raw <= previous):
            raise CheckpointError(f"tensor names not sorted and unique at {name!r}")
        previous = raw
        code, ndim = struct.unpack("<BB", take(2))
        if code not in _BY_CODE:
            raise CheckpointError(f"{name}: unknown dtype code {code}")
        dtype, np_dtype = _BY_CODE[code]
        shape = struct.unpack(f"<{ndim}Q", take(8 * ndim))
        count_el = int(np.prod(shape, dtype=np.uint64)) if ndim else 1
        nbytes = count_el * np.dtype(np_dtype).itemsize
        if nbytes > size:
            raise CheckpointError(f"{name}: shape {shape} larger than the checkpoint")
        arr = np.frombuffer(take(nbytes), dtype=np_dtype).reshape(shape)
        tensors[name] = torch.from_numpy(arr.astype(arr.dtype.newbyteorder("="), copy=True))
    return tensors


def load_checkpoint(data: bytes, expected_hash: bytes | None = None) -> Checkpoint:
    """Decode ``data``, first checking it against ``expected_hash`` when one is given."""
    if expected_hash is not None and keccak256(bytes(data)) != bytes(expected_hash):
        raise CheckpointError("checkpoint bytes do not match the expected hash")
    return decode_checkpoint(data)
