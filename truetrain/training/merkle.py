"""Positional Merkle commitments over checkpoint hashes (the Solidity library agrees).

* leaf node  = keccak256(0x00 || leaf_hash32)
* inner node = keccak256(0x01 || left32 || right32)
* leaves are padded to the next power of two with padding *nodes* of 32 zero bytes
  (bytes32(0), not hashed); a one-leaf tree's root is its leaf node;
* a proof lists the sibling nodes from the bottom up (length log2(padded size)); bit i of
  the index (LSB first) set means the current node is the right child at level i.
"""

from __future__ import annotations

from .. import merkle as _tree
from ..errors import TrainingError
from ..merkle import ZERO, inner_node, tree_levels

__all__ = ["ZERO", "inner_node", "leaf_node", "merkle_proof", "merkle_root", "verify_proof"]


def leaf_node(leaf: bytes) -> bytes:
    return _tree.leaf_node(_check32(leaf))


def _check32(value: bytes) -> bytes:
    if not isinstance(value, (bytes, bytearray)) or len(value) != 32:
        raise TrainingError("Merkle leaves and nodes must be 32 bytes")
    return bytes(value)


def _levels(leaves) -> list[list[bytes]]:
    if not leaves:
        raise TrainingError("a Merkle tree needs at least one leaf")
    return tree_levels([leaf_node(x) for x in leaves])


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
