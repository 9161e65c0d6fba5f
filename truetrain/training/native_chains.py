"""The transformer's float64 chains as exact C kernels on CPUs (``chain_kernels.c``; the column
sums in ``column_kernels.c``).

GELU (keeping the slope its backward needs), LayerNorm and its gradient, attention's causal
softmax and its gradient, the column sums of bias and gain gradients, and the quantising
and rounding around attention's exact products: each is one vectorised pass in C where
eager torch takes some forty and a compiled kernel still spends most of its time on the table
gathers and the bit tricks of ``exp64``. They are built into the same library as
:mod:`native`'s kernels, self-tested with them against the torch ops bit for bit, and used
by fused engines (the default) on float32 CPU tensors of any size, split over torch's thread
count by OpenMP inside C (torch's own libgomp and thread pool; a pool of Python threads ran
slower at 2 threads than whole). The kernels take row ranges, so the split changes no bit.
"""

from __future__ import annotations

import ctypes
import math

import torch

from . import native

F32, F64 = torch.float32, torch.float64
_consts: dict[str, torch.Tensor] = {}


def declare(lib: ctypes.CDLL) -> None:
    """The C signatures (called by :func:`native._load`)."""
    p, i64, i32, dbl, flt = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_double, ctypes.c_float
    lib.tt_softmax_causal.argtypes = [p, i64, i64, i64, i32, p, p, p]
    lib.tt_softmax_backward.argtypes = [p, p, i64, i64, i64, i64, flt, p, p]
    lib.tt_finish_batched.argtypes = [p, i64, i64, i64, i64, p, p, p]
    lib.tt_gelu_slope.argtypes = [p, i64, i64, p, i32, p, dbl, dbl, p, p]
    lib.tt_times_slope.argtypes = [p, p, i64, i64, p]
    lib.tt_quantize_batched.argtypes = [p, i64, i64, i64, i64, i32, i32, p, p]
    lib.tt_quantize_batched.restype = i32
    lib.tt_ln_forward.argtypes = [p, i64, i64, i64, i64, p, p, dbl, p, p, p, p]
    lib.tt_ln_backward.argtypes = [p, p, p, p, i64, i64, i64, i64, p, p, p]
    lib.tt_column_sums.argtypes = [p, i64, i64, i64, i64, i32, p, p, p]
    for name in ("tt_ln_forward", "tt_ln_backward", "tt_column_sums"):
        getattr(lib, name).restype = None
    for name in ("tt_softmax_causal", "tt_softmax_backward", "tt_finish_batched", "tt_gelu_slope", "tt_times_slope"):
        getattr(lib, name).restype = None
    # the same chains split over OpenMP threads (the last argument: how many)
    lib.tt_gelu_slope_mt.argtypes = [p, i64, p, i32, p, dbl, dbl, p, p, i32]
    lib.tt_gelu_slope_mt.restype = None
    lib.tt_times_slope_mt.argtypes = [p, p, i64, p, i32]
    lib.tt_times_slope_mt.restype = None
    lib.tt_column_sums_mt.argtypes = [p, i64, i64, i32, p, p, p, i32]
    lib.tt_column_sums_mt.restype = None
    lib.tt_softmax_causal_mt.argtypes = [p, i64, i64, i32, p, p, i32]
    lib.tt_softmax_backward_mt.argtypes = [p, p, i64, i64, i64, flt, p, i32]
    lib.tt_ln_forward_mt.argtypes = [p, i64, i64, i64, p, p, dbl, p, p, p, i32]
    lib.tt_ln_backward_mt.argtypes = [p, p, p, p, i64, i64, i64, p, p, i32]
    for name in ("tt_softmax_causal_mt", "tt_softmax_backward_mt", "tt_ln_forward_mt", "tt_ln_backward_mt"):
        getattr(lib, name).restype = i32


def usable(t: torch.Tensor, fuse: bool) -> bool:
    """Whether a fused engine (``fuse``) runs ``t``'s chain here: a float32 CPU tensor and
    the C kernels built and self-tested."""
    return fuse and t.dtype == F32 and t.device.type == "cpu" and native.ready()


def _const(name: str) -> torch.Tensor:
    if name not in _consts:
        from .repro_ops import _EXP_COEFFS
        from .repro_special import _ERF_TABLE

        _consts["exp"] = torch.tensor(_EXP_COEFFS, dtype=F64)
        _consts["erf"] = _ERF_TABLE.contiguous()
    return _consts[name]


def _lib():
    return native._state["lib"]


def _width(n: int) -> int:
    """The power of two ``repro_ops.tree_sum`` pads a row of ``n`` to."""
    from .repro_ops import ceil_log2

    return 1 << ceil_log2(n)


def _check(status: int) -> None:
    if status:
        raise MemoryError("a C chain found no scratch memory")


def gelu_slope(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(gelu_forward(x), slope)``: the float64 ``Phi(x) + x * phi(x))`` that
    ``gelu_backward`` multiplies the gradient by, kept so the backward is one product."""
    from .ops.elementwise import _INV_SQRT2, _INV_SQRT_2PI
    from .repro_special import _ERF_DEGREE

    x = x.contiguous()
    out, slope = torch.empty_like(x), torch.empty(x.shape, dtype=F64)
    table, coeffs = _const("erf"), _const("exp")
    _lib().tt_gelu_slope_mt(x.data_ptr(), x.numel(), table.data_ptr(), _ERF_DEGREE, coeffs.data_ptr(), _INV_SQRT2,
                            _INV_SQRT_2PI, out.data_ptr(), slope.data_ptr(), torch.get_num_threads())
    return out, slope


def times_slope(g: torch.Tensor, slope: torch.Tensor) -> torch.Tensor:
    """float32 ``g * slope``: ``gelu_backward(x, g)`` from :func:`gelu_slope`'s slope."""
    g = g.contiguous()
    out = torch.empty_like(g)
    _lib().tt_times_slope_mt(g.data_ptr(), slope.data_ptr(), g.numel(), out.data_ptr(), torch.get_num_threads())
    return out


def softmax_causal(s: torch.Tensor) -> torch.Tensor:
    """``attention.softmax_causal`` of (N, T, T) scores."""
    from .repro_ops import EXACT_BITS, ceil_log2

    s = s.contiguous()
    n, t, _ = s.shape
    out = torch.empty_like(s)
    coeffs, k = _const("exp"), EXACT_BITS - ceil_log2(t)
    _check(_lib().tt_softmax_causal_mt(s.data_ptr(), n * t, t, k, coeffs.data_ptr(), out.data_ptr(),
                                       torch.get_num_threads()))
    return out


def softmax_backward(p: torch.Tensor, dp: torch.Tensor, scale: float) -> torch.Tensor:
    """``attention.softmax_backward`` (``scale`` a float32 value)."""
    p, dp = p.contiguous(), dp.contiguous()
    t = p.shape[-1]
    rows = p.numel() // t
    width = _width(t)
    out = torch.empty_like(p)
    _check(_lib().tt_softmax_backward_mt(p.data_ptr(), dp.data_ptr(), rows, t, width, scale, out.data_ptr(),
                                         torch.get_num_threads()))
    return out


def quantize_batched(x: torch.Tensor, dim: int, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``attention._quantized`` of a (N, R, C) float32 tensor along ``dim`` (-1: one scale
    per row, -2: one per column): float64 integers and float32 scales (N, R, 1) or (N, 1, C).
    A transposed view is quantised as its base, the other way, and read transposed."""
    along_rows = dim in (-1, 2)
    if not x.is_contiguous() and x.transpose(1, 2).is_contiguous():
        q, down = quantize_batched(x.transpose(1, 2), -2 if along_rows else -1, bits)
        return q.transpose(1, 2), down.transpose(1, 2)
    x = x.contiguous()
    n, r, c = x.shape
    q = torch.empty((n, r, c), dtype=F64)
    down = torch.empty((n, r, 1) if along_rows else (n, 1, c), dtype=F32)
    if _lib().tt_quantize_batched(x.data_ptr(), 0, n, r, c, 1 if along_rows else 0, bits, q.data_ptr(),
                                  down.data_ptr()):
        raise MemoryError("tt_quantize_batched: no scratch memory")
    return q, down


def finish_batched(s: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor) -> torch.Tensor:
    """float32 ``((s + 0) * sa) * sb`` of float64 sums (N, M, P) with scales (N, M, 1), (N, 1, P)."""
    s = s.contiguous()
    n, m, p = s.shape
    sa, sb = sa.to(F32).contiguous(), sb.to(F32).contiguous()
    out = torch.empty((n, m, p), dtype=F32)
    _lib().tt_finish_batched(s.data_ptr(), 0, n, m, p, sa.data_ptr(), sb.data_ptr(), out.data_ptr())
    return out


def ln_forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float):
    """``elementwise.ln_forward`` of (rows, n): ``(y, xhat, rstd)``."""
    x, weight, bias = x.contiguous(), weight.to(F32).contiguous(), bias.to(F32).contiguous()
    rows, n = x.shape
    y, xhat, rstd = torch.empty_like(x), torch.empty((rows, n), dtype=F64), torch.empty(rows, dtype=F64)
    _check(_lib().tt_ln_forward_mt(x.data_ptr(), rows, n, _width(n), weight.data_ptr(), bias.data_ptr(), float(eps),
                                   y.data_ptr(), xhat.data_ptr(), rstd.data_ptr(), torch.get_num_threads()))
    return y, xhat, rstd


def ln_backward(g: torch.Tensor, xhat: torch.Tensor, rstd: torch.Tensor, weight: torch.Tensor):
    """``elementwise.ln_backward``: ``(dx, g * xhat)``."""
    g, xhat, rstd, weight = g.contiguous(), xhat.contiguous(), rstd.contiguous(), weight.to(F32).contiguous()
    rows, n = g.shape
    dx, gx = torch.empty_like(g), torch.empty_like(g)
    _check(_lib().tt_ln_backward_mt(g.data_ptr(), xhat.data_ptr(), rstd.data_ptr(), weight.data_ptr(), rows, n,
                                    _width(n), dx.data_ptr(), gx.data_ptr(), torch.get_num_threads()))
    return dx, gx


def column_sums(v: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """What ``GradBook.columns`` takes of a batch in one piece: float64 column sums of
    ``round(v * up)`` and the scales ``down``, ``(up, down)`` the power scales of the
    column maxima of ``|v|`` at ``bits``."""
    v = v.contiguous()
    rows, cols = v.shape
    sums, down, scratch = torch.empty(cols, dtype=F64), torch.empty(cols, dtype=F64), torch.empty(cols, dtype=F32)
    _lib().tt_column_sums_mt(v.data_ptr(), rows, cols, bits, scratch.data_ptr(), sums.data_ptr(), down.data_ptr(),
                             torch.get_num_threads())
    return sums, down


#: intgemm_fused kernel names served here.
KERNELS = {"softmax_causal": softmax_causal, "softmax_backward": softmax_backward, "ln_forward": ln_forward,
           "ln_backward": ln_backward}


def self_test(gen: torch.Generator, same) -> str | None:
    """The first chain whose bits differ from its torch twin, or None (``same``: native's
    bit-for-bit comparison)."""
    from .ops import attention, elementwise

    special = torch.tensor([0.0, -0.0, math.nan, math.inf, -math.inf, 6.0, -6.0, 5.97, 1e-42, -3.4e38, 3.4e38,
                            0.03125, -0.09375, 40.0, -40.0])
    x = torch.cat([torch.randn(300, generator=gen) * 3, special])
    g = torch.randn(x.numel(), generator=gen)
    g[:3] = torch.tensor([-0.0, math.inf, math.nan])
    y, slope = gelu_slope(x)
    if not (same(y, elementwise.gelu_forward(x)) and same(times_slope(g, slope), elementwise.gelu_backward(x, g))):
        return "tt_gelu_slope differs"
    for t in (1, 5, 8, 13):
        s = torch.randn(3, t, t, generator=gen) * 40
        s[0, 0, 0] = -1e4  # exp's floor
        if t > 1:
            s[1, 1, :2] = math.nan
            s[2, t - 1] = -math.inf  # a row of -inf: NaN throughout
            s[0, 1, 1] = math.inf
        if not same(softmax_causal(s), attention.softmax_causal(s)):
            return f"tt_softmax_causal differs (T {t})"
        p = attention.softmax_causal(torch.randn(3, t, t, generator=gen))
        dp = torch.randn(3, t, t, generator=gen)
        dp[0, 0, 0] = -0.0
        if not same(softmax_backward(p, dp, 0.125), attention.softmax_backward(p, dp, 0.125)):
            return f"tt_softmax_backward differs (T {t})"
    a = torch.randn(4, 6, 5, generator=gen) * torch.logspace(-20, 20, 5)
    a[0, 0, :3] = torch.tensor([-0.0, math.nan, 1e-42])
    for dim in (-1, -2):
        for src in (a, a.transpose(1, 2).contiguous().transpose(1, 2)):
            q, down = quantize_batched(src, dim, 13)
            want_q, want_down = attention._quantized(src, dim, 13)
            if not (same(q, want_q) and same(down.to(F64), want_down)):
                return f"tt_quantize (batched, dim {dim}) differs"
    rows = torch.randn(9, 24, generator=gen) * torch.logspace(-3, 3, 24)
    rows[0, :3], rows[1] = torch.tensor([-0.0, math.nan, 1e-42]), 0.0
    gain, shift = torch.linspace(-2, 2, 24), torch.linspace(1, -1, 24)
    for n in (24, 7, 1):
        got, want = ln_forward(rows[:, :n], gain[:n], shift[:n], 1e-5), elementwise.ln_forward(
            rows[:, :n], gain[:n], shift[:n], 1e-5)
        if not all(same(a, b) for a, b in zip(got, want, strict=True)):
            return f"tt_ln_forward differs (n {n})"
        g = torch.randn(9, n, generator=gen)
        g[0, 0] = -0.0
        got, want = ln_backward(g, want[1], want[2], gain[:n]), elementwise.ln_backward(g, want[1], want[2], gain[:n])
        if not all(same(a, b) for a, b in zip(got, want, strict=True)):
            return f"tt_ln_backward differs (n {n})"
    from .repro_ops import power_scales

    v = torch.randn(40, 13, generator=gen) * torch.logspace(-8, 8, 13)
    v[0, :3], v[:, 4], v[:, 5] = torch.tensor([-0.0, 1e-42, math.nan]), -0.0, 0.0
    for bits in (40, 30):
        up, down = power_scales(v.abs().amax(0), bits)
        if not all(same(a, b) for a, b in zip(column_sums(v, bits), (torch.round(v.to(F64) * up).sum(0), down),
                                              strict=True)):
            return f"tt_column_sums differs (bits {bits})"
    s = torch.randn(4, 6, 7, generator=gen, dtype=F64) * 2.0 ** 30
    s[0, 0, :2] = torch.tensor([-0.0, 0.0], dtype=F64)
    sa = torch.ldexp(torch.ones(4, 6, 1), torch.randint(-40, 0, (4, 6, 1), generator=gen))
    sb = torch.ldexp(torch.ones(4, 1, 7), torch.randint(-40, 0, (4, 1, 7), generator=gen))
    if not same(finish_batched(s, sa, sb), (s.add(0.0) * sa.to(F64) * sb.to(F64)).to(F32)):
        return "tt_finish_batched differs"
    return None
