"""A small repro linear map in one C call each way (``linear_kernels.c``).

On the digits models every tensor of a linear map is small, and a step's time went to
dispatch: quantising, the float64 product, ``+ 0.0``, the rounding and the bias were
separate calls. Here the forward is one call (``x`` quantised per row, the exact product
with the step's quantised weight, rounded once, plus the bias) and so is the weight and
bias gradient of a batch in one piece; the products are exact float64 integer sums, so
their values are the float64 route's whatever the order, and the rounding is the same.
Built into :mod:`native`'s library and self-tested with it against ``GemmEngine``.
"""

from __future__ import annotations

import ctypes

import torch

from . import native, native_planes
from .intgemm import Operand, operand_bits

F32, F64 = torch.float32, torch.float64
_EXACT_BITS = 53


def declare(lib: ctypes.CDLL) -> None:
    """The C signatures (called by :func:`native._load`)."""
    p, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    lib.tt_small_linear.argtypes = [p, i64, i64, i64, i32, p, i64, i64, p, p, p, p, p, p, p]
    lib.tt_small_linear.restype = i32
    lib.tt_small_weight_grad.argtypes = [p, i64, i64, p, i32, i32, p, i64, p, p, p, p, p]
    lib.tt_small_weight_grad.restype = i32


def _panels(k: int, n: int) -> int:
    """Doubles of scratch the kernels pack a (k, n) right operand into."""
    return k * -(-n // 16) * 16


def exact(k: int, limbs: int) -> bool:
    """Whether sums of ``k`` products of ``limbs``-limb integers are exact in float64."""
    return k << (2 * operand_bits(limbs)) <= 1 << _EXACT_BITS


def usable(x: torch.Tensor, w: torch.Tensor, engine) -> bool:
    """Whether ``x @ w.T`` takes these kernels: a product the engine takes on the float64
    route anyway, a weight small enough to be quantised to float64 integers, float32 CPU
    tensors on a fused engine with the C kernels."""
    return (engine.fuse and engine.device == "cpu" and x.dtype == F32 and x.device.type == "cpu"
            and x.shape[0] * w.numel() < engine.small_product and w.numel() < native_planes.MIN_ELEMENTS
            and native.ready())


def product(x: torch.Tensor, right: Operand, bias: torch.Tensor | None, relu: bool = False):
    """``(engine.matmul(quantize(x, 1), right, bias), quantize(x, 1))`` for contiguous
    float32 ``x`` (m, k) and a right operand holding float64 integers; with ``relu``,
    ``((relu(y), mask), quantize(x, 1))`` as ``intgemm_fused``'s relu gives them."""
    m, k = x.shape
    n = right.shape[1]
    w, limbs = right.q64, right.limbs
    xq, xdown = torch.empty((m, k), dtype=F64), torch.empty(m, dtype=F32)
    scratch = torch.empty(m * n + _panels(k, n), dtype=F64)
    y = torch.empty((m, n), dtype=F32)
    mask = torch.empty((m, n), dtype=F32) if relu else None
    wdown = None if right.scale is None else right.scale.to(F32).contiguous()
    bias = None if bias is None else bias.to(F32).contiguous()
    if native._state["lib"].tt_small_linear(
            x.data_ptr(), m, k, n, operand_bits(limbs), w.data_ptr(), w.stride(0), w.stride(1),
            None if wdown is None else wdown.data_ptr(), None if bias is None else bias.data_ptr(),
            xq.data_ptr(), xdown.data_ptr(), scratch.data_ptr(), y.data_ptr(),
            None if mask is None else mask.data_ptr()) != 0:
        raise MemoryError("tt_small_linear: no scratch memory")
    return (y, mask) if relu else y, Operand(None, xdown, limbs, q64=xq)


def weight_grad(g: torch.Tensor, qa: Operand, bits_b: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dW, db)`` of a batch in one piece, each rounded once: what ``GradBook`` makes of
    ``native.grad_columns`` and the weight product (its ``rounded`` and ``columns`` parts)."""
    m, n = g.shape
    xq, limbs = qa.q64.contiguous(), qa.limbs
    k = xq.shape[1]
    sa = qa.scale.to(F32).contiguous()
    cmax, down = torch.empty(2 * n, dtype=F32), torch.empty(n, dtype=F32)
    scratch = torch.empty(m * n + 2 * k * n + _panels(m, n) + 2 * n, dtype=F64)
    db, dw = torch.empty(n, dtype=F32), torch.empty((n, k), dtype=F32)
    if native._state["lib"].tt_small_weight_grad(
            g.data_ptr(), m, n, sa.data_ptr(), operand_bits(limbs), bits_b, xq.data_ptr(), k, cmax.data_ptr(),
            down.data_ptr(), scratch.data_ptr(), db.data_ptr(), dw.data_ptr()) != 0:
        raise MemoryError("tt_small_weight_grad: no scratch memory")
    return dw, db


def self_test(gen: torch.Generator, same) -> str | None:
    """The first kernel here whose bits differ from ``GemmEngine``'s float64 route, or None
    (``same``: native's bit-for-bit comparison)."""
    from . import intgemm_fused
    from .intgemm import GemmEngine, quantize

    engine = GemmEngine("cpu", "float64")
    for limbs, (m, k, n) in ((2, (37, 29, 13)), (3, (5, 70, 8)), (2, (64, 9, 17)), (3, (3, 1, 1))):
        x = torch.randn(m, k, generator=gen) * torch.logspace(-6, 6, k)
        x[0, :3] = torch.tensor([0.0, -0.0, float("nan")])[:min(3, k)]
        x[-1] = 0.0
        w = torch.randn(n, k, generator=gen)
        w[0] = -0.0
        bias = torch.randn(n, generator=gen)
        bias[0] = -0.0
        for right in (quantize(w.T, 0, limbs), quantize(w.T.contiguous(), 0, limbs)):
            for b in (bias, None):
                qa = quantize(x, 1, limbs)
                y, got = product(x, right, b)
                want = engine.matmul(qa, right, b)
                relu = product(x, right, b, relu=True)[0]
                if not (same(y, want) and same(got.q64, qa.q64) and same(got.scale, qa.scale)
                        and all(same(u, v) for u, v in zip(relu, intgemm_fused._relu(want), strict=True))):
                    return f"tt_small_linear differs ({m}x{k}x{n}, {limbs} limbs)"
        g = torch.randn(m, n, generator=gen) * torch.logspace(-4, 4, n)
        g[1] = 0.0
        bits_b = _EXACT_BITS - max(0, (m - 1).bit_length())
        dw, db = weight_grad(g, qa, bits_b)
        q64, down, sb, down_b = native.grad_columns(g, qa.scale, operand_bits(limbs), bits_b)
        want = engine.matmul(qa.transposed(), Operand(None, down, limbs, q64=q64))
        if not (same(dw, want.T.contiguous()) and same(db, sb.add(0.0).mul_(down_b).to(F32))):
            return f"tt_small_weight_grad differs ({m}x{k}x{n}, {limbs} limbs)"
    return None
