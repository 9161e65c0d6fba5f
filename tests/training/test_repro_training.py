"""Reproducible training: same checkpoint hashes across processes, thread counts,
micro-batch splits and GEMM routes (int8 kernel vs its float64 fallback); replay from a
middle checkpoint; aggregation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from truetrain.errors import DatasetError, ReproducibilityError, TrainingError
from truetrain.training import (Contribution, aggregate, decode_checkpoint, initial_model,
                                merkle_proof, replay, run_task, verify_proof)

ROOT = Path(__file__).resolve().parents[2]

# Runs in a fresh interpreter: one task per micro-batch setting, prints the hashes. The
# GEMM route is chosen first: the float64 fallback, or int8 on every product however small.
CHILD = r"""
import json, sys, torch
threads, manifest_path, shard_path, micros, route = sys.argv[1:6]
torch.set_num_threads(int(threads))
from truetrain.training import load_manifest, run_task
from truetrain.training.gemm_check import engine_for
engine_for("cpu", route, small_product=0)
manifest = load_manifest(open(manifest_path).read())
shard = open(shard_path, "rb").read()
out = {}
for micro in json.loads(micros):
    r = run_task(manifest, shard, None, 0, 0, micro_batch=micro)
    out[str(micro)] = {"hashes": [h.hex() for h in r.checkpoint_hashes],
                       "root": r.merkle_root.hex(), "threads": torch.get_num_threads()}
print(json.dumps(out))
"""

JOBS = {
    "mlp-sgd": dict(model={"kind": "mlp", "widths": [64, 48, 10]},
                    optimizer={"kind": "sgd", "lr": 0.1, "momentum": 0.9,
                               "weight_decay": 0.0001}),
    "cnn-adam": dict(model={"kind": "cnn", "in_shape": [1, 8, 8], "channels": [4, 8],
                            "kernel": 3, "classes": 10},
                     optimizer={"kind": "adam", "lr": 0.003, "betas": [0.9, 0.99]},
                     steps_per_task=20, checkpoint_interval=5),
    "mlp-adam-3limbs": dict(model={"kind": "mlp", "widths": [64, 40, 10]},
                            optimizer={"kind": "adam", "lr": 0.003}, limbs=3,
                            steps_per_task=20, checkpoint_interval=5),
    # warm-up, cosine and a clip tight enough to act on every step
    "mlp-adamw-clipped": dict(model={"kind": "mlp", "widths": [64, 40, 10]},
                              optimizer={"kind": "adamw", "lr": 0.003, "warmup_steps": 5,
                                         "clip_norm": 0.05},
                              steps_per_task=20, checkpoint_interval=5),
}


def _children(tmp_path, manifest, shard, micros):
    (tmp_path / "m.json").write_bytes(manifest.to_bytes())
    (tmp_path / "s.bin").write_bytes(shard)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [subprocess.Popen(
        [sys.executable, "-c", CHILD, str(threads), str(tmp_path / "m.json"),
         str(tmp_path / "s.bin"), json.dumps(micros), route],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for threads, route in ((1, "float64"), (2, "int8"))]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    return results


@pytest.mark.parametrize("job", sorted(JOBS))
def test_runTask_separateProcesses_threadsMicroBatchesAndGemmRoutes_sameHashes(
        job, tmp_path, digits1, make_manifest):
    shards, test = digits1
    manifest = make_manifest(shards, test, batch_size=48, **JOBS[job])
    here = run_task(manifest, shards[0], None, 0, 0)
    one, two = _children(tmp_path, manifest, shards[0], [None, 16, 13])
    assert one["None"]["threads"] == 1 and two["None"]["threads"] == 2
    expected = [h.hex() for h in here.checkpoint_hashes]
    assert len(expected) == manifest.steps_per_task // manifest.checkpoint_interval + 1
    assert len(set(expected)) == len(expected)  # training really moved
    for result in (one, two):
        for micro, r in result.items():
            assert r["hashes"] == expected, (job, micro)
            assert r["root"] == here.merkle_root.hex()


def test_replay_fromMiddleCheckpoint_equalsOriginal(digits1, make_manifest):
    shards, test = digits1
    manifest = make_manifest(shards, test, steps_per_task=30, checkpoint_interval=10,
                             optimizer={"kind": "adam", "lr": 0.003})
    result = run_task(manifest, shards[0], None, 0, 0)
    middle = decode_checkpoint(result.checkpoints[1])
    assert middle.step == 10
    again = replay(manifest, shards[0], middle, 10)
    assert again.step == 20 and again.hash() == result.checkpoint_hashes[2]
    # a referee's one-step replay, then the rest, from the re-run: same end state
    step11 = replay(manifest, shards[0], result.checkpoints[1], 1, micro_batch=8)
    end = replay(manifest, shards[0], step11, 19)
    assert end.hash() == result.checkpoint_hashes[3]
    for i, leaf in enumerate(result.checkpoint_hashes):
        assert verify_proof(result.merkle_root, i, leaf,
                            merkle_proof(result.checkpoint_hashes, i))


def test_runTask_otherRoundOrShard_otherBatchOrder(digits3, make_manifest):
    shards, test = digits3
    manifest = make_manifest(shards, test, steps_per_task=10, checkpoint_interval=5,
                             rounds=2)
    a = run_task(manifest, shards[0], None, 0, 0)
    b = run_task(manifest, shards[0], None, 0, 1)
    assert a.checkpoint_hashes[0] != b.checkpoint_hashes[0]  # task key is in checkpoint 0
    assert a.samples_trained == 10 * 64 and a.metrics["steps"] == 10


def test_aggregate_bitReproducible_andWeightedMean(digits3, make_manifest):
    shards, test = digits3
    manifest = make_manifest(shards, test, steps_per_task=10, checkpoint_interval=10)
    results = [run_task(manifest, s, None, i, 0) for i, s in enumerate(shards)]
    weights = [100, 300, 50]
    contribs = [Contribution(i, w, r.final_checkpoint)
                for i, (w, r) in enumerate(zip(weights, results))]
    agg = aggregate(manifest, 0, contribs)
    assert aggregate(manifest, 0, list(reversed(contribs))).hash() == agg.hash()
    assert agg.step == 1 and set(agg.tensors) == {"model." + k for k in
                                                   decode_checkpoint(results[0].checkpoints[0])
                                                   .group("model")}
    params = [decode_checkpoint(r.final_checkpoint).group("model") for r in results]
    for name, value in agg.group("model").items():
        expected = sum(w * p[name].double() for w, p in zip(weights, params)) / sum(weights)
        assert torch.allclose(value.double(), expected, rtol=1e-6, atol=1e-7)
    equal = aggregate(manifest, 0, results)  # TaskResults: weights = samples trained
    for name, value in equal.group("model").items():
        mean = sum(p[name].double() for p in params) / 3
        assert torch.allclose(value.double(), mean, rtol=1e-6, atol=1e-7)


def test_runTask_diverging_raisesReproducibilityError(digits1, make_manifest):
    shards, test = digits1
    manifest = make_manifest(shards, test, steps_per_task=20, checkpoint_interval=10,
                             optimizer={"kind": "sgd", "lr": 1e30})
    with pytest.raises(ReproducibilityError):
        run_task(manifest, shards[0], None, 0, 0)


def test_runTask_wrongShardBytes_orIndex_refused(digits3, make_manifest):
    shards, test = digits3
    manifest = make_manifest(shards, test)
    with pytest.raises(DatasetError, match="hash"):
        run_task(manifest, shards[1], None, 0, 0)
    with pytest.raises(TrainingError, match="out of range"):
        run_task(manifest, shards[0], None, 3, 0)


def test_runTask_fromGlobalCheckpoint_usesItsModel(digits1, make_manifest):
    shards, test = digits1
    manifest = make_manifest(shards, test, steps_per_task=10, checkpoint_interval=10)
    start = initial_model(manifest)
    a = run_task(manifest, shards[0], start.to_bytes(), 0, 0)
    b = run_task(manifest, shards[0], None, 0, 0)
    assert a.checkpoint_hashes == b.checkpoint_hashes
    moved = aggregate(manifest, 0, [a])
    c = run_task(manifest, shards[0], moved, 0, 0)
    assert c.checkpoint_hashes[0] != a.checkpoint_hashes[0]
    assert torch.equal(decode_checkpoint(c.checkpoints[0]).tensors["model.fc.0.weight"],
                       moved.tensors["model.fc.0.weight"])
