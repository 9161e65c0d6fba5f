"""The data plane end to end: dataset and manifest on IPFS, training, commitments, replay.

A submitter's node holds the shards and the manifest; a worker on a second node fetches and
verifies them over bitswap, trains a repro task and publishes its checkpoints; a verifier
on the first node fetches a middle checkpoint the worker wrote, replays one interval and
gets the committed leaf bit for bit. All real: two Helia dev nodes, real torch training.
"""

from __future__ import annotations

import pytest

from tests.ipfs_nodes import client_for
from truetrain.errors import ContentMismatch
from truetrain.training import (build_manifest, decode_shard, load_checkpoint, load_manifest,
                                merkle_proof, publish_dataset, replay, run_task, verify_proof)
from truetrain.training.checkpoint import fetch_checkpoint

MAX = 16 * 1024 * 1024


@pytest.fixture
def two_nodes(start_node):
    submitter_node, worker_node = start_node("submitter"), start_node("worker")
    with client_for(submitter_node) as submitter, client_for(worker_node) as worker:
        worker.connect(submitter_node.swarm_addr)
        yield submitter, worker


def test_worker_trains_from_ipfs_and_verifier_replays_its_checkpoint(two_nodes):
    submitter, worker = two_nodes
    data = publish_dataset(submitter, "digits", num_shards=2, seed=7)
    manifest = build_manifest(
        name="data-plane", seed=7, numeric_mode="repro",
        model={"kind": "mlp", "widths": [64, 32, 10]},
        optimizer={"kind": "adam", "lr": 0.01, "betas": [0.9, 0.999], "eps": 1e-8},
        batch_size=32, steps_per_task=12, checkpoint_interval=4, rounds=1, **data,
    )
    manifest_ref = submitter.add_bytes(manifest.to_bytes())

    # Worker: every input comes over bitswap from the submitter's node and is verified.
    fetched = load_manifest(worker.fetch(manifest_ref.cid, manifest_ref.hash, max_size=MAX))
    assert fetched.hash() == manifest.hash()
    shard_ref = fetched.shards[1]
    shard = worker.fetch(shard_ref.cid, shard_ref.hash, max_size=MAX)
    assert len(decode_shard(shard)) == shard_ref.samples
    result = run_task(fetched, shard, None, 1, 0)
    stored = [worker.add_bytes(c) for c in result.checkpoints]
    assert result.checkpoint_hashes == [load_checkpoint(c).hash() for c in result.checkpoints]
    assert [s.hash for s in stored] != result.checkpoint_hashes  # the commitment, not the bytes' keccak256

    # Verifier: opens checkpoint 1 (step 4) from the worker's node and replays one interval.
    middle = load_checkpoint(fetch_checkpoint(submitter, stored[1].cid, result.checkpoint_hashes[1], max_size=MAX))
    proof = merkle_proof(result.checkpoint_hashes, 2)
    replayed = replay(fetched, shard, middle, fetched.checkpoint_interval)
    assert replayed.hash() == result.checkpoint_hashes[2]
    assert verify_proof(result.merkle_root, 2, replayed.hash(), proof)


def test_a_checkpoint_under_another_hash_is_refused(two_nodes):
    submitter, worker = two_nodes
    genuine = submitter.add_bytes(b"checkpoint bytes")
    with pytest.raises(ContentMismatch):
        worker.fetch(genuine.cid, b"\x00" * 32, max_size=MAX)
    with pytest.raises(ContentMismatch, match="not a checkpoint"):  # fetched as a checkpoint: not one
        fetch_checkpoint(worker, genuine.cid, genuine.hash, max_size=MAX)
