"""Positional Merkle commitments over checkpoint hashes (the Solidity library agrees).

* leaf node  = keccak256(0x00 || leaf_hash32)
* inner node = keccak256(0x01 || left32 || right32)
* leaves are padded to the next power of two with padding *nodes* of 32 zero bytes
  (bytes32(0), not hashed); a one-leaf tree's root is its leaf node;
* a proof lists the sibling nodes from the bottom up (length log2(padded size)); bit i of
  the index (LSB first) set means the current node is the right child at level i.
"""

from __future__ import annotations

from ..errors import TrainingError
from ..hashing import keccak256

ZERO = bytes(32)


def leaf_node(leaf: bytes) -> bytes:
    return keccak256(b"\x00" + _check32(leaf))


def inner_node(left: bytes, right: bytes) -> bytes:
    return keccak256(b"\x01" + left + right)


def _check32(value: bytes) -> bytes:
    if not isinstance(value, (bytes, bytearray)) or len(value) != 32:
        raise TrainingError("Merkle leaves and nodes must be 32 bytes")
    return bytes(value)


def _levels(leaves) -> list[list[bytes]]:
    if not leaves:
        raise TrainingError("a Merkle tree needs at least one leaf")
    level = [leaf_node(x) for x in leaves]
    size = 1
    while size < len(level):
        size *= 2
    level += [ZERO] * (size - len(level))
    levels = [level]
    while len(level) > 1:
        level = [inner_node(level[i], level[i + 1]) for i in range(0, len(level), 2)]
        levels.append(level)
    return levels


def merkle_root(leaves) -> bytes:
    """Root over the 32-byte ``leaves`` (checkpoint hashes, in checkpoint order)."""
    return _levels(list(leaves))[-1][0]


def merkle_proof(leaves, index: int) -> list[bytes]:
    """Sibling nodes, bottom to top, proving ``leaves[index]``."""
    leaves = list(leaves)
    if not 0 <= index < len(leaves):
        raise TrainingError(f"leaf index {index} out of range 0..{len(leaves) - 1}")
    proof = []
    for level in _levels(leaves)[:-1]:
        proof.append(level[index ^ 1])
        index >>= 1
    return proof


def verify_proof(root: bytes, index: int, leaf: bytes, proof) -> bool:
    """True when ``proof`` shows ``leaf`` at position ``index`` under ``root``."""
    if index < 0 or index >> len(proof):
        return False
    node = leaf_node(leaf)
    for i, sibling in enumerate(proof):
        _check32(sibling)
        node = inner_node(sibling, node) if (index >> i) & 1 else inner_node(node, sibling)
    return node == root
