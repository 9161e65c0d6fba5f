"""The one-step update and aggregation elements (contracts/numerics/OneStepOptim.sol)
against the engine (truetrain/training/optim.py ``repro_update``: Adam, AdamW with clipping,
SGD with momentum; truetrain/training/aggregate.py: FedAvg, DiLoCo's outer step) and the
reference (truetrain/numerics/optim_element.py), bit for bit: 2,000+ generated elements a
kind through OneStepOptimHarness's batches (tests/contracts/optim_cases.py), then single
elements opened against their tensors' roots (TensorMerkle), and the custom errors."""

from __future__ import annotations

import brownie
import numpy as np
import pytest
import torch

from tests.contracts.helpers import assert_headroom
from tests.contracts.onestep_kinds import assert_kind_matches, descriptor, opening, tensor_of as _t
from tests.contracts.optim_cases import adam_case, aggregate_case, check, f32, sgd_case
from truetrain.numerics.optim_element import (AdamScalars, OuterScalars, SgdScalars, adam_element,
                                              aggregate_element, sgd_element)
from truetrain.numerics.tensor_merkle import TensorTree

# (kind, elements a case): 2,048 elements a kind; an aggregation case is a whole small MLP
# (8 x 15 weights and 8 biases) of 1 to 8 workers
PLAN = [("adam", 64), ("sgd", 64), ("aggregate", 128)]


@pytest.fixture(scope="module")
def harness(OneStepOptimHarness, accounts):
    return OneStepOptimHarness.deploy({"from": accounts[0]})


@pytest.mark.parametrize("kind,n", PLAN)
def test_batch_matchesEngineAndReference_bitForBit(harness, kind, n):
    assert assert_kind_matches(harness, check, kind, n) >= 2_000


def _opened(ts: list[torch.Tensor], index: int):
    """Tensor descriptors and the openings of element ``index`` (0 for 0-dim tensors)."""
    trees = [TensorTree(t) for t in ts]
    descs = [descriptor(tr, t.shape[0] if t.dim() else 1, t.numel() // (t.shape[0] if t.dim() else 1))
             for t, tr in zip(ts, trees)]
    return descs, [opening(tr, index if t.dim() else 0) for t, tr in zip(ts, trees)]


def _scalar(bits: int) -> torch.Tensor:
    return torch.tensor(np.uint32(bits).view(np.float32))


def test_adamElement_opensRoots_matchesEngine(harness):
    rng = np.random.default_rng(5)
    for _ in range(4):
        c = adam_case(rng, 300)  # (20, 15): rows straddle chunks, a 5-leaf tree
        a, i = c.attrs, c.inputs
        ts = [_t(i[k]).view(20, 15) for k in ("p", "g", "m", "v")] + [_scalar(c.scalars[k]) for k in ("b1p", "b2p", "clip")]
        for index in (0, 299, int(rng.integers(300))):
            descs, opens = _opened(ts, index)
            got = harness.adamElement.call((a.lr, a.weight_decay, a.beta1, a.beta2, a.eps, a.decoupled, a.clipped),
                                           descs, index, opens)
            assert list(got) == [int(c.outputs[k][index]) for k in ("p", "m", "v")]
        got = harness.adamPowersElement.call((a.lr, a.weight_decay, a.beta1, a.beta2, a.eps, a.decoupled, a.clipped),
                                             descs[4:6], opens[4:6])
        assert list(got) == [int(v) for v in c.outputs["powers"]]  # the state's new beta1/beta2_power


def test_sgdElement_opensRoots_matchesEngine(harness):
    rng = np.random.default_rng(6)
    for _ in range(4):
        c = sgd_case(rng, 130)
        a, i = c.attrs, c.inputs
        ts = [_t(i[k]) for k in ("p", "g", "buf")]
        for index in (0, 129, 64):
            descs, opens = _opened(ts, index)
            got = harness.sgdElement.call((a.lr, a.weight_decay, a.momentum), descs, index, opens)
            assert list(got) == [int(c.outputs["p"][index]), int(c.outputs["buf"][index])]


def test_aggregateElement_opensRoots_matchesEngine(harness):
    rng = np.random.default_rng(8)
    seen = set()
    while len(seen) < 3:
        c = aggregate_case(rng)
        a, i = c.attrs, c.inputs
        kind = (a.outer, bool(i["momentum"].any()))
        seen.add(kind)
        ts = [_t(i["theta"]), _t(i["momentum"])] + [_t(i[f"x{k}"]) for k in range(len(c.weights))]
        for index in (0, 127, 100):
            descs, opens = _opened(ts, index)
            if not i["momentum"].any():
                descs[1] = ("0x" + "00" * 32, 0, 0)  # no momentum buffer yet
            got = harness.aggregateElement.call((a.outer, a.lr, a.momentum, a.nesterov), c.weights, descs, index, opens)
            assert list(got)[0] == int(c.outputs["model"][index])
            if a.outer:
                assert list(got)[1] == int(c.outputs["momentum"][index])


def test_referenceScalars_edgeSemantics():
    """The engine's quirks the element keeps: AdamW with lr * wd rounding to 0 decays the
    gradient as Adam does; a ±0 hyperparameter skips its term (a -0 gradient stays -0)."""
    one, neg0 = f32(1.0), 0x80000000
    s = AdamScalars(lr=0, weight_decay=f32(0.5), beta1=0, beta2=0, eps=one, decoupled=True)
    _, m, _ = adam_element(s, f32(2.0), 0, 0, 0, one, one)
    assert m == f32(1.0)  # g + p * wd = 0 + 2 * 0.5
    sgd_attrs = SgdScalars(lr=one, weight_decay=neg0, momentum=0)
    assert sgd_element(sgd_attrs, 0, neg0) == (0, 0)  # 0 - (-0 * 1) = +0, no weight-decay term
    outer = OuterScalars(outer=False)
    assert aggregate_element(outer, [neg0, neg0], [3, 5])[0] == 0  # the float64 sum starts at +0


def test_badOperands_revertWithTheirErrors(harness):
    c = sgd_case(np.random.default_rng(9), 64)
    a, i = c.attrs, c.inputs
    ts = [_t(i[k]) for k in ("p", "g", "buf")]
    descs, opens = _opened(ts, 3)
    attrs = (a.lr, a.weight_decay, f32(0.9))
    with brownie.reverts("OneStepOperandsMismatch: 1"):
        harness.sgdElement.call(attrs, [descs[0], (descs[1][0], 2, 32), descs[2]], 3, opens)
    with brownie.reverts(f"TensorOpeningInvalid: {TensorTree(ts[1]).root!r}, 0, 1"):
        harness.sgdElement.call(attrs, descs, 3, [opens[0], opens[2], opens[2]])
    with brownie.reverts("TensorRangeOutOfBounds: 64, 1, 64"):
        harness.sgdElement.call(attrs, descs, 64, opens)
    agg = (True, f32(0.7), f32(0.9), True)
    with brownie.reverts("OneStepWeightsInvalid: 3, 1"):
        harness.aggregateElement.call(agg, [0], descs, 3, opens)
    with brownie.reverts("OneStepWeightsInvalid: 3, 1"):
        harness.aggregateElement.call(agg, [2**29], descs, 3, opens)
    with brownie.reverts("OneStepWeightsInvalid: 3, 2"):
        harness.aggregateElement.call(agg, [1, 1], descs, 3, opens)
    with brownie.reverts("OneStepHarnessBatchMalformed: 8, 3"):
        harness.sgdBatch.call(attrs, b"\x00" * 8)


def test_harness_keepsBytecodeHeadroom(harness):
    assert_headroom(harness)
