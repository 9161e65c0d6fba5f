"""AdamW with warm-up, cosine schedule and global-norm clipping: the schedule's numbers,
the exact norm, the manifest fields, the schedule's position across rounds and replays,
and repro against stock."""

from __future__ import annotations

import math

import pytest
import torch

from truetrain.errors import ManifestError
from truetrain.training import decode_checkpoint, evaluate, load_manifest, replay, run_task, task_start
from truetrain.training.schedule import clip_factor, cos_pi, global_norm, lr_factor

ADAMW = {"kind": "adamw", "lr": 0.003, "warmup_steps": 10, "clip_norm": 0.5}


def test_cosPi_matchesMathCos_andEndpoints():
    assert cos_pi(0.0) == 1.0 and cos_pi(1.0) == -1.0
    for i in range(101):
        x = i / 100
        assert abs(cos_pi(x) - math.cos(math.pi * x)) < 4e-16
    assert cos_pi(-3.0) == 1.0 and cos_pi(7.0) == -1.0  # clamped to [0, 1]


def test_lrFactor_warmupThenCosineToFloor():
    assert [lr_factor(s, 4, 20, 0.1) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert lr_factor(4, 4, 20, 0.1) == 1.0  # the peak, where the cosine starts
    assert lr_factor(12, 4, 20, 0.1) == pytest.approx(0.55, abs=1e-15)  # halfway down
    assert lr_factor(20, 4, 20, 0.1) == pytest.approx(0.1, abs=1e-16) == lr_factor(500, 4, 20, 0.1)
    falling = [lr_factor(s, 4, 20, 0.1) for s in range(4, 21)]
    assert falling == sorted(falling, reverse=True)
    assert lr_factor(0, 0, 10, 0.0) == 1.0 and lr_factor(10, 0, 10, 0.0) == 0.0


def test_globalNorm_exactAndOrderFree_clipBoundsIt():
    gen = torch.Generator().manual_seed(3)
    grads = [torch.randn(40, 30, generator=gen) * 1e-3, torch.randn(30, generator=gen) * 5,
             torch.zeros(7), torch.randn(3, 3, 3, generator=gen) * 1e-30]
    norm = global_norm(grads)
    ref = math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads))
    # squares on one grid of 2**-(53 - log2(count)) of the largest: within count * 2**-42 of exact
    assert norm.dtype == torch.float64 and abs(float(norm) - ref) <= 1e-12 * ref
    flat = torch.cat([g.reshape(-1) for g in grads])
    assert torch.equal(global_norm(list(reversed(grads))), norm)
    assert torch.equal(global_norm([flat[:5], flat[5:]]), norm)  # any split, same bits
    factor = clip_factor(grads, 1.0)
    assert factor.dtype == torch.float32 and float(factor) < 1.0
    clipped = math.sqrt(sum(float(((g * factor).double() ** 2).sum()) for g in grads))
    assert clipped <= 1.0 + 1e-6
    assert float(clip_factor(grads, 1e9)) == 1.0  # a norm under the clip is left alone


def test_manifest_adamw_defaultsAndRefusals(digits1, make_manifest):
    shards, test = digits1
    m = make_manifest(shards, test, optimizer={"kind": "adamw", "lr": 0.01}, rounds=3,
                      steps_per_task=40, checkpoint_interval=10)
    spec = m.optimizer
    assert (spec.betas, spec.weight_decay, spec.warmup_steps, spec.total_steps, spec.min_lr_ratio,
            spec.clip_norm) == ((0.9, 0.95), 0.1, 0, 120, 0.1, 1.0)
    assert spec.lr_at(0) == pytest.approx(0.01) and spec.lr_at(120) == pytest.approx(0.001, rel=1e-6)
    with pytest.raises(ManifestError, match=r"^optimizer.warmup_steps: 200 is more than the 120 inner steps"):
        make_manifest(shards, test, optimizer={"kind": "adamw", "lr": 0.01, "warmup_steps": 200},
                      rounds=3, steps_per_task=40, checkpoint_interval=10)
    with pytest.raises(ManifestError, match=r"^optimizer.clip_norm: expected"):
        make_manifest(shards, test, optimizer={"kind": "adamw", "lr": 0.01, "clip_norm": -1})
    with pytest.raises(ManifestError, match=r"^optimizer.momentum: unknown field"):
        make_manifest(shards, test, optimizer={"kind": "adamw", "lr": 0.01, "momentum": 0.9})
    with pytest.raises(ManifestError, match=r"^optimizer.kind: expected 'sgd', 'adam' or 'adamw', got 'lion'"):
        make_manifest(shards, test, optimizer={"kind": "lion", "lr": 0.01})


def test_schedulePosition_followsTheRound_andReplays(digits1, make_manifest):
    shards, test = digits1
    m = make_manifest(shards, test, optimizer=ADAMW, rounds=3, steps_per_task=20, checkpoint_interval=10)
    start = task_start(m, None, 0, 2)
    assert int(start.group("optim")["lr_step"]) == 40  # round 2 of 20-step tasks
    result = run_task(m, shards[0], None, 0, 2)
    middle, end = (decode_checkpoint(c) for c in result.checkpoints[1:])
    assert int(middle.group("optim")["lr_step"]) == 50 and int(end.group("optim")["lr_step"]) == 60
    assert replay(m, shards[0], middle, 10).hash() == result.checkpoint_hashes[2]
    assert run_task(m, shards[0], None, 0, 0).checkpoint_hashes[1] != result.checkpoint_hashes[1]


def test_adamw_reproAndStock_bothLearn_andAgree(digits1, make_manifest):
    shards, test = digits1
    accuracy, steps = {}, {}
    for mode in ("repro", "stock"):
        extra = {} if mode == "stock" else {"limbs": 2}
        m = make_manifest(shards, test, optimizer=dict(ADAMW, lr=0.01), numeric_mode=mode,
                          steps_per_task=150, checkpoint_interval=150, **extra)
        result = run_task(m, shards[0], None, 0, 0)
        final = decode_checkpoint(result.final_checkpoint)
        steps[mode] = int(final.group("optim")["lr_step"])
        accuracy[mode] = evaluate(load_manifest(m.to_bytes()), final, test)
    assert steps == {"repro": 150, "stock": 150}
    assert accuracy["repro"] > 0.9 and accuracy["stock"] > 0.9
    assert abs(accuracy["repro"] - accuracy["stock"]) < 0.03
