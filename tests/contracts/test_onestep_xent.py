"""The one-step cross-entropy (contracts/numerics/OneStepXent.sol): a row's partial sums (an
application of their own), the gradient element and the row's loss, against the engine's
``softmax_xent`` (eager and the C kernel) and ``xent_loss`` and the reference
(truetrain/numerics/xent.py), bit for bit: 2,000+ generated elements a kind through
OneStepXentHarness's row batches (tests/contracts/xent_cases.py), then single elements opened
against their roots (logit rows, the partial sums as a float64 tensor, the labels as int32
words), the custom errors, the headroom."""

from __future__ import annotations

import brownie
import numpy as np
import pytest
import torch

from tests.contracts.helpers import assert_headroom
from tests.contracts.onestep_kinds import assert_kind_matches, descriptor, opening as _open
from tests.contracts.xent_cases import check, logits
from truetrain.numerics.ieee import bits32, bits64
from truetrain.numerics.tensor_merkle import TensorTree
from truetrain.numerics.xent import partial_sums
from truetrain.training.repro_ops import softmax_xent, xent_loss


def _harness(OneStepXentHarness, accounts):
    return OneStepXentHarness.deploy({"from": accounts[0]})


@pytest.mark.parametrize("kind", ["xent_partial_sum", "xent_grad", "xent_loss"])
def test_rows_matchEngineAndReference_bitForBit(OneStepXentHarness, accounts, kind):
    assert assert_kind_matches(_harness(OneStepXentHarness, accounts), check, kind) >= 2_000


def _trees(x: np.ndarray, y: np.ndarray, width: int):
    """The logits', partial sums' and labels' trees and descriptors."""
    rows, c = x.shape
    parts = partial_sums(bits32(x), width)
    tx = TensorTree(torch.from_numpy(x))
    tp = TensorTree(torch.from_numpy(parts.view(np.float64).copy()))
    ty = TensorTree(torch.from_numpy(y.astype(np.int32)).view(torch.float32))
    descs = [descriptor(tx, rows, c), descriptor(tp, rows, 2 * parts.shape[1]), descriptor(ty, 1, rows)]
    return (tx, tp, ty), descs, parts


def _opens(trees, r: int, c: int, blocks: int):
    tx, tp, ty = trees
    return [_open(tx, r * c, c), _open(tp, 2 * blocks * r, 2 * blocks), _open(ty, r)]


def test_elements_openRowsSumsAndLabels_matchEngine(OneStepXentHarness, accounts):
    harness = _harness(OneStepXentHarness, accounts)
    rng = np.random.default_rng(9)
    rows, c, width, total = 12, 100, 64, 1024  # rows of 100 straddle leaves; two blocks a row
    x = logits(rng, rows, c)
    y = rng.integers(0, c, rows)
    trees, descs, parts = _trees(x, y, width)
    grad, sumexp, target = softmax_xent(torch.from_numpy(x), torch.from_numpy(y), total)
    g, loss = bits32(grad.numpy()), bits64(xent_loss(sumexp, target).numpy())
    for r in (0, 5, rows - 1):
        for b in (0, 1):
            assert harness.partialSumElement.call(descs[0], width, r, b, _open(trees[0], r * c, c)) == int(parts[r, b])
        for j in (0, int(y[r]), c - 1):
            assert harness.gradElement.call(descs, total, r, j, _opens(trees, r, c, 2)) == int(g[r, j]), (r, j)
        assert harness.lossElement.call(descs, r, _opens(trees, r, c, 2)) == int(loss[r]), r


def test_elements_badInputs_revertByName(OneStepXentHarness, accounts):
    harness = _harness(OneStepXentHarness, accounts)
    rows, c, width = 4, 64, 64
    x = np.random.default_rng(10).standard_normal((rows, c)).astype(np.float32)
    y = np.array([3, c, 0, 1])  # row 1's label is past the classes
    trees, descs, _ = _trees(x, y, width)
    opens = _opens(trees, 0, c, 1)
    with brownie.reverts("OneStepShapeInvalid: 0, 1"):
        harness.partialSumElement.call(descs[0], width, 0, 1, opens[0])
    with brownie.reverts("OneStepShapeInvalid: 0, 0"):
        harness.partialSumElement.call(descs[0], 0, 0, 0, opens[0])
    with brownie.reverts("OneStepShapeInvalid: 4, 0"):
        harness.partialSumElement.call(descs[0], width, rows, 0, opens[0])
    with brownie.reverts("OneStepShapeInvalid: 0, 64"):
        harness.gradElement.call(descs, rows, 0, c, opens)
    with brownie.reverts("OneStepShapeInvalid: 4, 0"):
        harness.lossElement.call(descs, rows, opens)
    with brownie.reverts("OneStepOperandsMismatch: 1"):
        harness.lossElement.call([descs[0], (descs[1][0], rows, 3), descs[2]], 0, opens)
    with brownie.reverts("OneStepOperandsMismatch: 2"):
        harness.lossElement.call([descs[0], descs[1], (descs[2][0], 1, rows - 1)], 0, opens)
    with brownie.reverts(f"OneStepIndexOutOfRange: {c}, {c}"):
        harness.gradElement.call(descs, rows, 1, 0, _opens(trees, 1, c, 1))
    changed = bytearray(opens[1][0])
    changed[7] ^= 1  # the last bit of row 0's partial sum
    with brownie.reverts(f"TensorOpeningInvalid: {trees[1].root!r}, 0, 1"):
        harness.lossElement.call(descs, 0, [opens[0], (bytes(changed), opens[1][1]), opens[2]])
    with brownie.reverts("OneStepHarnessBatchMalformed: 8, 3"):
        harness.xentRows.call(3, 3, 1, b"\x00" * 8, b"\x00" * 4)
    with brownie.reverts("OneStepHarnessBatchMalformed: 12, 3"):
        harness.xentRows.call(3, 3, 1, b"\x00" * 12, b"\x00" * 8)
    with brownie.reverts("OneStepIndexOutOfRange: 3, 3"):
        harness.xentRows.call(3, 3, 1, b"\x00" * 12, b"\x00\x00\x00\x03")
    assert_headroom(harness)
