"""DiLoCo rounds: the outer Nesterov step on the pseudo-gradient, its momentum kept in the
global checkpoint, FedAvg unchanged without ``outer``, and the manifest's refusals."""

from __future__ import annotations

import pytest
import torch

from truetrain.errors import ManifestError
from truetrain.training import Contribution, aggregate, decode_checkpoint, run_task
from truetrain.training.task import initial_model

OUTER = {"lr": 0.7, "momentum": 0.9}


def _round(manifest, shards, round_index, start):
    results = [run_task(manifest, s, start, i, round_index) for i, s in enumerate(shards)]
    return results, aggregate(manifest, round_index, results, start)


def test_outerStep_nesterovOnPseudoGradient_momentumCarried(digits3, make_manifest):
    shards, test = digits3
    m = make_manifest(shards, test, steps_per_task=10, checkpoint_interval=10, rounds=2, outer=OUTER)
    start = initial_model(m)
    results, g1 = _round(m, shards, 0, None)
    theta = start.group("model")
    locals_ = [decode_checkpoint(r.final_checkpoint).group("model") for r in results]
    for name, value in g1.group("model").items():
        mean = sum(p[name].double() for p in locals_) / 3
        delta = theta[name].double() - mean
        want = theta[name].double() - 0.7 * (delta + 0.9 * delta)  # v = delta in round 0
        assert torch.allclose(value.double(), want, rtol=1e-5, atol=1e-7)
        assert torch.allclose(g1.group("outer.momentum")[name].double(), delta, atol=1e-7)
    # contributions in any order, and the same bytes as a checkpoint: same global model
    assert aggregate(m, 0, list(reversed(results)), None).hash() == g1.hash()
    results2, g2 = _round(m, shards, 1, g1.to_bytes())
    v1, v2 = g1.group("outer.momentum"), g2.group("outer.momentum")
    locals2 = [decode_checkpoint(r.final_checkpoint).group("model") for r in results2]
    name = "fc.0.weight"
    delta2 = g1.group("model")[name].double() - sum(p[name].double() for p in locals2) / 3
    assert torch.allclose(v2[name].double(), 0.9 * v1[name].double() + delta2, atol=1e-7)
    assert g2.step == 2


def test_withoutOuter_fedAvg_unchanged(digits3, make_manifest):
    shards, test = digits3
    m = make_manifest(shards, test, steps_per_task=10, checkpoint_interval=10)
    results = [run_task(m, s, None, i, 0) for i, s in enumerate(shards)]
    merged = aggregate(m, 0, results)
    assert set(merged.tensors) == {"model." + k for k in initial_model(m).group("model")}
    contribs = [Contribution(i, r.samples_trained, r.final_checkpoint) for i, r in enumerate(results)]
    assert aggregate(m, 0, contribs, initial_model(m)).hash() == merged.hash()  # start unused


@pytest.mark.parametrize("outer, message", [
    ({"lr": 0}, "outer.lr: expected a number in (0, 10]"),
    ({"momentum": 1.0}, "outer.momentum: expected a number in [0, 1)"),
    ({"nesterov": "yes"}, "outer.nesterov: expected true or false, got 'yes'"),
    ({"beta": 0.5}, "outer.beta: unknown field"),
])
def test_manifest_outer_refusals(digits1, make_manifest, outer, message):
    shards, test = digits1
    with pytest.raises(ManifestError) as err:
        make_manifest(shards, test, outer=outer)
    assert str(err.value).startswith(message)
