"""The one-step quantised products (contracts/numerics/OneStepQuant.sol): row scales, the
weight gradient's elements and attention's batched products, against the engine's routes and
the reference (truetrain/numerics/quant.py), bit for bit: 2,000+ generated elements a kind
through OneStepQuantHarness's batches (tests/contracts/quant_cases.py), then real shapes (the
digits MLP's step, the default LM's layers and attention) opened against their roots, the
custom errors, the headroom."""

from __future__ import annotations

import brownie
import numpy as np
import pytest
import torch

from tests.contracts.helpers import assert_headroom
from tests.contracts.onestep_kinds import assert_kind_matches, descriptor, opening as _open
from tests.contracts.quant_cases import check
from truetrain.numerics.ieee import bits32
from truetrain.numerics.quant import bmm_elements, row_scales, weight_grads
from truetrain.numerics.tensor_merkle import TensorTree
from truetrain.training.intgemm import GemmEngine
from truetrain.training.models import build_model, init_params, parse_model_spec
from truetrain.training.ops import ReproStep, linear, repro_gradients
from truetrain.training.ops.attention import _scale, bmm_exact, causal_attention, softmax_backward, softmax_causal
from truetrain.training.ops.book import GradBook

ONE = 0x3F800000


@pytest.fixture(scope="module")
def harness(OneStepQuantHarness, accounts):
    return OneStepQuantHarness.deploy({"from": accounts[0]})


@pytest.mark.parametrize("kind", ["row_scale", "weight_grad", "bmm"])
def test_batches_matchEngineAndReference_bitForBit(harness, kind):
    assert assert_kind_matches(harness, check, kind) >= 2_000


class _Book(GradBook):
    """The engine's book, keeping each linear map's input rows and output gradient."""

    def __init__(self, step, *args):
        super().__init__(*args)
        self.step, self.seen = step, {}

    def linear(self, wname, bname, g, qa, per_row=1, shape=None):
        self.seen[wname] = (self.step.inputs[id(qa)][0], g.clone())
        super().linear(wname, bname, g, qa, per_row, shape)


class _Step(ReproStep):
    """A repro step whose book records the weight gradients' operands."""

    def __init__(self, engine, limbs, rows):
        super().__init__(engine, limbs, rows)
        self.inputs, self.book = {}, _Book(self, engine, limbs, rows)

    def quantize_rows(self, x):
        op = super().quantize_rows(x)
        self.inputs[id(op)] = (x, op)
        return op


def _weight_grad_call(harness, a, g, limbs, o, i):
    """dW[o][i] by the one-step: aᵀ and gᵀ (transpose applications) and a's row scales
    (a row_scales application), each opened against its root."""
    m = a.shape[0]
    ta, tg = TensorTree(a.T.contiguous()), TensorTree(g.T.contiguous())
    ts = TensorTree(torch.from_numpy(row_scales(bits32(a.numpy()), limbs).view(np.float32)))
    descs = [descriptor(ta, a.shape[1], m), descriptor(tg, g.shape[1], m), descriptor(ts, 1, m)]
    return harness.weightGradElement.call(descs, limbs, o, i, [_open(ta, i * m, m), _open(tg, o * m, m),
                                                               _open(ts, 0, m)])


def _row_scale_call(harness, x, limbs, r):
    tx, k = TensorTree(x), x.shape[1]
    return harness.rowScaleElement.call(descriptor(tx, x.shape[0], k), limbs, r, _open(tx, r * k, k))


def test_digitsMlp_weightGradients_matchEngineRoutes(harness):
    spec = parse_model_spec({"kind": "mlp", "widths": [64, 128, 10]})
    model = build_model(spec, init_params(spec, 3))
    gen = torch.Generator().manual_seed(5)
    x, y = torch.rand(32, 64, generator=gen), torch.randint(0, 10, (32,), generator=gen)
    step = _Step(GemmEngine(), 2, 32)
    model.loss(x, y, step, 32, []).backward()
    routes = [step.book.result(), repro_gradients(model, x, y, GemmEngine(fuse=True), 2)[0],
              repro_gradients(model, x, y, GemmEngine(route="int8", small_product=0), 2, micro_batch=8)[0]]
    assert sorted(step.book.seen) == ["fc.0.weight", "fc.1.weight"]
    for name, (a, g) in step.book.seen.items():
        want = weight_grads(bits32(a.numpy()).T, bits32(g.numpy()).T, row_scales(bits32(a.numpy()), 2), 2)
        for got in routes:
            assert np.array_equal(bits32(got[name].numpy()), want), name
        for o, i in ((0, 0), (g.shape[1] - 1, a.shape[1] - 1), (3, 17)):
            assert _weight_grad_call(harness, a, g, 2, o, i) == int(want[o, i])
        for r in (0, 31):
            assert _row_scale_call(harness, a, 2, r) == int(row_scales(bits32(a[r].numpy()), 2))


# the default LM's linear maps over 8 x 128 tokens: qkv, FFN up, FFN down (K = 1,024 tokens)
LM_LAYERS = [(256, 768), (256, 1024), (1024, 256)]


@pytest.mark.parametrize("fan_in,fan_out", LM_LAYERS)
def test_defaultLm_weightGradient_matchesEngine(harness, fan_in, fan_out):
    gen = torch.Generator().manual_seed(fan_in + fan_out)
    x = torch.randn(1024, fan_in, generator=gen) * torch.logspace(-3, 3, 1024).unsqueeze(1)
    w, b = torch.randn(fan_out, fan_in, generator=gen) * fan_in**-0.5, torch.randn(fan_out, generator=gen)
    g = torch.randn(1024, fan_out, generator=gen) * 2.0**-10
    got = []
    for engine, halves in ((GemmEngine(fuse=True), 1), (GemmEngine(), 1), (GemmEngine(fuse=True), 2)):
        step = ReproStep(engine, 2, 1024)
        modes = ("both",) if halves == 1 else ("observe", "add")
        for mode in modes:
            step.book.mode = mode
            for part in torch.arange(1024).chunk(halves):
                wp = w.clone().requires_grad_()
                linear(x[part], wp, b, step, "layer").backward(g[part])
        got.append(bits32(step.book.result()["layer.weight"].numpy()))
    want = weight_grads(bits32(x.numpy()).T, bits32(g.numpy()).T, row_scales(bits32(x.numpy()), 2), 2)
    for route in got:
        assert np.array_equal(route, want)
    for o, i in ((0, 0), (fan_out - 1, fan_in - 1)):
        assert _weight_grad_call(harness, x, g, 2, o, i) == int(want[o, i])
    assert _row_scale_call(harness, x, 2, 1023) == int(row_scales(bits32(x[1023].numpy()), 2))


def test_defaultLm_attentionProducts_matchEngine(harness):
    """The six products of one attention (4 sequences x 4 heads of 128 x 64 here; the LM has 8
    sequences), as the engine's attention gives them, opened from their trace tensors."""
    gen = torch.Generator().manual_seed(9)
    n, t, d = 16, 128, 64
    q, k, v, g = (torch.randn(n, t, d, generator=gen) for _ in range(4))
    scale = _scale(d)
    step = ReproStep(GemmEngine(fuse=True), 2, n * t)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    out = causal_attention(*(x.view(4, 4, t, d) for x in leaves), step).view(n, t, d)
    out.backward(g)
    s = bmm_exact(q, k.transpose(1, 2), 2) * scale
    p = softmax_causal(s)
    ds = softmax_backward(p, bmm_exact(g, v.transpose(1, 2), 2), scale)
    dp = bmm_exact(g, v.transpose(1, 2), 2)
    # (left operand's rows, right operand's columns as rows, scale, the engine's product)
    products = [(q, k, scale, s), (p, v.transpose(1, 2), ONE, out.detach()),
                (p.transpose(1, 2), g.transpose(1, 2), ONE, leaves[2].grad), (g, v, ONE, dp),
                (ds, k.transpose(1, 2), ONE, leaves[0].grad),
                (ds.transpose(1, 2), q.transpose(1, 2), ONE, leaves[1].grad)]
    for left, right, sbits, engine in products:
        sb = sbits if sbits == ONE else int(np.float32(sbits).view(np.uint32))
        a, bt = left.contiguous(), right.contiguous()
        ta, tb = TensorTree(a.view(-1, a.shape[2])), TensorTree(bt.view(-1, bt.shape[2]))
        kk = a.shape[2]
        want = bits32(engine.numpy())
        for nn_, i, j in ((0, 0, 0), (n - 1, t - 1, bt.shape[1] - 1), (5, 77, 3)):
            ra, rb = bits32(a[nn_, i].numpy()), bits32(bt[nn_, j].numpy())
            assert int(bmm_elements([ra], [rb], 2, sb)[0]) == int(want[nn_, i, j])
            got = harness.bmmElement.call(
                descriptor(ta, n * a.shape[1], kk), descriptor(tb, n * bt.shape[1], kk), (n, 2, sb), nn_, i, j,
                [_open(ta, (nn_ * a.shape[1] + i) * kk, kk), _open(tb, (nn_ * bt.shape[1] + j) * kk, kk)])
            assert got == int(want[nn_, i, j])


def test_elements_badInputs_revertByName(harness):
    rows, k = 6, 64  # a row is a leaf
    x = torch.randn(rows, k)
    tx = TensorTree(x)
    desc, row1 = descriptor(tx, rows, k), _open(tx, k, k)
    with brownie.reverts("OneStepShapeInvalid: 6, 0"):
        harness.rowScaleElement.call(desc, 2, rows, row1)
    with brownie.reverts("OneStepLimbsInvalid: 4"):
        harness.rowScaleElement.call(desc, 4, 1, row1)
    changed = bytearray(row1[0])
    changed[5] ^= 1
    with brownie.reverts(f"TensorOpeningInvalid: {tx.root!r}, 1, 1"):
        harness.rowScaleElement.call(desc, 2, 1, (bytes(changed), row1[1]))
    with brownie.reverts(f"TensorOpeningInvalid: {tx.root!r}, 1, 1"):
        harness.rowScaleElement.call(desc, 2, 1, _open(tx, 2 * k, k))  # row 2's opening as row 1's
    # weight gradient: aᵀ (in 3, M 64), gᵀ (out 6, M 64), scales (64)
    ta, tg = TensorTree(torch.randn(3, k)), TensorTree(x)
    ts = TensorTree(torch.ones(k))
    descs = [descriptor(ta, 3, k), descriptor(tg, rows, k), descriptor(ts, 1, k)]
    opens = [_open(ta, 0, k), _open(tg, 0, k), _open(ts, 0, k)]
    with brownie.reverts("OneStepShapeInvalid: 6, 0"):
        harness.weightGradElement.call(descs, 2, rows, 0, opens)
    with brownie.reverts("OneStepShapeInvalid: 0, 3"):
        harness.weightGradElement.call(descs, 2, 0, 3, opens)
    with brownie.reverts("OneStepOperandsMismatch: 1"):
        harness.weightGradElement.call([descs[0], descriptor(tg, 7, 60), descs[2]], 2, 0, 0, opens)
    with brownie.reverts("OneStepOperandsMismatch: 2"):
        harness.weightGradElement.call([descs[0], descs[1], descriptor(ts, 1, k - 1)], 2, 0, 0, opens)
    with brownie.reverts("OneStepLimbsInvalid: 1"):
        harness.weightGradElement.call(descs, 1, 0, 0, opens)
    with brownie.reverts(f"TensorOpeningInvalid: {tx.root!r}, 0, 1"):
        harness.weightGradElement.call(descs, 2, 0, 0, [opens[0], (bytes(changed), row1[1]), opens[2]])
    # bmm: a (2 x 3, 64), bt (2 x 3, 64)
    bdesc = descriptor(tx, rows, k)
    pair = [_open(tx, 0, k), _open(tx, 0, k)]
    with brownie.reverts("OneStepOperandsMismatch: 0"):
        harness.bmmElement.call(bdesc, bdesc, (4, 2, ONE), 0, 0, 0, pair)
    with brownie.reverts("OneStepOperandsMismatch: 0"):
        harness.bmmElement.call(bdesc, bdesc, (0, 2, ONE), 0, 0, 0, pair)
    with brownie.reverts("OneStepOperandsMismatch: 1"):
        harness.bmmElement.call(bdesc, descriptor(tx, rows, k - 1), (2, 2, ONE), 0, 0, 0, pair)
    with brownie.reverts("OneStepShapeInvalid: 6, 6"):
        harness.bmmElement.call(bdesc, bdesc, (2, 2, ONE), 2, 0, 0, pair)
    with brownie.reverts("OneStepShapeInvalid: 3, 6"):
        harness.bmmElement.call(bdesc, bdesc, (2, 2, ONE), 1, 0, 3, pair)
    with brownie.reverts(f"TensorOpeningInvalid: {tx.root!r}, 3, 1"):
        harness.bmmElement.call(bdesc, bdesc, (2, 2, ONE), 1, 0, 0, pair)  # row 0's opening as row 3's
    with brownie.reverts("OneStepHarnessBatchMalformed: 8, 0, 3"):
        harness.rowScales.call(2, 3, b"\x00" * 8)
    with brownie.reverts("OneStepHarnessBatchMalformed: 12, 12, 3"):
        harness.weightGrads.call(2, 3, b"\x00" * 12, b"\x00" * 12, b"\x00" * 8)
    with brownie.reverts("OneStepHarnessBatchMalformed: 12, 8, 3"):
        harness.bmms.call(2, 3, ONE, b"\x00" * 12, b"\x00" * 8)
    assert_headroom(harness)
