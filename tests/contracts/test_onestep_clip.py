"""The one-step clip factor (contracts/numerics/OneStepClip.sol): the ranges' maxima and integer
sums of squares (applications of their own) and the combine (norm and factor), against the
engine (truetrain/training/schedule.py, whole and through a pipeline's grouping) and the
reference (truetrain/numerics/clip.py), bit for bit: 2,000+ generated elements a kind through
OneStepClipHarness.clipSets (tests/contracts/clip_cases.py), then single elements opened
against their roots (gradient ranges straddling leaves, the maxima and sums whole), ties at
the grid's half-quanta, the engine reading the reference's definition, the custom errors,
the headroom."""

from __future__ import annotations

import brownie
import numpy as np
import pytest
import torch

from tests.contracts.clip_cases import check, engine_values
from tests.contracts.helpers import assert_headroom
from tests.contracts.onestep_kinds import assert_kind_matches, descriptor, opening as _open
from truetrain.numerics import clip as reference
from truetrain.numerics.ieee import bits32, bits64
from truetrain.numerics.tensor_merkle import TensorTree
from truetrain.training import schedule

CLIP = int(bits64(np.float64(0.05)))


def _harness(OneStepClipHarness, accounts):
    return OneStepClipHarness.deploy({"from": accounts[0]})


@pytest.mark.parametrize("kind", ["clip_max", "clip_sum", "clip_factor"])
def test_sets_matchEngineAndReference_bitForBit(OneStepClipHarness, accounts, kind):
    assert assert_kind_matches(_harness(OneStepClipHarness, accounts), check, kind) >= 2_000


def test_engine_readsTheReferencesDefinition():
    assert schedule.CLIP_EPS is reference.CLIP_EPS and schedule.norm_bits is reference.norm_bits
    assert [reference.norm_bits(n) for n in (1, 2, 3, 1024, 1025, 3_300_000)] == [53, 52, 51, 43, 42, 31]


def _trees(ts: list[np.ndarray], width: int):
    """Each gradient's tree, the ranges, and the maxima's and sums' trees (as the trace holds
    them) with the reference's values."""
    norm, factor, maxima, sums = reference.clip_factor([bits32(t) for t in ts], CLIP, width)
    grads = [TensorTree(torch.from_numpy(t)) for t in ts]
    tm = TensorTree(torch.from_numpy(np.array(maxima, np.uint32).view(np.float32)))
    tsum = TensorTree(torch.from_numpy(np.array(sums, np.uint64).view(np.float64)))
    return grads, tm, tsum, (norm, factor, maxima, sums)


def test_elements_openRangesMaximaAndSums_matchEngine(OneStepClipHarness, accounts):
    harness = _harness(OneStepClipHarness, accounts)
    rng = np.random.default_rng(11)
    ts = [(rng.standard_normal((20, 37)) * 0.3).astype(np.float32), rng.standard_normal(257).astype(np.float32),
          np.full(5, -0.0, np.float32)]
    width = 100  # ranges straddle leaves; the last of each tensor shorter
    grads, tm, tsum, (norm, factor, maxima, sums) = _trees(ts, width)
    spans = reference.ranges([t.size for t in ts], width)
    count, parts = sum(t.size for t in ts), len(spans)
    dm, ds = descriptor(tm, 1, parts), descriptor(tsum, parts, 2)
    for p, (t, start, n) in enumerate(spans):
        dg = descriptor(grads[t], *(ts[t].shape if ts[t].ndim == 2 else (1, ts[t].size)))
        og = _open(grads[t], start, n)
        assert harness.maxPartialElement.call(dg, start, n, og) == maxima[p], p
        assert harness.sumPartialElement.call([dg, dm], start, n, count, [og, _open(tm, 0, parts)]) == sums[p], p
    got = harness.clipElement.call([dm, ds], count, CLIP, [_open(tm, 0, parts), _open(tsum, 0, 2 * parts)])
    engine = engine_values(ts, width, 0.05)
    assert tuple(got) == (norm, factor) == (engine["norm"][0], engine["factor"][0])
    assert factor < int(bits32(np.float32(1.0)))  # it clips


def test_ties_roundHalfToEven():
    # two values: bits 52, the largest 1.0 sets the quantum 2^-51; (k 2^-26)^2 / 2^-51 = k^2 / 2
    for k, q in ((1, 0), (3, 4), (5, 12), (7, 24)):
        g = bits32(np.array([1.0, k * 2.0**-26], np.float32))
        total = np.uint64(reference.partial_sum(g, 0, 2)).view(np.float64)
        assert total == 2.0**51 + q, k
        ts = [torch.tensor([1.0, k * 2.0**-26])]
        up, _ = schedule.square_grid(torch.tensor(1.0, dtype=torch.float64), 2)
        assert float(schedule.grid_sum(schedule.square_terms(ts), up)) == total


def test_nonFinite_gridsAndRanges(OneStepClipHarness, accounts):
    harness = _harness(OneStepClipHarness, accounts)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    for special, norm in ((np.inf, 0x7FF0000000000000), (np.nan, 0x7FF8000000000000)):
        y = np.array([0.5, special], np.float32)
        values = np.concatenate([bits32(x), bits32(y)]).astype(">u4").tobytes()
        out = harness.clipSets.call(values, [3, 2], [2], [CLIP])
        # the finite range rounds to +0 on the non-finite grid; the other is inf or NaN
        assert list(out[2:4]) == [0, 0x7FF0000000000000 if special == np.inf else 0x7FF8000000000000]
        assert out[4] == norm
        assert out[5] == (0 if special == np.inf else 0x7FC00000)


def test_elements_badInputs_revertByName(OneStepClipHarness, accounts):
    harness = _harness(OneStepClipHarness, accounts)
    ts = [np.arange(1, 130, dtype=np.float32)]
    grads, tm, tsum, _ = _trees(ts, 64)
    dg, dm, ds = descriptor(grads[0], 1, 129), descriptor(tm, 1, 3), descriptor(tsum, 3, 2)
    om, osum = _open(tm, 0, 3), _open(tsum, 0, 6)
    for count in (0, 2**48 + 1):
        with brownie.reverts(f"OneStepNormCountInvalid: {count}"):
            harness.clipElement.call([dm, ds], count, CLIP, [om, osum])
    with brownie.reverts("OneStepOperandsMismatch: 1"):
        harness.clipElement.call([dm, (ds[0], 3, 1)], 129, CLIP, [om, osum])
    with brownie.reverts("TensorRangeOutOfBounds: 100, 64, 129"):
        harness.maxPartialElement.call(dg, 100, 64, _open(grads[0], 64, 64))
    with brownie.reverts("TensorRangeOutOfBounds: 0, 0, 129"):
        harness.maxPartialElement.call(dg, 0, 0, _open(grads[0], 0, 1))
    changed = bytearray(osum[0])
    changed[7] ^= 1  # the last bit of the first range's sum
    with brownie.reverts(f"TensorOpeningInvalid: {tsum.root!r}, 0, 1"):
        harness.clipElement.call([dm, ds], 129, CLIP, [om, (bytes(changed), osum[1])])
    with brownie.reverts("OneStepHarnessBatchMalformed: 8, 1"):
        harness.clipSets.call(b"\x00" * 8, [1], [1], [CLIP])
    with brownie.reverts("OneStepHarnessBatchMalformed: 8, 2"):
        harness.clipSets.call(b"\x00" * 8, [1, 1], [1], [CLIP])
    assert_headroom(harness)
