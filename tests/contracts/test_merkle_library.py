"""MerkleCommitment through MerkleHarness: on-chain checks of small trees built by hand in
Python with keccak256 (leaf = H(0x00‖h), inner = H(0x01‖l‖r), zero padding nodes)."""

from __future__ import annotations

import brownie
import pytest

from truetrain.hashing import keccak256

ZERO = bytes(32)


def leaf_node(leaf: bytes) -> bytes:
    return keccak256(b"\x00" + leaf)


def parent_node(left: bytes, right: bytes) -> bytes:
    return keccak256(b"\x01" + left + right)


def build_levels(leaves: list[bytes]) -> list[list[bytes]]:
    """All levels bottom-up, leaves padded to a power of two with zero NODES (not hashed)."""
    size = 1
    while size < len(leaves):
        size *= 2
    level = [leaf_node(x) for x in leaves] + [ZERO] * (size - len(leaves))
    levels = [level]
    while len(level) > 1:
        level = [parent_node(level[i], level[i + 1]) for i in range(0, len(level), 2)]
        levels.append(level)
    return levels


def proof_for(levels: list[list[bytes]], index: int) -> list[bytes]:
    return [levels[depth][(index >> depth) ^ 1] for depth in range(len(levels) - 1)]


def leaves(n: int) -> list[bytes]:
    return [keccak256(f"checkpoint-{i}".encode()) for i in range(n)]


def hx(b: bytes) -> str:
    return "0x" + b.hex()


def test_leafNode_and_parentNode_matchScheme(merkle):
    leaf = keccak256(b"step 0")
    assert merkle.leafNode(hx(leaf)) == hx(leaf_node(leaf))
    left, right = keccak256(b"l"), keccak256(b"r")
    assert merkle.parentNode(hx(left), hx(right)) == hx(parent_node(left, right))
    assert merkle.parentNode(hx(left), hx(right)) != merkle.parentNode(hx(right), hx(left))


def test_singleLeaf_rootIsLeafNode(merkle):
    (leaf,) = leaves(1)
    root = leaf_node(leaf)
    assert merkle.rootFromProof(0, hx(leaf), []) == hx(root)
    assert merkle.verify(hx(root), 0, hx(leaf), []) is True
    assert merkle.verify(hx(leaf), 0, hx(leaf), []) is False  # the leaf hash itself is not the root


def test_threeLeaves_handComputedRoot_withZeroPadding(merkle):
    a, b, c = leaves(3)
    root = parent_node(parent_node(leaf_node(a), leaf_node(b)), parent_node(leaf_node(c), ZERO))
    assert build_levels([a, b, c])[-1][0] == root
    # c is index 2 = binary 10: left child at level 0 (sibling: zero padding), right at level 1.
    proof = [ZERO, parent_node(leaf_node(a), leaf_node(b))]
    assert merkle.rootFromProof(2, hx(c), [hx(p) for p in proof]) == hx(root)
    assert merkle.verify(hx(root), 2, hx(c), [hx(p) for p in proof]) is True


@pytest.mark.parametrize("count", [2, 3, 4, 5, 7, 8, 11])
def test_everyIndex_verifies(merkle, count):
    items = leaves(count)
    levels = build_levels(items)
    root = hx(levels[-1][0])
    for index, leaf in enumerate(items):
        proof = [hx(p) for p in proof_for(levels, index)]
        assert merkle.rootFromProof(index, hx(leaf), proof) == root
        assert merkle.verify(root, index, hx(leaf), proof) is True
        merkle.requireValid(root, index, hx(leaf), proof)


def test_wrongLeafIndexOrSibling_fails(merkle):
    items = leaves(4)
    levels = build_levels(items)
    root = hx(levels[-1][0])
    proof = [hx(p) for p in proof_for(levels, 1)]
    assert merkle.verify(root, 1, hx(items[2]), proof) is False  # wrong leaf
    assert merkle.verify(root, 0, hx(items[1]), proof) is False  # right leaf, wrong position
    tampered = list(proof)
    tampered[1] = hx(keccak256(b"forged"))
    assert merkle.verify(root, 1, hx(items[1]), tampered) is False
    assert merkle.verify(root, 1, hx(items[1]), proof[:1]) is False  # truncated proof


def test_innerNode_cannotPassAsLeaf(merkle):
    items = leaves(4)
    levels = build_levels(items)
    root = hx(levels[-1][0])
    # Second-preimage attempt: present the level-1 node as a "leaf" of a depth-1 tree.
    assert merkle.verify(root, 0, hx(levels[1][0]), [hx(levels[1][1])]) is False


def test_paddingPosition_cannotBeProven(merkle):
    items = leaves(3)
    levels = build_levels(items)
    root = hx(levels[-1][0])
    proof = [hx(p) for p in proof_for(levels, 3)]
    assert merkle.verify(root, 3, hx(ZERO), proof) is False


def test_requireValid_invalid_reverts(merkle):
    items = leaves(4)
    levels = build_levels(items)
    root = levels[-1][0]
    proof = [hx(p) for p in proof_for(levels, 1)]
    with brownie.reverts(f"MerkleProofInvalid: {root!r}, 1, {items[0]!r}"):
        merkle.requireValid(hx(root), 1, hx(items[0]), proof)


def test_indexBeyondTree_reverts_orIsFalse(merkle):
    items = leaves(4)
    levels = build_levels(items)
    root = hx(levels[-1][0])
    proof = [hx(p) for p in proof_for(levels, 0)]
    # index 4 = 0b100 would alias index 0 if its high bit were ignored
    assert merkle.verify(root, 4, hx(items[0]), proof) is False
    with brownie.reverts("MerkleIndexOutOfRange: 4, 2"):
        merkle.rootFromProof(4, hx(items[0]), proof)


def test_proofTooDeep_reverts_orIsFalse(merkle):
    leaf = hx(leaves(1)[0])
    proof = [hx(ZERO)] * 33
    assert merkle.verify(hx(ZERO), 0, leaf, proof) is False
    with brownie.reverts("MerkleProofTooDeep: 33"):
        merkle.rootFromProof(0, leaf, proof)
    assert merkle.rootFromProof(0, leaf, proof[:32]) != hx(ZERO)  # depth 32 is accepted
