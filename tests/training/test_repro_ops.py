"""Repro ops: exact sums, exp/log accuracy, the op library's MLP and CNN gradients on every GEMM route."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from truetrain.errors import ReproducibilityError
from truetrain.training.models import build_model, init_params, parse_model_spec
from truetrain.training.intgemm import GemmEngine
from truetrain.training.ops import ReproStep, repro_gradients
from truetrain.training.repro_ops import (exact_sum, exp64, exp_f32, first_argmax, log64,
                                         log_f32, operand_bits, softmax_xent, tree_sum,
                                         xent_loss)

# the engine's own tests run the compiled kernels on small tensors too
pytestmark = pytest.mark.usefixtures("fused_kernels_at_every_size")

# The int8 route on every product, however small, and the float64 fallback.
INT8 = GemmEngine("cpu", "int8", small_product=0)
FLOAT64 = GemmEngine("cpu", "float64")
FUSED = GemmEngine("cpu", "int8", small_product=0, fuse=True)  # compiled elementwise steps
ENGINES = {"int8": INT8, "float64": FLOAT64, "fused": FUSED}



class ReproNet:
    """The op library's model in repro mode, seen as (gradients, forward) of parameters."""

    def __init__(self, spec, engine, limbs=2):
        self.spec, self.engine, self.limbs = spec, engine, limbs

    def gradients(self, params, x, y, micro_batch=None):
        grads, parts = repro_gradients(build_model(self.spec, params), x, y, self.engine, self.limbs, micro_batch)
        return grads, torch.cat([s for s, _ in parts]), torch.cat([t for _, t in parts])

    def forward(self, params, x):
        with torch.no_grad():
            return build_model(self.spec, params)(x, ReproStep(self.engine, self.limbs, x.shape[0]))


CNN = {"kind": "cnn", "in_shape": [1, 8, 8], "channels": [4, 8], "kernel": 3, "hidden": [16],
       "classes": 10}
MLP = {"kind": "mlp", "widths": [64, 32, 16, 10]}


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


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
    ours = exp64(x)
    assert torch.equal(exp64(x), ours)
    ref = torch.from_numpy(np.exp(x.numpy()))  # numpy's own exp, not torch's
    rel = ((ours - ref) / ref).abs()
    worst = int(rel.argmax())
    assert rel[worst] < 1e-12, (float(x[worst]), float(ours[worst]), float(ref[worst]))
    y = torch.logspace(-300, 300, 100001, dtype=torch.float64)
    ref = torch.from_numpy(np.log(y.numpy()))
    assert ((log64(y) - ref).abs() / ref.abs().clamp_min(1e-3)).max() < 1e-13


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


@pytest.mark.fuse_threshold
@pytest.mark.parametrize("limbs", [2, 3])
@pytest.mark.parametrize("raw", [MLP, CNN], ids=["mlp", "cnn"])
def test_gradients_microBatchSplitsAndRoutes_sameBits(raw, limbs):
    """Every route and micro-batch split gives the same gradient bits. The fused engine runs
    as a worker does: below the size threshold, the C kernels. Compiling its kernels for
    each model's, limb count's and split's shapes cost 250 CPU-seconds of a cold `make test`
    (80 for the MLP's whole batch alone); the compiled kernels' bits are checked against the
    eager engine in test_intgemm (and a worker compiles them for the default LM's step in
    test_memory)."""
    spec = parse_model_spec(raw)
    params = init_params(spec, 3)
    x = torch.rand(48, 64, generator=_gen(11))
    y = torch.randint(0, 10, (48,), generator=_gen(12))
    full, s, t = ReproNet(spec, INT8, limbs).gradients(params, x, y)
    for route, micro in (("int8", 1), ("int8", 7), ("float64", None), ("float64", 16),
                         ("int8", 47), ("fused", None), ("fused", 13)):
        grads, s2, t2 = ReproNet(spec, ENGINES[route], limbs).gradients(params, x, y, micro_batch=micro)
        assert all(torch.equal(full[k], grads[k]) for k in full), (route, micro)
        assert torch.equal(s, s2) and torch.equal(t, t2)


# What a CPU worker runs by default: small products on the float64 route, the elementwise
# work on small tensors in the exact C kernels (truetrain/training/native.py), compiled
# kernels only on tensors of 256 Ki elements or more.
WORKER = GemmEngine("cpu", "int8", fuse=True)
NATIVE_INT8 = GemmEngine("cpu", "int8", small_product=0, fuse=True)


@pytest.mark.fuse_threshold
@pytest.mark.parametrize("limbs", [2, 3])
@pytest.mark.parametrize("raw", [MLP, CNN], ids=["mlp", "cnn"])
def test_gradients_exactCKernels_sameBitsAsTorchOps_wholeAndMicroBatches(raw, limbs):
    from truetrain.training import native

    assert native.ready()
    spec = parse_model_spec(raw)
    params = init_params(spec, 6)
    x = torch.rand(40, 64, generator=_gen(21))
    y = torch.randint(0, 10, (40,), generator=_gen(22))
    full, s, t = ReproNet(spec, FLOAT64, limbs).gradients(params, x, y)  # torch ops only
    for engine, micro in ((WORKER, None), (WORKER, 9), (NATIVE_INT8, None), (NATIVE_INT8, 16)):
        grads, s2, t2 = ReproNet(spec, engine, limbs).gradients(params, x, y, micro_batch=micro)
        assert all(torch.equal(full[k], grads[k]) for k in full), (engine.small_product, micro)
        assert torch.equal(s, s2) and torch.equal(t, t2)
    logits = ReproNet(spec, WORKER, limbs).forward(params, x)
    assert torch.equal(logits, ReproNet(spec, FLOAT64, limbs).forward(params, x))


# Relative error (norm of the difference over the norm) against float64 autograd. At 2 limbs
# the CNN's figure is set by its max-pool and ReLU decisions: near-ties that 13-bit operands
# order differently route a gradient elsewhere; at 3 limbs both models match closely.
TOLERANCE = {("mlp", 2): 3e-4, ("cnn", 2): 3e-2, ("mlp", 3): 5e-6, ("cnn", 3): 5e-6}


@pytest.mark.parametrize("limbs", [2, 3])
@pytest.mark.parametrize("raw", [MLP, CNN], ids=["mlp", "cnn"])
def test_gradients_closeToFloat64Autograd(raw, limbs):
    spec = parse_model_spec(raw)
    params = init_params(spec, 4)
    x = torch.rand(32, 64, generator=_gen(13))
    y = torch.randint(0, 10, (32,), generator=_gen(14))
    grads, _, _ = ReproNet(spec, INT8, limbs).gradients(params, x, y)
    module = build_model(spec, params).double()
    F.cross_entropy(module(x.double()), y).backward()
    for name, p in module.named_parameters():
        err = (grads[name].double() - p.grad).norm() / p.grad.norm()
        assert err < TOLERANCE[(raw["kind"], limbs)], name


@pytest.mark.parametrize("raw", [MLP, CNN], ids=["mlp", "cnn"])
def test_forward_rowAloneOrInBatch_sameBits(raw):
    spec = parse_model_spec(raw)
    params = init_params(spec, 5)
    net = ReproNet(spec, INT8)
    x = torch.rand(16, 64, generator=_gen(15))
    full = net.forward(params, x)
    assert torch.equal(net.forward(params, x[7:8]), full[7:8])
    assert torch.equal(net.forward(params, x[2:9]), full[2:9])
