"""The on-chain IEEE-754 library (contracts/numerics: Float32, Float64) against numpy and the
engine's torch routines, bit for bit: 2,000 generated cases an operation (edge values,
random patterns, ties, exact cancellations, overflow and underflow boundaries; see
tests/contracts/float_cases.py), 500 a call through FloatHarness.run. ``make fuzz`` runs
the same comparison over a million cases (scripts/float_fuzz.py)."""

from __future__ import annotations

import brownie
import numpy as np
import pytest
import torch

from tests.contracts.helpers import assert_headroom
from tests.contracts.float_cases import F32, F64, OP_CODES, OPS, check, random_ints
from truetrain.training.intgemm import _to_float64_odd

CASES = 2_000
BATCH = 500
@pytest.fixture(scope="module")
def harness(FloatHarness, accounts):
    return FloatHarness.deploy({"from": accounts[0]})


def _call(harness):
    return lambda code, a, b: harness.run.call(code, a, b)


def test_opTable_matchesHarness(harness):
    assert harness.OP_COUNT() == len(OPS)


@pytest.mark.parametrize("op", OPS[1:], ids=[op.name for op in OPS[1:]])
def test_op_matchesNumpy_bitForBit(harness, op):
    rng = np.random.default_rng(OP_CODES[op.name])
    cases, bad = check(_call(harness), op, rng, CASES, BATCH)
    assert cases == CASES
    assert not bad, f"{len(bad)} of {cases} differ, e.g.\n" + "\n".join(bad[:10])


def test_nanResults_areCanonical(harness):
    inf32, inf64 = F32.inf, F64.inf
    # inf - inf, 0 * inf, 0 / 0, sqrt(-1), and a NaN operand with a payload and the sign set
    got32 = harness.run.call(OP_CODES["sub32"], [inf32, F32.sign | inf32 | 5], [inf32, 0x3F800000])
    got64 = harness.run.call(OP_CODES["mul64"], [0, F64.sign | inf64 | 7], [inf64, 0x3FF0000000000000])
    assert list(got32) == [F32.nan, F32.nan] == [0x7FC00000] * 2
    assert list(got64) == [F64.nan, F64.nan] == [0x7FF8000000000000] * 2
    assert list(harness.run.call(OP_CODES["sqrt32"], [0xBF800000], [])) == [F32.nan]


def test_intToFloat32_equalsEngineRoundOddRoute(harness):
    """Float32.fromInt (one rounding) equals the engine's int64 -> float64 round-to-odd ->
    float32, and Float64.fromIntRoundOdd equals ``_to_float64_odd``: the exact integer sums'
    last step."""
    rng = np.random.default_rng(99)
    ints = [int(x) for x in random_ints(rng, BATCH, F32.p)]
    words = [x % (1 << 256) for x in ints]
    got = harness.run.call(OP_CODES["int_to_f32"], words, [])
    engine = _to_float64_odd(torch.tensor(ints, dtype=torch.int64)).to(torch.float32)
    assert [int(x) for x in engine.view(torch.int32).numpy().astype(np.uint32)] == list(got)


def test_pow2_outOfRange_reverts(harness):
    code = OP_CODES["pow2_64"]
    for n in (-1023, 1024):
        with brownie.reverts(f"FloatExponentOutOfRange: {n}"):
            harness.run.call(code, [n % (1 << 256)], [])


def test_unknownOp_reverts(harness):
    with brownie.reverts(f"FloatHarnessUnknownOp: {len(OPS)}"):
        harness.run.call(len(OPS), [0], [])


def test_harness_keepsBytecodeHeadroom(harness):
    """The harness holds every function of both libraries: it stays 10 % under the limit."""
    assert_headroom(harness)
