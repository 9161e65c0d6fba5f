"""The one-step causal softmax (contracts/numerics/OneStepSoftmax.sol): the row sum (an
application of its own), the forward element given it, and the backward element, against
the engine's eager ops and C kernels and the reference (truetrain/numerics/softmax.py), bit
for bit: 2,000+ generated elements a kind through OneStepSoftmaxHarness's row batches
(tests/contracts/softmax_cases.py), then single elements opened against their roots (the
scores' rows, the row sums as a float64 tensor), the custom errors, the headroom."""

from __future__ import annotations

import brownie
import numpy as np
import pytest
import torch

from tests.contracts.helpers import assert_headroom
from tests.contracts.onestep_kinds import assert_kind_matches, descriptor, opening as _open
from tests.contracts.softmax_cases import check, scores
from truetrain.numerics.ieee import bits32, bits64
from truetrain.numerics.softmax import row_sums
from truetrain.numerics.tensor_merkle import TensorTree
from truetrain.training.ops.attention import _scale, softmax_backward, softmax_causal


def _harness(OneStepSoftmaxHarness, accounts):
    return OneStepSoftmaxHarness.deploy({"from": accounts[0]})


@pytest.mark.parametrize("kind", ["softmax_row_sum", "softmax", "softmax_backward"])
def test_rows_matchEngineAndReference_bitForBit(OneStepSoftmaxHarness, accounts, kind):
    assert assert_kind_matches(_harness(OneStepSoftmaxHarness, accounts), check, kind) >= 2_000


def test_elements_openRowsAndSums_matchEngine(OneStepSoftmaxHarness, accounts):
    harness = _harness(OneStepSoftmaxHarness, accounts)
    rng = np.random.default_rng(8)
    n, t = 2, 100  # rows of 100 straddle leaves
    s = torch.from_numpy(np.stack([scores(rng, t) for _ in range(n)]))
    rows = bits32(s.numpy()).reshape(n * t, t)
    p = softmax_causal(s)
    sums = torch.from_numpy(row_sums(rows).view(np.float64))
    ts, tsum, tp = TensorTree(s), TensorTree(sums), TensorTree(p)
    ds, dsum = descriptor(ts, n * t, t), descriptor(tsum, n * t, 2)
    want_p = bits32(p.numpy()).reshape(n * t, t)
    for r, j in ((0, 0), (t + 5, 3), (n * t - 1, t - 1), (7, 50)):
        assert harness.rowSumElement.call(ds, r, _open(ts, r * t, t)) == int(bits64(sums.numpy())[r])
        got = harness.softmaxElement.call([ds, dsum], r, j, [_open(ts, r * t, t), _open(tsum, 2 * r, 2)])
        assert got == int(want_p[r, j]), (r, j)
    dp = torch.randn(n, t, t)
    scale = _scale(64)
    want = bits32(softmax_backward(p, dp, scale).numpy()).reshape(n * t, t)
    tdp = TensorTree(dp)
    back = [descriptor(tp, n * t, t), descriptor(tdp, n * t, t)]
    for r, j in ((0, 0), (t + 9, 60)):
        got = harness.softmaxBackwardElement.call(back, bits32(np.float32(scale)), r, j,
                                                  [_open(tp, r * t, t), _open(tdp, r * t, t)])
        assert got == int(want[r, j]), (r, j)


def test_elements_badInputs_revertByName(OneStepSoftmaxHarness, accounts):
    harness = _harness(OneStepSoftmaxHarness, accounts)
    t = 64
    s = torch.randn(1, t, t)
    sums = torch.from_numpy(row_sums(bits32(s.numpy()).reshape(t, t)).view(np.float64))
    ts, tsum = TensorTree(s), TensorTree(sums)
    ds, dsum = descriptor(ts, t, t), descriptor(tsum, t, 2)
    both = [_open(ts, t, t), _open(tsum, 2, 2)]
    with brownie.reverts("OneStepShapeInvalid: 64, 0"):
        harness.rowSumElement.call(ds, t, _open(ts, 0, t))
    with brownie.reverts("OneStepShapeInvalid: 1, 64"):
        harness.softmaxElement.call([ds, dsum], 1, t, both)
    with brownie.reverts("OneStepOperandsMismatch: 1"):
        harness.softmaxElement.call([ds, descriptor(tsum, t, 1)], 1, 0, both)
    with brownie.reverts("OneStepOperandsMismatch: 1"):
        harness.softmaxBackwardElement.call([ds, descriptor(ts, t, t - 1)], 0, 1, 0, [_open(ts, t, t)] * 2)
    with brownie.reverts("OneStepShapeInvalid: 1, 64"):
        harness.softmaxBackwardElement.call([ds, ds], 0, 1, t, [_open(ts, t, t)] * 2)
    low = bytearray(both[1][0])
    low[15] ^= 1  # the last bit of S[1]
    with brownie.reverts(f"TensorOpeningInvalid: {tsum.root!r}, 0, 1"):
        harness.softmaxElement.call([ds, dsum], 1, 0, [both[0], (bytes(low), both[1][1])])
    changed = bytearray(both[0][0])
    changed[3] ^= 1
    with brownie.reverts(f"TensorOpeningInvalid: {ts.root!r}, 1, 1"):
        harness.rowSumElement.call(ds, 1, (bytes(changed), both[0][1]))
    with brownie.reverts("OneStepHarnessBatchMalformed: 8, 3"):
        harness.softmaxRows.call(3, 0, b"\x00" * 8)
    with brownie.reverts("OneStepHarnessBatchMalformed: 12, 3"):
        harness.softmaxBackwardRows.call(3, 0, b"\x00" * 12, b"\x00" * 8)
    assert_headroom(harness)


def test_float64Tree_twoWordsHighFirst_nanCanonical():
    x = torch.tensor([1.0, float("nan"), -2.5], dtype=torch.float64)
    x.view(torch.int64)[1] = 0x7FF0000000000123  # a NaN with a payload
    words = TensorTree(x).data[:24]
    assert words == bytes.fromhex("3ff0000000000000" "7ff8000000000000" "c004000000000000")
    assert TensorTree(x).numel == 6
