"""Causal multi-head self-attention's core, stock or repro.

Repro attention takes every product (Q K^T, P V and the four backward products) as exact
integer sums of quantised operands (:func:`bmm_exact`; float64 through the BLAS, exact
while the contraction is at most 2**27 long), rounded once to float32; the softmax is
float64 with the project's exp and exact row sums. All of it stays inside one sequence,
so sequences are independent of the batch they ride in.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..intgemm import _quantize_with, operand_bits, pow2_scales
from ..repro_ops import F32, F64, exp64, tree_sum, unit_row_sum
from .. import intgemm_fused, native_chains, native_planes
from .step import ReproStep


def _quantized(x: torch.Tensor, dim: int, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 integers of ``x`` quantised along ``dim`` (one scale per slice across it), and
    the float64 scales (kept as a size-1 ``dim``)."""
    amax = x.abs().amax(dim, keepdim=True)
    up, down = pow2_scales(amax, bits)
    return _quantize_with(x, up, bits).to(F64), down.to(F64)


def bmm_exact(a: torch.Tensor, b: torch.Tensor, limbs: int, fuse: bool = False, int8: bool = False) -> torch.Tensor:
    """float32 ``a @ b`` for (N, M, K) @ (N, K, P): rows of ``a`` and columns of ``b``
    quantised on their own scales, the integer sums exact, one rounding. ``fuse``: the
    quantising and the rounding as C kernels on a CPU (:mod:`native_chains`, same bits);
    ``int8`` (an engine whose int8 kernel passed its self-test): the sums as int8 plane
    products (:mod:`native_planes`; the same integers, so the same bits)."""
    bits = operand_bits(limbs)
    if int8 and native_planes.usable(a, fuse, 0):
        return native_planes.bmm_exact(a, b, bits, limbs)
    if native_chains.usable(a, fuse):
        qa, sa = native_chains.quantize_batched(a, -1, bits)
        qb, sb = native_chains.quantize_batched(b, -2, bits)
        return native_chains.finish_batched(torch.bmm(qa, qb), sa, sb)
    qa, sa = _quantized(a, -1, bits)
    qb, sb = _quantized(b, -2, bits)
    s = torch.bmm(qa, qb).add_(0.0)  # +0.0: a zero sum is +0.0 whatever the BLAS's sign
    return (s * sa * sb).to(F32)


def _causal_mask(t: int, device) -> torch.Tensor:
    return torch.ones((t, t), dtype=torch.bool, device=device).triu_(1)


def softmax_causal(s: torch.Tensor) -> torch.Tensor:
    """float32 row softmax of (N, T, T) scores with the future masked: float64, the
    project's exp, exact row sums, one rounding."""
    n, t, _ = s.shape
    z = s.to(F64).masked_fill(_causal_mask(t, s.device), float("-inf"))
    e = exp64(z - z.amax(-1, keepdim=True))
    return (e / unit_row_sum(e.view(n * t, t)).view(n, t, 1)).to(F32)


def softmax_backward(p: torch.Tensor, dp: torch.Tensor, scale: float) -> torch.Tensor:
    """float32 ``scale * p * (dp - rowsum(dp * p))`` (float64 inside, fixed-order row sums)."""
    p64, dp64 = p.to(F64), dp.to(F64)
    return (p64 * (dp64 - tree_sum(dp64 * p64).unsqueeze(-1))).to(F32) * scale


def _scale(d: int) -> float:
    """float32 ``1 / sqrt(d)`` the same on every machine (Python's IEEE square root and
    division, rounded once to float32; ``torch.rsqrt`` may differ by an ulp between CPUs)."""
    return float(torch.tensor(1.0 / math.sqrt(d), dtype=F32))


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, step: ReproStep):
        limbs, fuse, int8 = step.limbs, step.fuse, step.engine.route == "int8"
        q, k, v = (t.detach() for t in (q, k, v))
        scale = _scale(q.shape[-1])
        p = intgemm_fused.run("softmax_causal", fuse, bmm_exact(q, k.transpose(1, 2), limbs, fuse, int8) * scale)
        ctx.step, ctx.scale = step, scale
        ctx.save_for_backward(q, k, v, p)
        return bmm_exact(p, v, limbs, fuse, int8)

    @staticmethod
    def backward(ctx, g):
        q, k, v, p = ctx.saved_tensors
        limbs, fuse, g = ctx.step.limbs, ctx.step.fuse, g.contiguous()
        int8 = ctx.step.engine.route == "int8"
        dv = bmm_exact(p.transpose(1, 2), g, limbs, fuse, int8)
        dp = bmm_exact(g, v.transpose(1, 2), limbs, fuse, int8)
        ds = intgemm_fused.run("softmax_backward", fuse, p, dp, ctx.scale)
        dq = bmm_exact(ds, k, limbs, fuse, int8)
        dk = bmm_exact(ds.transpose(1, 2), q, limbs, fuse, int8)
        return dq, dk, dv, None


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, step: ReproStep | None) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d) + causal mask) V for (B, H, T, d) tensors."""
    if step is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    b, h, t, d = q.shape
    flat = [x.reshape(b * h, t, d) for x in (q, k, v)]
    return _Attention.apply(*flat, step).view(b, h, t, d)
