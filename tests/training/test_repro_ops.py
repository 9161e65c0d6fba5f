"""Repro ops: exact products and sums, batch independence, exp/log accuracy, gradients."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from truetrain.errors import ReproducibilityError
from truetrain.training.models import build_stock_model, init_params, parse_model_spec
from truetrain.training.repro_net import ReproNet
from truetrain.training.repro_ops import (exact_matmul, exact_sum, exp64, exp_f32, first_argmax,
                                         log64, log_f32, operand_bits, softmax_xent, tree_sum,
                                         xent_loss)

CNN = {"kind": "cnn", "in_shape": [1, 8, 8], "channels": [4, 8], "kernel": 3, "hidden": [16],
       "classes": 10}
MLP = {"kind": "mlp", "widths": [64, 32, 16, 10]}


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_exact_matmul_rowAloneOrInBatch_sameBits():
    a = torch.randn(37, 300, generator=_gen(1))
    b = torch.randn(300, 50, generator=_gen(2))
    full = exact_matmul(a, b)
    for i in (0, 5, 36):
        assert torch.equal(exact_matmul(a[i:i + 1], b), full[i:i + 1])
    assert torch.equal(exact_matmul(a[10:20], b), full[10:20])


def test_exact_matmul_threadCount_sameBits():
    a = torch.randn(64, 784, generator=_gen(3))
    b = torch.randn(784, 128, generator=_gen(4))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = exact_matmul(a, b)
        torch.set_num_threads(2)
        two = exact_matmul(a, b)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, two)


def test_exact_matmul_closeToFloat64():
    a = torch.randn(64, 784, generator=_gen(5))
    b = torch.randn(784, 128, generator=_gen(6))
    ref = a.double() @ b.double()
    err = (exact_matmul(a, b).double() - ref).abs().max() / ref.abs().max()
    assert err < 2e-6


def test_exact_matmul_zeroRowsAndNegativeZero_givePositiveZero():
    a = torch.zeros(3, 4)
    a[1] = torch.tensor([1.0, -1.0, 0.5, -0.5])
    a[2] = -0.0
    b = torch.ones(4, 2)
    out = exact_matmul(a, b)
    assert torch.equal(out, torch.zeros(3, 2))
    assert not torch.signbit(out).any()


def test_exact_matmul_nonFinite_raises():
    a = torch.ones(2, 3)
    a[0, 1] = math.nan
    with pytest.raises(ReproducibilityError):
        exact_matmul(a, torch.ones(3, 2))


def test_operand_bits_tooLongReduction_raises():
    assert operand_bits(784, 22) == 21
    with pytest.raises(ReproducibilityError):
        operand_bits(2**30, 22)


def test_exact_sum_anyOrder_sameBits():
    x = torch.randn(1000, 7, generator=_gen(7)) * torch.logspace(-3, 3, 7)
    s = exact_sum(x, 0)
    perm = torch.randperm(1000, generator=_gen(8))
    assert torch.equal(exact_sum(x[perm], 0), s)
    assert torch.equal(exact_sum(x.T.contiguous(), 1), s)
    assert torch.allclose(s.double(), x.double().sum(0), rtol=1e-6, atol=1e-6)


def test_tree_sum_fixedPairwiseOrder():
    # pairwise: (1 + 2**53) + (1 - 2**53) = 1; left to right it would be 0
    x = torch.tensor([[1.0, 2.0**53, 1.0, -(2.0**53)]], dtype=torch.float64)
    assert tree_sum(x).item() == 1.0
    assert tree_sum(torch.tensor([[1.0, 2.0, 4.0]])).item() == 7.0


def _ulp32_error(got: np.ndarray, exact: np.ndarray) -> float:
    """Error in float32 ulps of the exact value (exact: float64)."""
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return float(np.max(np.abs(got.astype(np.float64) - exact) / ulp))


def test_exp_f32_withinOneUlp():
    x = np.concatenate([np.linspace(-103, 88, 200001), np.linspace(-1, 1, 100001)])
    x = x.astype(np.float32)
    got = exp_f32(torch.from_numpy(x)).numpy()
    assert _ulp32_error(got, np.exp(x.astype(np.float64))) <= 1.0


def test_log_f32_withinOneUlp():
    x = np.concatenate([np.logspace(-37, 38, 200001), np.linspace(0.5, 2.0, 100001)])
    x = x.astype(np.float32)
    x = x[x != 1.0]
    got = log_f32(torch.from_numpy(x)).numpy()
    assert _ulp32_error(got, np.log(x.astype(np.float64))) <= 1.0


def test_exp64_log64_relativeErrorVsLibm():
    x = torch.linspace(-700, 700, 100001, dtype=torch.float64)
    rel = ((exp64(x) - torch.exp(x)) / torch.exp(x)).abs().max()
    assert rel < 1e-12
    y = torch.logspace(-300, 300, 100001, dtype=torch.float64)
    assert ((log64(y) - torch.log(y)).abs() / torch.log(y).abs().clamp_min(1e-3)).max() < 1e-13


def test_exp_log_specialCases():
    e = exp64(torch.tensor([0.0, -math.inf, math.inf, math.nan, -800.0, 800.0],
                           dtype=torch.float64))
    assert e[0] == 1.0 and e[1] == 0.0 and e[2] == math.inf and math.isnan(e[3])
    assert e[4] == 0.0 and e[5] == math.inf
    lg = log64(torch.tensor([1.0, 0.0, -1.0, math.inf, math.nan, 2.0], dtype=torch.float64))
    assert lg[0] == 0.0 and lg[1] == -math.inf and math.isnan(lg[2]) and lg[3] == math.inf
    assert math.isnan(lg[4]) and abs(lg[5] - math.log(2.0)) < 1e-16


def test_softmax_xent_rowAloneOrInBatch_sameBits_andMatchesTorch():
    logits = torch.randn(20, 10, generator=_gen(9)) * 5
    y = torch.randint(0, 10, (20,), generator=_gen(10))
    grad, s, t = softmax_xent(logits, y, 20)
    g1, s1, t1 = softmax_xent(logits[3:4], y[3:4], 20)
    assert torch.equal(g1, grad[3:4]) and torch.equal(s1, s[3:4]) and torch.equal(t1, t[3:4])
    ref = logits.clone().requires_grad_(True)
    loss = F.cross_entropy(ref.double(), y)
    loss.backward()
    assert abs(float(xent_loss(s, t).mean()) - float(loss.detach())) < 1e-12
    assert torch.allclose(grad, ref.grad.float(), atol=1e-7)


def test_first_argmax_tiesGoToFirst():
    x = torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0], [0.0, -1.0, 5.0]])
    assert first_argmax(x, 1).tolist() == [1, 0, 2]


@pytest.mark.parametrize("raw", [MLP, CNN], ids=["mlp", "cnn"])
def test_gradients_microBatchSplits_sameBits(raw):
    spec = parse_model_spec(raw)
    params = init_params(spec, 3)
    net = ReproNet(spec)
    x = torch.rand(48, 64, generator=_gen(11))
    y = torch.randint(0, 10, (48,), generator=_gen(12))
    full, s, t = net.gradients(params, x, y)
    for micro in (1, 7, 16, 47):
        grads, s2, t2 = net.gradients(params, x, y, micro_batch=micro)
        assert all(torch.equal(full[k], grads[k]) for k in full), micro
        assert torch.equal(s, s2) and torch.equal(t, t2)


@pytest.mark.parametrize("raw", [MLP, CNN], ids=["mlp", "cnn"])
def test_gradients_closeToFloat64Autograd(raw):
    spec = parse_model_spec(raw)
    params = init_params(spec, 4)
    x = torch.rand(32, 64, generator=_gen(13))
    y = torch.randint(0, 10, (32,), generator=_gen(14))
    grads, _, _ = ReproNet(spec).gradients(params, x, y)
    module = build_stock_model(spec, params).double()
    F.cross_entropy(module(x.double()), y).backward()
    for name, p in module.named_parameters():
        err = (grads[name].double() - p.grad).abs().max() / p.grad.abs().max()
        assert err < 5e-5, name


@pytest.mark.parametrize("raw", [MLP, CNN], ids=["mlp", "cnn"])
def test_forward_rowAloneOrInBatch_sameBits(raw):
    spec = parse_model_spec(raw)
    params = init_params(spec, 5)
    net = ReproNet(spec)
    x = torch.rand(16, 64, generator=_gen(15))
    full = net.forward(params, x)
    assert torch.equal(net.forward(params, x[7:8]), full[7:8])
    assert torch.equal(net.forward(params, x[2:9]), full[2:9])
