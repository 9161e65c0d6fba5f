"""The one-step LayerNorm elements (contracts/numerics/OneStepLayerNorm.sol), forward and
backward, against the engine's eager ``ln_forward`` / ``ln_backward`` and its C kernels and
the reference (truetrain/numerics/layernorm.py), bit for bit: 2,000+ generated elements a
kind through OneStepLayerNormHarness's row batches (tests/contracts/layernorm_cases.py),
then single elements opened against their roots (whole rows by range proofs, gain and
shift by one or whole), the custom errors, the headroom."""

from __future__ import annotations

import brownie
import numpy as np
import pytest
import torch

from tests.contracts.helpers import assert_headroom
from tests.contracts.layernorm_cases import check, rows
from tests.contracts.onestep_kinds import assert_kind_matches, opening as _open
from truetrain.numerics.ieee import bits32
from truetrain.numerics.tensor_merkle import TensorTree
from truetrain.training.ops.elementwise import ln_backward, ln_forward

LN_EPS = int(np.float64(1e-5).view(np.uint64))


def _harness(OneStepLayerNormHarness, accounts):
    return OneStepLayerNormHarness.deploy({"from": accounts[0]})


@pytest.mark.parametrize("kind", ["layernorm", "layernorm_backward"])
def test_rows_matchEngineAndReference_bitForBit(OneStepLayerNormHarness, accounts, kind):
    assert assert_kind_matches(_harness(OneStepLayerNormHarness, accounts), check, kind) >= 2_000


def test_layerNormElement_opensRow_matchesEngine(OneStepLayerNormHarness, accounts):
    harness = _harness(OneStepLayerNormHarness, accounts)
    rng = np.random.default_rng(4)
    for n, count in ((256, 6), (100, 5)):  # the LM's rows (4 whole leaves); rows straddling leaves
        x = torch.from_numpy(rows(rng, count, n))
        w, b = torch.randn(n), torch.randn(n)
        y = bits32(ln_forward(x, w, b, 1e-5)[0].numpy())  # NaNs canonical, as a tree holds them
        tx, tw, tb = TensorTree(x), TensorTree(w), TensorTree(b)
        descs = [("0x" + tx.root.hex(), count, n), ("0x" + tw.root.hex(), 1, n), ("0x" + tb.root.hex(), 1, n)]
        for i, j in ((0, 0), (count - 1, n - 1), (2, n // 2)):
            got = harness.layerNormElement.call(descs, LN_EPS, i, j, [_open(tx, i * n, n), _open(tw, j), _open(tb, j)])
            assert got == int(y[i, j]), (n, i, j)
        g = torch.from_numpy(rows(rng, count, n))
        dx, gx = (bits32(v.numpy()) for v in ln_backward(g, *ln_forward(x, w, b, 1e-5)[1:], w))
        tg = TensorTree(g)
        back = [descs[0], ("0x" + tg.root.hex(), count, n), descs[1]]
        for i, j in ((0, 0), (count - 1, n - 1)):
            got = harness.layerNormBackwardElement.call(back, LN_EPS, i, j, [_open(tx, i * n, n), _open(tg, i * n, n),
                                                                             _open(tw, 0, n)])
            assert list(got) == [int(dx[i, j]), int(gx[i, j])], (n, i, j)
    with brownie.reverts("OneStepShapeInvalid: 0, 0"):
        harness.layerNormBackwardElement.call([back[0], (back[1][0], count, n - 1), back[2]], LN_EPS, 0, 0,
                                              [_open(tx, 0, n), _open(tg, 0, n), _open(tw, 0, n)])
    with brownie.reverts("OneStepShapeInvalid: 5, 0"):
        harness.layerNormElement.call(descs, LN_EPS, 5, 0, [_open(tx, 0, n), _open(tw, 0), _open(tb, 0)])
    with brownie.reverts("OneStepShapeInvalid: 0, 0"):
        harness.layerNormElement.call([descs[0], descs[1], ("0x" + tb.root.hex(), 1, n - 1)], LN_EPS, 0, 0,
                                      [_open(tx, 0, n), _open(tw, 0), _open(tb, 0)])
    # row 2's opening offered as row 1's: rows of 100 straddle leaves differently
    with brownie.reverts("TensorOpeningMalformed: 512, 768, 4, 2"):
        harness.layerNormElement.call(descs, LN_EPS, 1, 0, [_open(tx, 2 * n, n), _open(tw, 0), _open(tb, 0)])
    changed = bytearray(_open(tx, n, n)[0])
    changed[4 * (n - 64) + 3] ^= 1  # one bit of row 1's first element
    with brownie.reverts(f"TensorOpeningInvalid: {tx.root!r}, 1, 3"):
        harness.layerNormElement.call(descs, LN_EPS, 1, 0, [(bytes(changed), _open(tx, n, n)[1]), _open(tw, 0),
                                                            _open(tb, 0)])
    with brownie.reverts("OneStepHarnessBatchMalformed: 8, 3"):
        harness.layerNormRows.call(LN_EPS, 3, b"\x00" * 8, b"\x00" * 12, b"\x00" * 12)
    assert_headroom(harness)
