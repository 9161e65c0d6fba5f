"""The one-step elementwise and data-movement elements (contracts/numerics/OneStepElementwise.sol:
ReLU and its backward mask, broadcast add, permute/transpose, the embedding's gather,
dropout) against the engine (tests/contracts/elementwise_cases.py names the engine code
each runs) and the reference (truetrain/numerics/elementwise.py), bit for bit: 2,000+
generated elements a kind through OneStepElementwiseHarness's batches, then single elements
opened against their tensors' roots (TensorMerkle), and the custom errors."""

from __future__ import annotations

import brownie
import numpy as np
import pytest
import torch

from tests.contracts.helpers import assert_headroom
from tests.contracts.elementwise_cases import KINDS, check, floats
from tests.contracts.onestep_kinds import assert_kind_matches, descriptor as _desc, opening as _open, tensor_of as _t
from truetrain.numerics import elementwise as ref
from truetrain.numerics.tensor_merkle import TensorTree
from truetrain.training.ops.dropout import dropout

@pytest.fixture(scope="module")
def harness(OneStepElementwiseHarness, accounts):
    return OneStepElementwiseHarness.deploy({"from": accounts[0]})


@pytest.mark.parametrize("kind", list(KINDS))
def test_batch_matchesEngineAndReference_bitForBit(harness, kind):
    assert assert_kind_matches(harness, check, kind) >= 2_000


def test_reluAndMask_opened_matchReference(harness):
    h, g = floats(np.random.default_rng(1), 200), floats(np.random.default_rng(2), 200)
    y, mask = ref.relu(h)
    th, tg, tm = TensorTree(_t(h)), TensorTree(_t(g)), TensorTree(_t(mask))
    for i in (0, 63, 64, 199):
        assert list(harness.reluElement.call(_desc(th, 10, 20), i, _open(th, i))) == [int(y[i]), int(mask[i])]
        got = harness.applyMaskElement.call([_desc(tg, 10, 20), _desc(tm, 10, 20)], i, [_open(tg, i), _open(tm, i)])
        assert got == int(ref.apply_mask(g, mask)[i])


def test_addElement_positionEmbeddingsOverBatch(harness):
    """The LM's embedding sum: (B, T, d) token rows plus (T, d) positions repeated."""
    rng = np.random.default_rng(3)
    a, b = floats(rng, 2 * 8 * 16), floats(rng, 8 * 16)
    ta, tb = TensorTree(_t(a)), TensorTree(_t(b))
    want = (_t(a).view(2, 8, 16) + _t(b).view(8, 16)).reshape(-1)
    for i in (0, 127, 128, 255):
        got = harness.addElement.call([_desc(ta, 16, 16), _desc(tb, 8, 16)], i, [_open(ta, i), _open(tb, i % 128)])
        assert got == int(ref.add(a, b)[i]) == int(want[i : i + 1].view(torch.int32).item() & 0xFFFFFFFF)


def test_permuteElement_headSplit_matchesTorch(harness):
    shape, perm = (2, 8, 3, 2, 4), (2, 0, 3, 1, 4)
    x = floats(np.random.default_rng(4), 384)
    tx = TensorTree(_t(x))
    out = _t(x).view(*shape).permute(*perm).contiguous().reshape(-1).view(torch.int32)
    for i in (0, 5, 200, 383):
        src = ref.permute_source(shape, perm, i)
        got = harness.permuteElement.call(_desc(tx, 16, 24), list(shape), list(perm), i, _open(tx, src))
        assert got == int(out[i]) & 0xFFFFFFFF


def test_embeddingElement_opensIdsThenRow(harness):
    rng = np.random.default_rng(5)
    ids = np.array([0, 255, 17, 3, 255, 90], np.uint32)
    table = floats(rng, 256 * 16)
    ti, tt = TensorTree(torch.from_numpy(ids.view(np.float32))), TensorTree(_t(table))
    for r, c in ((0, 0), (1, 15), (5, 7), (2, 3)):
        src = ref.embedding_source([int(i) for i in ids], 256, 16, r, c)
        got = harness.embeddingElement.call(_desc(ti, 1, 6), _desc(tt, 256, 16), r, c, [_open(ti, r), _open(tt, src)])
        assert got == int(table[src])


def test_dropoutElement_matchesEngine(harness):
    x = floats(np.random.default_rng(6), 96)
    key = bytes(range(32))
    out = dropout(_t(x).view(6, 16), 0.5, key, "blocks.1.mlp", 5).reshape(-1).view(torch.int32)
    tx = TensorTree(_t(x))
    attrs = (key, b"blocks.1.mlp", int(np.float64(0.5).view(np.uint64)), 5 * 16)
    got = [harness.dropoutElement.call(attrs, _desc(tx, 6, 16), i, _open(tx, i)) for i in range(0, 96, 7)]
    assert got == [int(out[i]) & 0xFFFFFFFF for i in range(0, 96, 7)]
    assert 0 < sum(v == 0 for v in got) < len(got)  # some dropped, some kept


def test_badOperands_revertWithTheirErrors(harness):
    x = floats(np.random.default_rng(7), 64)
    tx = TensorTree(_t(x))
    with brownie.reverts("OneStepOperandsMismatch: 1"):
        harness.addElement.call([_desc(tx, 8, 8), _desc(tx, 1, 7)], 0, [_open(tx, 0), _open(tx, 0)])
    with brownie.reverts("OneStepOperandsMismatch: 1"):
        harness.applyMaskElement.call([_desc(tx, 8, 8), _desc(tx, 4, 16)], 0, [_open(tx, 0), _open(tx, 0)])
    with brownie.reverts("OneStepPermutationInvalid: 2, 64"):
        harness.permuteElement.call(_desc(tx, 8, 8), [8, 7], [1, 0], 0, _open(tx, 0))
    with brownie.reverts("OneStepPermutationInvalid: 2, 0"):
        harness.permuteElement.call(_desc(tx, 8, 8), [8, 8], [1, 1], 0, _open(tx, 0))
    with brownie.reverts("TensorRangeOutOfBounds: 64, 1, 64"):
        harness.permuteElement.call(_desc(tx, 8, 8), [8, 8], [1, 0], 64, _open(tx, 0))
    ids = TensorTree(torch.from_numpy(np.array([3, 8], np.uint32).view(np.float32)))
    with brownie.reverts("OneStepIndexOutOfRange: 8, 8"):
        harness.embeddingElement.call(_desc(ids, 1, 2), _desc(tx, 8, 8), 1, 0, [_open(ids, 1), _open(tx, 0)])
    with brownie.reverts("OneStepOperandsMismatch: 1"):
        harness.embeddingElement.call(_desc(ids, 1, 2), _desc(tx, 8, 8), 0, 8, [_open(ids, 0), _open(tx, 0)])
    with brownie.reverts(f"TensorOpeningInvalid: {tx.root!r}, 0, 1"):
        harness.embeddingElement.call(_desc(ids, 1, 2), _desc(tx, 8, 8), 0, 0, [_open(ids, 0), _open(ids, 0)])
    with brownie.reverts("OneStepHarnessBatchMalformed: 6, 2"):
        harness.applyMaskBatch.call(b"\x00" * 6)


def test_harness_keepsBytecodeHeadroom(harness):
    assert_headroom(harness)
