"""ReLU, 2-D convolution and 2x2 max pooling (the digits CNN's ops), stock or repro.

Repro feature maps are channels-last, ``(B, H, W, C)``. A convolution is its patches
(:func:`im2col`, feature order ``(c, kh, kw)`` like ``Conv2d``'s weight) through the
repro :func:`~.linear.linear` map; its input gradient adds the patch gradients back in a
fixed order (:func:`col2im`). Pooling keeps the first maximum of each window (a 0/1 mask)
and its backward puts the gradient back there. Everything here is data movement or
elementwise, so the bits are those of the inputs. Small CPU tensors take one exact C call
(:mod:`..native`, self-tested against these torch ops), large ones the compiled kernels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import intgemm_fused, native
from ..repro_ops import F32, first_max_mask
from .linear import linear_rows
from .step import ReproStep

# Masks are float32 0/1 and applied as ``x * mask + 0.0``: exact, and the + 0.0 turns the
# -0.0 a negative x times 0 gives into +0.0 (torch.where with a bool mask computes the same
# values but runs several times slower on a CPU).


def apply_mask(mask: torch.Tensor, x: torch.Tensor, fuse: bool = False) -> torch.Tensor:
    return intgemm_fused.run("apply_mask", fuse, mask, x)


def im2col(a: torch.Tensor, k: int, fuse: bool = False) -> torch.Tensor:
    """(B, H, W, C) -> (B*H*W, C*k*k) patches, feature order (c, kh, kw) like Conv2d."""
    if native.small(a, fuse):
        return native.im2col(a, k)
    b, h, w, c = a.shape
    p = k // 2
    ap = F.pad(a, (0, 0, p, p, p, p))
    cols = [ap[:, i:i + h, j:j + w, :] for i in range(k) for j in range(k)]
    return torch.stack(cols, dim=-1).reshape(b * h * w, c * k * k)


def col2im(d: torch.Tensor, shape: tuple[int, int, int, int], k: int, fuse: bool = False) -> torch.Tensor:
    """Adjoint of :func:`im2col`: overlapping patch gradients added in a fixed order."""
    if native.small(d, fuse):
        return native.col2im(d, shape, k)
    b, h, w, c = shape
    p = k // 2
    d = d.view(b, h, w, c, k * k)
    out = torch.zeros(b, h + 2 * p, w + 2 * p, c, dtype=d.dtype, device=d.device)
    for i in range(k):
        for j in range(k):
            out[:, i:i + h, j:j + w, :] += d[..., i * k + j]
    return out[:, p:p + h, p:p + w, :]


def pool(a: torch.Tensor, fuse: bool = False):
    """2x2 max pooling of a (B, H, W, C) map and the first-max mask (B, H/2, W/2, C, 4)."""
    if native.small(a, fuse):
        return native.pool(a)
    b, h, w, c = a.shape
    v = a.view(b, h // 2, 2, w // 2, 2, c).permute(0, 1, 3, 5, 2, 4).reshape(
        b, h // 2, w // 2, c, 4)
    return v.amax(dim=-1), first_max_mask(v, -1).to(F32)


def unpool(g: torch.Tensor, mask: torch.Tensor, fuse: bool = False) -> torch.Tensor:
    """The pooled gradient put back where each window's (first) maximum was."""
    if native.small(mask, fuse):
        return native.unpool(g, mask)
    b, h2, w2, c = g.shape
    gv = apply_mask(mask, g.unsqueeze(-1))
    return gv.view(b, h2, w2, c, 2, 2).permute(0, 1, 4, 2, 5, 3).reshape(b, 2 * h2, 2 * w2, c)


class _Masked(torch.autograd.Function):
    """An op whose backward routes the gradient through a mask its forward made: ReLU
    (where ``x > 0``) and 2x2 max-pooling (to each window's first maximum)."""

    @staticmethod
    def forward(ctx, x, kind: str, fuse: bool):
        out, mask = _MASKED[kind][0](x.detach(), fuse)
        ctx.kind, ctx.fuse = kind, fuse
        ctx.save_for_backward(mask)
        return out

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        return _MASKED[ctx.kind][1](g.contiguous(), mask, ctx.fuse), None, None


#: kind -> (forward giving (output, mask), backward of (gradient, mask))
_MASKED = {
    "relu": (lambda x, fuse: intgemm_fused.run("relu", fuse, x), lambda g, mask, fuse: apply_mask(mask, g, fuse)),
    "pool": (pool, unpool),
}


def relu(x: torch.Tensor, step: ReproStep | None) -> torch.Tensor:
    """``max(x, 0)`` (repro: +0.0 where ``x <= 0``; the gradient passes where ``x > 0``)."""
    return torch.relu(x) if step is None else _Masked.apply(x, "relu", step.fuse)


class _Im2col(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, k: int, fuse: bool):
        ctx.k, ctx.fuse, ctx.shape = k, fuse, tuple(a.shape)
        return im2col(a.detach(), k, fuse)

    @staticmethod
    def backward(ctx, g):
        return col2im(g.contiguous(), ctx.shape, ctx.k, ctx.fuse), None, None


def conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, step: ReproStep | None,
           name: str, relu: bool = False) -> torch.Tensor:
    """'Same'-padded, stride-1 convolution with an odd square kernel, then a ReLU where
    ``relu``. Stock: ``x`` is NCHW (``F.conv2d``); repro: ``x`` is NHWC and so is the result."""
    k = weight.shape[-1]
    if step is None:
        out = F.conv2d(x, weight, bias, padding=k // 2)
        return torch.relu(out) if relu else out
    b, h, w, _ = x.shape
    cols = _Im2col.apply(x, k, step.fuse)
    out = linear_rows(cols, weight, bias, step, name + ".weight",
                      name + ".bias", per_row=h * w, relu=relu)
    return out.view(b, h, w, weight.shape[0])


def max_pool2x2(x: torch.Tensor, step: ReproStep | None) -> torch.Tensor:
    """2x2, stride-2 max pooling: NCHW stock, NHWC repro (ties: the first maximum)."""
    return F.max_pool2d(x, 2) if step is None else _Masked.apply(x, "pool", step.fuse)
