"""The one-step GELU elements (contracts/numerics/OneStepGelu.sol: GELU, its input gradient,
the table route erf64) against the engine's eager ops and C kernels and the reference
(truetrain/numerics/special.py), bit for bit: 2,000+ generated elements a kind through
OneStepGeluHarness's batches (tests/contracts/gelu_cases.py), the erf table word for word,
single elements opened against their roots, the custom error, the headroom."""

from __future__ import annotations

import brownie
import numpy as np
import pytest
import torch

from tests.contracts.helpers import assert_headroom
from tests.contracts.gelu_cases import KINDS, check, inputs32
from tests.contracts.onestep_kinds import assert_kind_matches, opening as _open, tensor_of as _t
from truetrain.numerics import special
from truetrain.numerics.tensor_merkle import TensorTree
from truetrain.training.ops.elementwise import gelu_backward, gelu_forward

@pytest.fixture(scope="module")
def harness(OneStepGeluHarness, accounts):
    return OneStepGeluHarness.deploy({"from": accounts[0]})


@pytest.mark.parametrize("kind", list(KINDS))
def test_batch_matchesEngineAndReference_bitForBit(harness, kind):
    assert assert_kind_matches(harness, check, kind) >= 2_000


def test_erfTable_equalsReference_wordForWord(harness):
    table = np.array(special.erf_table(), np.float64)
    assert table.shape == (97, 8)
    assert bytes(harness.erfTable.call()) == table.astype(">f8").tobytes()


def test_geluElements_opened_matchEngine(harness):
    rng = np.random.default_rng(9)
    x, g = inputs32(rng, 300), inputs32(rng, 300)
    tx, tg = TensorTree(_t(x)), TensorTree(_t(g))
    fwd = gelu_forward(_t(x)).view(torch.int32).numpy().view(np.uint32)
    bwd = gelu_backward(_t(x), _t(g)).view(torch.int32).numpy().view(np.uint32)
    descs = [("0x" + tx.root.hex(), 10, 30), ("0x" + tg.root.hex(), 10, 30)]
    for i in (0, 149, 150, 299):
        assert harness.geluElement.call(descs[0], i, _open(tx, i)) == special.gelu(int(x[i])) == int(fwd[i])
        got = harness.geluBackwardElement.call(descs, i, [_open(tx, i), _open(tg, i)])
        assert got == special.gelu_backward(int(x[i]), int(g[i])) == int(bwd[i])
    with brownie.reverts("OneStepOperandsMismatch: 1"):
        harness.geluBackwardElement.call([descs[0], ("0x" + tg.root.hex(), 30, 10)], 0, [_open(tx, 0), _open(tg, 0)])


def test_harness_keepsBytecodeHeadroom(harness):
    assert_headroom(harness)
