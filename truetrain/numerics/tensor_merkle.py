"""Tensor roots and range proofs (contracts/numerics/TensorMerkle.sol checks the same).

The canonical layout of a float32 tensor: flattened row-major, each element its IEEE-754
bit pattern as 4 bytes big-endian (every NaN written as the canonical 0x7FC00000, since the
engine's NaN payloads are not reproducible across devices: a root deliberately ignores
them), cut into chunks of :data:`CHUNK` words (256 bytes; the last chunk zero-padded). A
float64 tensor (the softmax's row sums) is laid out as two words an element, its 8-byte
pattern big-endian (high word first; every NaN 0x7FF8000000000000), so element ``i`` is
words ``2i`` and ``2i + 1``. Integer tensors are laid out injectively, their bits as they
are: int64 as two words (high first, as float64's), int32 as one word (two's complement),
uint8 as one word each (zero-extended). Leaf hash = keccak256(chunk); the tree is
MerkleCommitment's: leaf node H(0x00 ‖ leaf hash), inner node H(0x01 ‖ left ‖ right), zero
padding nodes up to a power of two. The root does not hold the shape or the dtype: the
program (or a checkpoint's layout hash) fixes them.

A range proof for the leaves [lo, hi) lists, level by level from the bottom, the left
sibling of the range's first node when it is a right child, then the right sibling of its
last node when that is a left child.
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import NumericsError
from ..hashing import keccak256
from ..merkle import inner_node, leaf_node, tree_levels

CHUNK = 64
CHUNK_BYTES = 4 * CHUNK
CANONICAL_NAN = 0x7FC00000
CANONICAL_NAN64 = 0x7FF8000000000000


#: dtype -> (words an element, NaNs made canonical): the layouts a tree holds
LAYOUTS = {torch.float32: (1, True), torch.float64: (2, True), torch.int64: (2, False), torch.int32: (1, False)}


def in_layout(t: torch.Tensor) -> torch.Tensor:
    """``t`` (detached, on the CPU) in a dtype of :data:`LAYOUTS`: uint8 and bool zero-extended
    to int32, a narrower float widened to float32 (exact); any other dtype raises
    :class:`NumericsError`."""
    t = t.detach().cpu()
    if t.dtype in LAYOUTS:
        return t
    if t.dtype in (torch.uint8, torch.bool):
        return t.to(torch.int32)
    if t.is_floating_point():
        return t.to(torch.float32)
    raise NumericsError(f"no canonical layout for a {t.dtype} tensor")


def words_of(dtype: torch.dtype) -> int:
    """Words an element of a ``dtype`` tensor takes in the canonical layout (1 or 2)."""
    return LAYOUTS.get(dtype, (1,))[0]


def canonical_bits(t: torch.Tensor) -> np.ndarray:
    """The tensor's words in the canonical layout, flattened row-major (uint32): float32 and
    int32 one word an element, float64 and int64 two (high first); NaNs canonical."""
    t = in_layout(t)
    wide, canonical = LAYOUTS[t.dtype]
    if wide == 2:
        b = t.contiguous().view(torch.int64).reshape(-1).numpy().view(np.uint64)
        if canonical:
            b = np.where((b & np.uint64(0x7FFFFFFFFFFFFFFF)) > np.uint64(0x7FF0000000000000), np.uint64(CANONICAL_NAN64), b)
        return np.stack([b >> np.uint64(32), b & np.uint64(0xFFFFFFFF)], axis=-1).reshape(-1).astype(np.uint32)
    bits = t.contiguous().view(torch.int32).reshape(-1).numpy().view(np.uint32)
    return np.where((bits & 0x7FFFFFFF) > 0x7F800000, np.uint32(CANONICAL_NAN), bits) if canonical else bits


def chunked(t: torch.Tensor) -> tuple[int, bytes]:
    """``(words, bytes)``: the tensor's words in the canonical layout, big-endian, the last
    chunk zero-padded (what the leaves hash)."""
    bits = canonical_bits(t)
    if bits.size == 0:
        raise NumericsError("a tensor root needs at least one element")
    pad = (-bits.size) % CHUNK
    return int(bits.size), np.concatenate([bits, np.zeros(pad, np.uint32)]).astype(">u4").tobytes()


class TensorTree:
    """The Merkle tree of one tensor in the canonical layout: its ``root`` and range
    openings (:meth:`open`, by word)."""

    def __init__(self, t: torch.Tensor):
        self.numel, self.data = chunked(t)
        count = len(self.data) // CHUNK_BYTES
        self.levels = tree_levels([leaf_node(keccak256(self.data[i * CHUNK_BYTES:(i + 1) * CHUNK_BYTES]))
                                   for i in range(count)])

    @property
    def root(self) -> bytes:
        return self.levels[-1][0]

    def open(self, start: int, count: int) -> tuple[bytes, list[bytes]]:
        """``(chunks, proof)`` opening elements [start, start + count)."""
        lo, hi = leaf_range(start, count, self.numel)
        proof, last = [], hi - 1
        for level in self.levels[:-1]:
            if lo & 1:
                proof.append(level[lo - 1])
            if not last & 1:
                proof.append(level[last + 1])
            lo, last = lo >> 1, last >> 1
        lo, hi = leaf_range(start, count, self.numel)
        return self.data[lo * CHUNK_BYTES:hi * CHUNK_BYTES], proof

    def row(self, i: int, cols: int) -> tuple[bytes, list[bytes]]:
        """The opening of row ``i`` of the tensor seen as (rows, cols)."""
        return self.open(i * cols, cols)


def ceil_log2(n: int) -> int:
    return max(0, (int(n) - 1).bit_length())


def leaf_range(start: int, count: int, numel: int) -> tuple[int, int]:
    """The leaves [lo, hi) that hold elements [start, start + count)."""
    if count <= 0 or start < 0 or start + count > numel:
        raise NumericsError(f"elements [{start}, {start + count}) are not inside a tensor of {numel}")
    return start // CHUNK, (start + count + CHUNK - 1) // CHUNK


def range_root(numel: int, start: int, count: int, chunks: bytes, proof: list[bytes]) -> bytes:
    """The root an opening implies (what the contract computes); raises
    :class:`NumericsError` for an opening of the wrong size."""
    lo, hi = leaf_range(start, count, numel)
    if len(chunks) != (hi - lo) * CHUNK_BYTES:
        raise NumericsError(f"an opening of leaves [{lo}, {hi}) needs {(hi - lo) * CHUNK_BYTES} bytes")
    nodes = [leaf_node(keccak256(chunks[i:i + CHUNK_BYTES])) for i in range(0, len(chunks), CHUNK_BYTES)]
    siblings, last = iter(proof), hi - 1
    try:
        for _ in range(ceil_log2((numel + CHUNK - 1) // CHUNK)):
            if lo & 1:
                nodes.insert(0, next(siblings))
            if not last & 1:
                nodes.append(next(siblings))
            nodes = [inner_node(nodes[i], nodes[i + 1]) for i in range(0, len(nodes), 2)]
            lo, last = lo >> 1, last >> 1
    except StopIteration:
        raise NumericsError("the range proof is too short") from None
    if next(siblings, None) is not None:
        raise NumericsError("the range proof is too long")
    return nodes[0]


def elements(chunks: bytes, start: int, count: int) -> list[int]:
    """The bit patterns of elements [start, start + count) in an opening's ``chunks``."""
    first = (start % CHUNK) * 4
    body = chunks[first:first + 4 * count]
    return [int.from_bytes(body[i:i + 4], "big") for i in range(0, len(body), 4)]
