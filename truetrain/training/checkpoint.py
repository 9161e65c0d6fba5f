"""Checkpoints: canonical bytes (what is stored on IPFS) and their hash, a commitment the
chain can open down to one tensor's root (docs/checkpoint-format.md).

``checkpoint_hash = keccak256(abi.encode(uint256 step, bytes32 rng_key, bytes32 layout_hash,
bytes32 tensors_root))``: ``layout_hash`` is keccak256 of the encoding with the step, the
RNG key and every tensor's data left out (so names, dtypes and shapes are bound),
``tensors_root`` the Merkle root over the tensors' roots (truetrain/numerics/tensor_merkle's
layout) in the encoding's order: a step's state root (docs/onestep.md, level 1). Fetched
checkpoints are decoded and their commitment compared (:func:`load_checkpoint`,
:func:`fetch_checkpoint`), never keccak256 of their bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np
import torch
from eth_abi import encode

from ..errors import CheckpointError, ContentMismatch
from ..hashing import keccak256, to_hex32
from .merkle import ZERO, merkle_root
from .tensor_roots import tensor_root

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
        """The checkpoint hash (:func:`checkpoint_hash`)."""
        return checkpoint_hash(self)

    def group(self, prefix: str) -> dict[str, torch.Tensor]:
        """Tensors under ``prefix.`` with the prefix removed (``group("model")``)."""
        cut = len(prefix) + 1
        return {k[cut:]: v for k, v in self.tensors.items() if k.startswith(prefix + ".")}


def encode_checkpoint(ckpt: Checkpoint) -> bytes:
    """Canonical little-endian encoding (see docs/checkpoint-format.md)."""
    _check_head(ckpt)
    out = [MAGIC, struct.pack("<Q", ckpt.step), bytes(ckpt.rng_key), struct.pack("<I", len(ckpt.tensors))]
    for name in sorted_names(ckpt):
        out.append(encode_tensor(name, ckpt.tensors[name]))
    return b"".join(out)


def _check_head(ckpt: Checkpoint) -> None:
    if not 0 <= ckpt.step < 2**64:
        raise CheckpointError(f"step out of range: {ckpt.step}")
    if len(ckpt.rng_key) != 32:
        raise CheckpointError("rng_key must be 32 bytes")


def sorted_names(ckpt: Checkpoint) -> list[str]:
    """The tensors' names in the encoding's order (UTF-8 byte order)."""
    return sorted(ckpt.tensors, key=lambda n: n.encode())


def encode_tensor(name: str, t: torch.Tensor) -> bytes:
    """One named tensor's record: name length and UTF-8 name, dtype code, rank, shape,
    little-endian data (a checkpoint's tensors, a pipeline message's)."""
    t = t.detach()
    header = tensor_header(name, t)
    return header + t.cpu().contiguous().numpy().astype(_DTYPES[t.dtype][1], copy=False).tobytes()


def tensor_header(name: str, t: torch.Tensor) -> bytes:
    """A tensor record without its data: name length, name, dtype code, rank, shape."""
    if t.dtype not in _DTYPES:
        raise CheckpointError(f"{name}: unsupported dtype {t.dtype}")
    raw = name.encode()
    if not raw or len(raw) > 0xFFFF or t.dim() > 255:
        raise CheckpointError(f"{name}: bad name or rank")
    return struct.pack("<H", len(raw)) + raw + struct.pack(f"<BB{t.dim()}Q", _DTYPES[t.dtype][0], t.dim(), *t.shape)


def layout_bytes(ckpt: Checkpoint) -> bytes:
    """The encoding with the step, the RNG key and every tensor's data left out: magic,
    count, then each tensor's header in the encoding's order (what ``layout_hash`` hashes)."""
    return b"".join([MAGIC, struct.pack("<I", len(ckpt.tensors)),
                     *(tensor_header(n, ckpt.tensors[n]) for n in sorted_names(ckpt))])


def checkpoint_commitment(ckpt: Checkpoint | bytes) -> tuple[int, bytes, bytes, bytes]:
    """``(step, rng_key, layout_hash, tensors_root)``: what :func:`checkpoint_hash` hashes.
    ``tensors_root`` is the Merkle root over the tensors' roots in the encoding's order
    (float NaN payloads are not reproducible across devices, so the roots deliberately
    ignore them); an empty tensor's root, and the root of a checkpoint without tensors, are
    32 zero bytes. Bytes are decoded first (:class:`CheckpointError` when malformed)."""
    ckpt = decode_checkpoint(ckpt) if isinstance(ckpt, (bytes, bytearray, memoryview)) else ckpt
    _check_head(ckpt)
    layout = keccak256(layout_bytes(ckpt))
    roots = [tensor_root(t) if t.numel() else ZERO for t in (ckpt.tensors[n] for n in sorted_names(ckpt))]
    return ckpt.step, bytes(ckpt.rng_key), layout, merkle_root(roots) if roots else ZERO


def checkpoint_hash(ckpt_or_bytes: Checkpoint | bytes) -> bytes:
    """The checkpoint hash of a checkpoint (or of its canonical bytes, decoded first):
    :func:`commitment_hash` of its :func:`checkpoint_commitment`."""
    return commitment_hash(*checkpoint_commitment(ckpt_or_bytes))


def commitment_hash(step: int, rng_key: bytes, layout_hash: bytes, tensors_root: bytes) -> bytes:
    """``keccak256(abi.encode(uint256 step, bytes32 rng_key, bytes32 layout_hash, bytes32
    tensors_root))``: a checkpoint hash from its parts (what StepGame checks a checkpoint's
    opening against)."""
    return keccak256(encode(["uint256", "bytes32", "bytes32", "bytes32"], [step, rng_key, layout_hash, tensors_root]))


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
    """Decode ``data``, then check its hash against ``expected_hash`` when one is given
    (:class:`CheckpointError` when malformed or different)."""
    ckpt = decode_checkpoint(data)
    if expected_hash is not None and checkpoint_hash(ckpt) != bytes(expected_hash):
        raise CheckpointError("checkpoint bytes do not match the expected hash")
    return ckpt


def fetch_checkpoint(store, cid: str, expected_hash: bytes, *, max_size: int, timeout: float | None = None) -> bytes:
    """The bytes of checkpoint ``cid`` from ``store`` (a StorageClient: at most ``max_size``
    bytes), decoded and checked against ``expected_hash``: as a fetch of any other content
    whose keccak256 differs, :class:`ContentMismatch` when they do not decode or their
    checkpoint hash differs."""
    expected_hash = bytes(expected_hash)
    if len(expected_hash) != 32:
        raise ValueError("expected_hash must be the 32-byte checkpoint hash")
    data = store.fetch_unverified(cid, max_size=max_size, timeout=timeout)
    try:
        digest = checkpoint_hash(decode_checkpoint(data))
    except CheckpointError as exc:
        raise ContentMismatch(f"content {cid} ({len(data)} bytes) is not a checkpoint ({exc}): refusing it") from None
    if digest != expected_hash:
        raise ContentMismatch(f"checkpoint {cid} ({len(data)} bytes) hashes to {to_hex32(digest)}, "
                              f"expected {to_hex32(expected_hash)}: refusing it")
    return data
