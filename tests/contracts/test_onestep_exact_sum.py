"""The one-step exact sums (contracts/numerics/OneStepExactSum.sol): column sums (bias and
LayerNorm gradients) and the embedding's scatter, against the engine's ``GradBook`` (eager,
C kernel, micro-batched) and the reference (truetrain/numerics/exact_sum.py), bit for bit:
2,000+ generated elements a kind through OneStepExactSumHarness's batches
(tests/contracts/exact_sum_cases.py), then single elements opened against their roots (a
transposed gradient's rows, the ids whole), the custom errors, the headroom."""

from __future__ import annotations

import brownie
import numpy as np
import pytest
import torch

from tests.contracts.exact_sum_cases import _book, check
from tests.contracts.helpers import assert_headroom
from tests.contracts.onestep_kinds import assert_kind_matches, descriptor, opening as _open
from truetrain.numerics.ieee import bits32
from truetrain.numerics.tensor_merkle import TensorTree


def _harness(OneStepExactSumHarness, accounts):
    return OneStepExactSumHarness.deploy({"from": accounts[0]})


@pytest.mark.parametrize("kind", ["column_sum", "scatter"])
def test_batches_matchEngineAndReference_bitForBit(OneStepExactSumHarness, accounts, kind):
    assert assert_kind_matches(_harness(OneStepExactSumHarness, accounts), check, kind) >= 2_000


def _ids_tree(ids: np.ndarray) -> TensorTree:
    """The ids committed as int32 words in a float32 tree (as the embedding's gather reads them)."""
    return TensorTree(torch.from_numpy(ids.astype(np.int32)).view(torch.float32))


def test_elements_openTransposedRows_matchEngine(OneStepExactSumHarness, accounts):
    harness = _harness(OneStepExactSumHarness, accounts)
    rng = np.random.default_rng(6)
    rows, d, num = 100, 5, 7  # rows of 100 straddle leaves
    g = torch.from_numpy((rng.standard_normal((rows, d)) * 2.0 ** rng.integers(-20, 20, d)).astype(np.float32))
    ids = rng.integers(0, num - 1, rows)  # the table's last row gets nothing
    book = _book(True, rows)
    book.columns("b", g)
    book.scatter("e", g, torch.from_numpy(ids), num)
    got = book.result()
    bias, table = bits32(got["b"].numpy()), bits32(got["e"].numpy())
    tg, tid = TensorTree(g.T.contiguous()), _ids_tree(ids)
    for j in (0, 2, d - 1):
        assert harness.columnSumElement.call(descriptor(tg, d, rows), j, _open(tg, j * rows, rows)) == int(bias[j])
    descs = [descriptor(tg, d, rows), descriptor(tid, 1, rows)]
    for t, j in ((0, 0), (3, 4), (num - 1, 1)):
        want = int(table[t, j])
        assert harness.scatterElement.call(descs, num, t, j, [_open(tg, j * rows, rows), _open(tid, 0, rows)]) == want
    assert int(table[num - 1, 1]) == 0  # no id: +0


def test_elements_badInputs_revertByName(OneStepExactSumHarness, accounts):
    harness = _harness(OneStepExactSumHarness, accounts)
    rows, d, num = 64, 3, 4
    g = torch.randn(d, rows)
    ids = np.arange(rows) % num
    tg, tid = TensorTree(g), _ids_tree(ids)
    desc, descs = descriptor(tg, d, rows), [descriptor(tg, d, rows), descriptor(tid, 1, rows)]
    row1 = _open(tg, rows, rows)
    both = [row1, _open(tid, 0, rows)]
    with brownie.reverts("OneStepShapeInvalid: 3, 0"):
        harness.columnSumElement.call(desc, d, row1)
    with brownie.reverts("OneStepShapeInvalid: 4, 1"):
        harness.scatterElement.call(descs, num, num, 1, both)
    with brownie.reverts("OneStepShapeInvalid: 0, 3"):
        harness.scatterElement.call(descs, num, 0, d, both)
    with brownie.reverts("OneStepOperandsMismatch: 1"):
        harness.scatterElement.call([descs[0], descriptor(tid, 1, rows - 1)], num, 0, 1, both)
    with brownie.reverts("OneStepIndexOutOfRange: 3, 3"):
        harness.scatterElement.call(descs, num - 1, 0, 1, both)
    bad = ids.copy()
    bad[5] = 2**30  # far past the table (a float32 tree holds ids up to 0x7F800000 as they are)
    tbad = _ids_tree(bad)
    with brownie.reverts(f"OneStepIndexOutOfRange: {2**30}, 4"):
        harness.scatterElement.call([descs[0], descriptor(tbad, 1, rows)], num, 0, 1, [row1, _open(tbad, 0, rows)])
    changed = bytearray(row1[0])
    changed[3] ^= 1
    with brownie.reverts(f"TensorOpeningInvalid: {tg.root!r}, 1, 1"):
        harness.columnSumElement.call(desc, 1, (bytes(changed), row1[1]))
    with brownie.reverts(f"TensorOpeningInvalid: {tg.root!r}, 1, 1"):
        harness.columnSumElement.call(desc, 1, _open(tg, 2 * rows, rows))  # row 2's opening as row 1's
    with brownie.reverts("OneStepHarnessBatchMalformed: 8, 3"):
        harness.columnSums.call(3, b"\x00" * 8)
    with brownie.reverts("OneStepHarnessBatchMalformed: 12, 3"):
        harness.scatterSums.call(3, 2, b"\x00" * 12, b"\x00" * 8)
    assert_headroom(harness)
