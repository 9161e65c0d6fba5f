"""The nodes and levels of the project's Merkle trees, as contracts/libraries/MerkleCommitment
agrees: leaf node keccak256(0x00 ‖ leaf hash), inner node keccak256(0x01 ‖ left ‖ right),
leaf nodes padded to a power of two with 32 zero bytes (not hashed). One home for the
checkpoint commitments (truetrain.training.merkle) and the tensor roots of the one-step
verifier (truetrain.numerics.tensor_merkle), which may not import from training."""

from __future__ import annotations

from .hashing import keccak256

ZERO = bytes(32)


def leaf_node(leaf_hash: bytes) -> bytes:
    return keccak256(b"\x00" + leaf_hash)


def inner_node(left: bytes, right: bytes) -> bytes:
    return keccak256(b"\x01" + left + right)


def tree_levels(nodes: list[bytes]) -> list[list[bytes]]:
    """Every level of the tree over the (non-empty) leaf ``nodes``, bottom first: the leaf
    nodes padded with ZERO to a power of two, then each level's pairs hashed up to the root."""
    level = list(nodes) + [ZERO] * ((1 << (len(nodes) - 1).bit_length()) - len(nodes))
    levels = [level]
    while len(level) > 1:
        level = [inner_node(level[i], level[i + 1]) for i in range(0, len(level), 2)]
        levels.append(level)
    return levels
