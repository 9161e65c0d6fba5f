"""LayerNorm and GELU, stock or repro.

Repro forms are row-local and use only correctly rounded float64 operations (+ - * /)
as separate kernels, the project's deterministic square root (``sqrt64``), fixed-order row sums (:func:`~..repro_ops.tree_sum`) and the
project's own erf and exp, each result rounded once to float32: the same bits on any
device, thread count and batch split. LayerNorm's gain and shift gradients are column
sums over the batch rows, taken exactly by the step's book.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .. import intgemm_fused, native_chains
from ..repro_ops import F32, F64, exp64, sqrt64, tree_sum
from ..repro_special import erf64
from .step import ReproStep

_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _row_mean(x64: torch.Tensor) -> torch.Tensor:
    return tree_sum(x64) / x64.shape[-1]


def ln_forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float):
    """``(y, xhat, rstd)``: float32 ``y`` and the float64 normalised rows and 1/std."""
    x64 = x.to(F64)
    centred = x64 - _row_mean(x64).unsqueeze(-1)
    rstd = 1.0 / sqrt64(_row_mean(centred * centred) + eps)
    xhat = centred * rstd.unsqueeze(-1)
    return (xhat * weight.to(F64) + bias.to(F64)).to(F32), xhat, rstd


def ln_backward(g: torch.Tensor, xhat: torch.Tensor, rstd: torch.Tensor, weight: torch.Tensor):
    """``(dx, g * xhat)`` (float32): the input gradient and the gain's per-row terms."""
    g64 = g.to(F64)
    dxhat = g64 * weight.to(F64)
    inner = dxhat - _row_mean(dxhat).unsqueeze(-1) - xhat * _row_mean(dxhat * xhat).unsqueeze(-1)
    return (inner * rstd.unsqueeze(-1)).to(F32), (g64 * xhat).to(F32)


class _LayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps: float, step: ReproStep, name: str):
        y, xhat, rstd = intgemm_fused.run("ln_forward", step.fuse, x.detach(), weight.detach(), bias.detach(), eps)
        ctx.step, ctx.name = step, name
        ctx.save_for_backward(xhat, rstd, weight.detach())
        return y

    @staticmethod
    def backward(ctx, g):
        xhat, rstd, weight = ctx.saved_tensors
        step, g = ctx.step, g.contiguous()
        dx, gx = intgemm_fused.run("ln_backward", step.fuse, g, xhat, rstd, weight)
        step.book.columns(ctx.name + ".bias", g)
        step.book.columns(ctx.name + ".weight", gx)
        return dx, None, None, None, None, None


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
               step: ReproStep | None, name: str) -> torch.Tensor:
    """LayerNorm over the last dimension (biased variance, like ``torch.nn.LayerNorm``)."""
    if step is None:
        return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)
    lead = x.shape[:-1]
    out = _LayerNorm.apply(x.reshape(-1, x.shape[-1]), weight, bias, eps, step, name)
    return out.view(*lead, x.shape[-1])


def gelu_forward(x: torch.Tensor) -> torch.Tensor:
    """float32 ``x * Phi(x)`` (float64 inside, the project's erf, one rounding)."""
    x64 = x.to(F64)
    return (x64 * (0.5 * (1.0 + erf64(x64 * _INV_SQRT2)))).to(F32)


def gelu_backward(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """float32 ``g * (Phi(x) + x * phi(x))``."""
    x64 = x.to(F64)
    cdf = 0.5 * (1.0 + erf64(x64 * _INV_SQRT2))
    pdf = exp64(-0.5 * (x64 * x64)) * _INV_SQRT_2PI
    return (g.to(F64) * (cdf + x64 * pdf)).to(F32)


class _Gelu(torch.autograd.Function):
    """``x * Phi(x)`` with the exact (erf) normal CDF; compiled on large tensors (one pass
    instead of some forty, self-tested against these eager ops). On a CPU with the C
    kernels the forward keeps the float64 slope ``Phi(x) + x * phi(x)`` instead of ``x``,
    so the backward is one product (the same bits as ``gelu_backward``)."""

    @staticmethod
    def forward(ctx, x, fuse: bool):
        x = x.detach()
        ctx.fuse = fuse
        if native_chains.usable(x, fuse):
            y, slope = native_chains.gelu_slope(x)
            ctx.slope = True
            ctx.save_for_backward(slope)
            return y
        ctx.slope = False
        ctx.save_for_backward(x)
        return intgemm_fused.run("gelu", fuse, x)

    @staticmethod
    def backward(ctx, g):
        (kept,) = ctx.saved_tensors
        if ctx.slope:
            return native_chains.times_slope(g, kept), None
        return intgemm_fused.run("gelu_backward", ctx.fuse, kept, g.contiguous()), None


def gelu(x: torch.Tensor, step: ReproStep | None) -> torch.Tensor:
    return F.gelu(x) if step is None else _Gelu.apply(x, step.fuse)
