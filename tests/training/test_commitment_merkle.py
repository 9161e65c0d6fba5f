"""Positional Merkle commitments: every proof verifies, tampering fails, doc vector."""

from __future__ import annotations

import pytest

from truetrain.errors import TrainingError
from truetrain.hashing import keccak256
from truetrain.training import merkle_proof, merkle_root, verify_proof

DOC_ROOT = "d0d3e065b640b24dc91121893f6e0c63c8c04b012c004571bed73b6dbcae5713"


def _leaves(n):
    return [keccak256(b"leaf" + bytes([i])) for i in range(n)]


def test_root_docVector_abc():
    leaves = [keccak256(x) for x in (b"a", b"b", b"c")]
    assert merkle_root(leaves).hex() == DOC_ROOT
    # the same root written out from the scheme's definition
    node = [keccak256(b"\x00" + x) for x in leaves] + [bytes(32)]
    left = keccak256(b"\x01" + node[0] + node[1])
    right = keccak256(b"\x01" + node[2] + node[3])
    assert keccak256(b"\x01" + left + right).hex() == DOC_ROOT


def test_root_singleLeaf_isLeafNode():
    leaf = keccak256(b"only")
    assert merkle_root([leaf]) == keccak256(b"\x00" + leaf)
    assert merkle_proof([leaf], 0) == []
    assert verify_proof(merkle_root([leaf]), 0, leaf, [])


@pytest.mark.parametrize("n", range(1, 10))
def test_proof_everyIndex_verifies_andTamperingFails(n):
    leaves = _leaves(n)
    root = merkle_root(leaves)
    depth = (n - 1).bit_length()
    for i, leaf in enumerate(leaves):
        proof = merkle_proof(leaves, i)
        assert len(proof) == depth
        assert verify_proof(root, i, leaf, proof)
        assert not verify_proof(root, i, keccak256(b"wrong"), proof)
        if n > 1:
            assert not verify_proof(root, (i + 1) % n, leaf, proof)
            bad = list(proof)
            bad[0] = keccak256(bad[0])
            assert not verify_proof(root, i, leaf, bad)
        assert not verify_proof(root, i + (1 << depth), leaf, proof)
        assert not verify_proof(root, -1, leaf, proof)


def test_proof_outOfRange_orEmptyTree_raises():
    with pytest.raises(TrainingError):
        merkle_proof(_leaves(3), 3)
    with pytest.raises(TrainingError):
        merkle_root([])
    with pytest.raises(TrainingError):
        merkle_root([b"short"])
