"""The Python Merkle tree and the Solidity MerkleCommitment library agree.

Trees are built in Python from real checkpoint hashes of a short repro training run and
their proofs are verified on chain through contracts/test/MerkleHarness.sol (a harness
that exposes the library, not a mock).
"""

from __future__ import annotations

import brownie
import pytest

from truetrain.hashing import keccak256
from truetrain.training import run_task
from truetrain.training.merkle import leaf_node, inner_node, merkle_proof, merkle_root


@pytest.fixture(scope="module")
def harness(MerkleHarness, accounts):
    return MerkleHarness.deploy({"from": accounts[0]})


def _hex(values):
    return ["0x" + v.hex() for v in values]


def test_node_encodings_match(harness):
    leaf = keccak256(b"checkpoint")
    assert bytes(harness.leafNode(leaf)) == leaf_node(leaf)
    assert bytes(harness.parentNode(leaf, keccak256(b"x"))) == inner_node(leaf, keccak256(b"x"))


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 9])
def test_every_python_proof_verifies_on_chain(harness, size):
    leaves = [keccak256(f"ckpt-{i}".encode()) for i in range(size)]
    root = merkle_root(leaves)
    for index, leaf in enumerate(leaves):
        proof = merkle_proof(leaves, index)
        assert bytes(harness.rootFromProof(index, leaf, _hex(proof))) == root
        assert harness.verify(root, index, leaf, _hex(proof)) is True


def test_real_training_commitment_opens_on_chain(harness, digits1, make_manifest):
    shards, test = digits1
    manifest = make_manifest(shards, test, steps_per_task=20, checkpoint_interval=5)
    result = run_task(manifest, shards[0], None, 0, 0)
    assert len(result.checkpoint_hashes) == 5  # checkpoints 0, 5, 10, 15, 20
    assert merkle_root(result.checkpoint_hashes) == result.merkle_root
    for index, leaf in enumerate(result.checkpoint_hashes):
        proof = merkle_proof(result.checkpoint_hashes, index)
        assert harness.verify(result.merkle_root, index, leaf, _hex(proof)) is True


def test_wrong_leaf_or_index_fails_on_chain(harness):
    leaves = [keccak256(f"ckpt-{i}".encode()) for i in range(5)]
    root = merkle_root(leaves)
    proof = merkle_proof(leaves, 2)
    assert harness.verify(root, 2, keccak256(b"forged"), _hex(proof)) is False
    assert harness.verify(root, 3, leaves[2], _hex(proof)) is False
    with brownie.reverts(f"MerkleProofInvalid: {root!r}, 3, {leaves[2]!r}"):
        harness.requireValid(root, 3, leaves[2], _hex(proof))


def test_doc_vector_root_on_chain(harness):
    leaves = [keccak256(b"a"), keccak256(b"b"), keccak256(b"c")]
    root = merkle_root(leaves)
    for index, leaf in enumerate(leaves):
        assert bytes(harness.rootFromProof(index, leaf, _hex(merkle_proof(leaves, index)))) == root
