"""The int8 route's quantising and combining as exact C kernels on CPUs (``plane_kernels.c``).

A fused engine on a CPU quantises straight to int8 planes, takes the column maxima of a
weight gradient, and combines the plane products (rounding once) in one C pass each, split
over torch's threads with OpenMP: what ``intgemm_fused``'s compiled kernels compute, bit for
bit, without their per-call guards and for tensors of any size. Attention's batched exact
products at 2 limbs are one call (``bmm_kernels.c``: the same integers, their exact sums as
int16 products, the same rounding); at 3 limbs the kernels here around one ``_int_mm`` per
sequence and plane. Built into :mod:`native`'s library and self-tested with it against the
torch twins and the plane route.
"""

from __future__ import annotations

import ctypes
import math

import torch

from . import native

F32, I8, I32 = torch.float32, torch.int8, torch.int32
#: Operands from this many elements quantise straight to planes (smaller ones to float64
#: integers, for the float64 route that takes the small products).
MIN_ELEMENTS = 1 << 16


def declare(lib: ctypes.CDLL) -> None:
    """The C signatures (called by :func:`native._load`)."""
    p, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    lib.tt_quantize_planes.argtypes = [p, i64, i64, i64, i32, i32, i32, p, p, p, p, i32]
    lib.tt_quantize_planes.restype = i32
    lib.tt_column_maxima.argtypes = [p, i64, i64, p, p, p, i32]
    lib.tt_column_maxima.restype = None
    lib.tt_combine.argtypes = [p, i64, i32, i64, i64, p, p, p, p, i32]
    lib.tt_combine.restype = None
    lib.tt_bmm_exact2.argtypes = [p, i64, i64, i64, p, i64, i64, i64, i64, i64, i64, i64, i32, p, i32, i32]
    lib.tt_bmm_exact2.restype = i32
    lib.tt_bmm_vector_path.argtypes = []
    lib.tt_bmm_vector_path.restype = i32


def usable(t: torch.Tensor, fuse: bool, elements: int = MIN_ELEMENTS) -> bool:
    """Whether a fused engine (``fuse``) takes ``t`` (float32, CPU, ``elements`` or more)
    through these kernels: the C kernels built and self-tested."""
    return (fuse and t.dtype == F32 and t.device.type == "cpu" and t.numel() >= elements
            and native.ready())


def _ptr(t: torch.Tensor | None):
    return None if t is None else t.data_ptr()


def _f32(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.to(F32).contiguous()


def quantize_planes(x: torch.Tensor, dim: int, bits: int, limbs: int, amax: torch.Tensor | None = None,
                    rscale: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """int8 planes and float32 scales of contiguous float32 ``x`` (rows, cols), or a batch
    (nb, rows, cols), quantised per row (``dim`` 1: planes (…, rows, P, cols), scales
    (…, rows)) or per column (``dim`` 0: planes (…, P, rows, cols), scales (…, cols)), with
    the given maxima or their own; ``rscale`` multiplies each row first (powers of two)."""
    x = x.contiguous()
    rows, cols = x.shape[-2:]
    nb = x.numel() // max(1, rows * cols)
    count = limbs * (limbs + 1) // 2
    lead = tuple(x.shape[:-2])
    shape = lead + ((rows, count, cols) if dim == 1 else (count, rows, cols))
    planes = torch.empty(shape, dtype=I8)
    down = torch.empty(lead + ((rows,) if dim == 1 else (cols,)), dtype=F32)
    amax, rscale = _f32(amax), _f32(rscale)  # held until the call returns
    if native._state["lib"].tt_quantize_planes(x.data_ptr(), nb, rows, cols, dim, bits, limbs, _ptr(amax),
                                               _ptr(rscale), planes.data_ptr(), down.data_ptr(),
                                               torch.get_num_threads()):
        raise MemoryError("tt_quantize_planes: no scratch memory")
    return planes, down


def column_maxima(g: torch.Tensor, rscale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``intgemm_fused._column_maxima``: per column max ``|g * rscale[:, None]|`` and max ``|g|``."""
    g, rscale = g.contiguous(), _f32(rscale)
    rows, cols = g.shape
    scaled, plain = torch.empty(cols, dtype=F32), torch.empty(cols, dtype=F32)
    native._state["lib"].tt_column_maxima(g.data_ptr(), rows, cols, rscale.data_ptr(), scaled.data_ptr(),
                                          plain.data_ptr(), torch.get_num_threads())
    return scaled, plain


def combine(sums: torch.Tensor, limbs: int, rs: torch.Tensor | None, cs: torch.Tensor | None,
            bias: torch.Tensor | None = None) -> torch.Tensor:
    """float32 products from int32 plane products ``sums`` (…, P, m, n) (``intgemm_fused._combine``):
    row scales ``rs`` (…, m), column scales ``cs`` (…, n) (None: 1), then ``+ bias`` (n,)."""
    sums = sums.contiguous()
    m, n = sums.shape[-2:]
    lead = tuple(sums.shape[:-3])
    nb = sums.numel() // max(1, sums.shape[-3] * m * n)
    out = torch.empty(lead + (m, n), dtype=F32)
    rs, cs, bias = _f32(rs), _f32(cs), _f32(bias)
    native._state["lib"].tt_combine(sums.data_ptr(), nb, limbs, m, n, _ptr(rs), _ptr(cs), _ptr(bias),
                                    out.data_ptr(), torch.get_num_threads())
    return out


def operand(x: torch.Tensor, dim: int, bits: int, limbs: int, amax: torch.Tensor | None = None,
            rscale: torch.Tensor | None = None):
    """``intgemm.quantize`` of a 2-D ``x`` as planes: a left operand (``dim`` 1, planes
    (M, P, K)) or a right one (``dim`` 0, planes (P*K, N)); ``x = w.T`` (a weight in the
    forward) quantises ``w``'s rows and reads them transposed (no copy)."""
    from .intgemm import Operand

    count = limbs * (limbs + 1) // 2
    if dim == 0 and rscale is None and not x.is_contiguous() and x.T.is_contiguous():
        planes, down = quantize_planes(x.T, 1, bits, limbs, amax)
        return Operand(None, down, limbs, right=planes.view(x.shape[1], count * x.shape[0]).T)
    planes, down = quantize_planes(x, dim, bits, limbs, amax, rscale)
    if dim == 1:
        return Operand(None, down, limbs, left=planes)
    return Operand(None, down, limbs, right=planes.view(count * x.shape[0], x.shape[1]))


def plane_products(left: torch.Tensor, right: torch.Tensor, kernel=None) -> torch.Tensor:
    """int32 ``(nb, P, m, n)``: one int8 product per batch and plane of left planes
    (nb, P, m, k) and right planes (nb, P, k, n) (views in any layout ``_int_mm`` reads as
    they lie); ``kernel``: another int8 x int8 -> int32 product than ``torch._int_mm``."""
    nb, count, m, _ = left.shape
    out = torch.empty((nb, count, m, right.shape[-1]), dtype=I32)
    # the planes as views by unbind (one dispatch for all; indexing takes one per view)
    for lb, rb, ob in zip(left.unbind(0), right.unbind(0), out.unbind(0)):
        for a, b, o in zip(lb.unbind(0), rb.unbind(0), ob.unbind(0)):
            if kernel is None:
                torch._int_mm(a, b, out=o)
            else:
                o.copy_(kernel(a, b))
    return out


def _batched_side(x: torch.Tensor, left: bool, bits: int, limbs: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Planes (N, P, rows, cols) of a batched operand, viewed for the product, and its float32
    scales: per row for the ``left`` operand (N, M, K), per column for the right (N, K, P).
    A transposed view is quantised as its base, the other way, and read transposed."""
    flip = not x.is_contiguous() and x.transpose(1, 2).is_contiguous()
    base = x.transpose(1, 2) if flip else x.contiguous()
    along_rows = left != flip  # one scale per row of the base
    planes, down = quantize_planes(base, 1 if along_rows else 0, bits, limbs)
    if along_rows:
        planes = planes.transpose(1, 2)  # (N, P, rows, cols)
    return (planes.transpose(2, 3) if flip else planes), down


#: The longest contraction :func:`fused_bmm` takes (its sums and tt_combine's agree below),
#: and the widest integers (|q| <= 2**13: int16, 30 products summed in int32).
FUSED_MAX_K, FUSED_MAX_BITS = 1 << 16, 13


def fused_bmm(a: torch.Tensor, b: torch.Tensor, bits: int, portable: bool = False) -> torch.Tensor:
    """:func:`bmm_exact` at 2 limbs of float32 (N, M, K) @ (N, K, P) in any strides, quantising,
    products and rounding in one C call (``bmm_kernels.c``); ``portable``: without the
    vector path (the self-test's twin)."""
    nb, m, k = a.shape
    n = b.shape[-1]
    out = torch.empty((nb, m, n), dtype=F32)
    if native._state["lib"].tt_bmm_exact2(a.data_ptr(), *a.stride(), b.data_ptr(), *b.stride(), nb, m, k, n, bits,
                                          out.data_ptr(), int(portable), torch.get_num_threads()):
        raise MemoryError("tt_bmm_exact2: no scratch memory")
    return out


def bmm_exact(a: torch.Tensor, b: torch.Tensor, bits: int, limbs: int) -> torch.Tensor:
    """``attention.bmm_exact`` of (N, M, K) @ (N, K, P) by int8 plane products (at 2 limbs,
    the same integer sums and rounding in one C call)."""
    if limbs == 2 and bits <= FUSED_MAX_BITS and a.shape[-1] <= FUSED_MAX_K and b.dtype == F32:
        return fused_bmm(a, b, bits)
    left, sa = _batched_side(a, True, bits, limbs)
    right, sb = _batched_side(b, False, bits, limbs)
    return combine(plane_products(left, right), limbs, sa, sb)


def _sticky_amax(x: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.where(x.isnan().any(dim), torch.nan, x.abs().amax(dim))


def self_test(gen: torch.Generator, same) -> str | None:
    """The first plane kernel whose bits differ from its torch twin, or None (``same``:
    native's bit-for-bit comparison)."""
    from . import intgemm_fused
    from .intgemm import _quantize_with, pow2_scales
    from .intgemm_fused import planes_eager
    from .ops import attention

    x = torch.randn(19, 70, generator=gen) * torch.logspace(-20, 20, 70)
    x[0, :8] = torch.tensor([0.0, -0.0, 2.5, -3.5, 1e-42, -1e-44, 3.4e38, -3.4e38])
    x[1], x[2, 3], x[3, 5], x[4, 7] = -0.0, math.nan, math.inf, -math.inf
    rows = torch.ldexp(torch.ones(19), torch.arange(-9, 10))
    for limbs, bits in ((2, 13), (3, 20)):
        x[5, :29] = torch.arange(-14, 15) + 0.5  # ties; the clamp's top
        x[5, 0] = 2.0 ** bits - 1
        for dim in (0, 1):
            for scaled in ((False, True) if dim == 0 else (False,)):
                src = x * rows.unsqueeze(1) if scaled else x
                for given in (None, src.abs().amax(dim) * 2):
                    # NaN sticky, as the C and compiled kernels keep it (torch's own reduction
                    # drops a NaN on some shapes; a NaN's row or column is NaN either way)
                    amax = _sticky_amax(src, dim) if given is None else given
                    up, down = pow2_scales(amax, bits)
                    want = planes_eager(_quantize_with(src, up.unsqueeze(1) if dim == 1 else up, bits), limbs, dim)
                    got, got_down = quantize_planes(x, dim, bits, limbs, given, rows if scaled else None)
                    if not (same(got_down, down) and torch.equal(got, want)):
                        return f"tt_quantize_planes differs (limbs {limbs}, dim {dim}, scaled {scaled})"
        if not all(same(a, b) for a, b in zip(column_maxima(x, rows),
                                               (_sticky_amax(x * rows.unsqueeze(1), 0), _sticky_amax(x, 0)))):
            return "tt_column_maxima differs"
        count = limbs * (limbs + 1) // 2
        span = 1 << (7 if limbs == 2 else 5)
        sums = torch.randint(-span * 1000, span * 1000, (2, count, 7, 9), generator=gen, dtype=I32)
        rs, cs = (torch.ldexp(torch.ones(2, k), torch.randint(-60, -20, (2, k), generator=gen)) for k in (7, 9))
        rs[0, 0], bias = math.nan, torch.randn(9, generator=gen)
        for b in range(2):
            for got, want in ((combine(sums[b:b + 1], limbs, rs[b:b + 1], cs[b:b + 1])[0],
                               intgemm_fused._combine(list(sums[b]), rs[b].double(), cs[b].double())),
                              (combine(sums[b:b + 1], limbs, None, cs[b:b + 1], bias)[0],
                               intgemm_fused._combine_bias(list(sums[b]), torch.ones(7, dtype=torch.float64),
                                                           cs[b].double(), bias))):
                if not same(got, want):
                    return f"tt_combine differs (limbs {limbs})"
    failed = _fused_products_differ(gen, same)
    if failed:
        return failed
    a = torch.randn(3, 9, 17, generator=gen) * torch.logspace(-8, 8, 17)
    a[0, 0, :3] = torch.tensor([-0.0, math.nan, 1e-42])
    b = torch.randn(3, 17, 5, generator=gen)
    for left in (a, a.transpose(1, 2).contiguous().transpose(1, 2)):
        for right in (b, b.transpose(1, 2).contiguous().transpose(1, 2)):
            if not same(bmm_exact(left, right, 13, 2), attention.bmm_exact(left, right, 2)):
                return "int8 bmm_exact differs from the float64 route"
    return None


def _fused_products_differ(gen: torch.Generator, same) -> str | None:
    """Whether ``tt_bmm_exact2`` (vector and portable paths) differs from the plane route
    (``tt_quantize_planes``, the plane products, ``tt_combine``) on odd shapes, strided
    views, the clamp's extremes, NaN and inf scales."""
    paths = (False, True) if native._state["lib"].tt_bmm_vector_path() else (True,)
    for nb, m, k, n in ((2, 5, 33, 37), (1, 1, 1, 1), (3, 9, 64, 70)):
        a = torch.randn(nb, m, k, generator=gen) * torch.logspace(-8, 8, k)
        b = torch.randn(nb, k, n, generator=gen)
        a[0, 0, :] = -1.99995  # every value at the clamp's bottom (-2**13): the largest sums
        b[0, :, 0] = -1.99995
        if m > 1:
            a[0, 1, 0], b[-1, 1, -1] = math.nan, math.inf
        causal = a * torch.ones(m, k).tril()  # zero runs: skipped k pairs
        for left_in in (a, a.transpose(1, 2).contiguous().transpose(1, 2), causal):
            for right_in in (b, b.transpose(1, 2).contiguous().transpose(1, 2)):
                left, sa = _batched_side(left_in, True, 13, 2)
                right, sb = _batched_side(right_in, False, 13, 2)
                want = combine(plane_products(left, right), 2, sa, sb)
                for portable in paths:
                    if not same(fused_bmm(left_in, right_in, 13, portable), want):
                        return f"tt_bmm_exact2 differs ({nb}x{m}x{k}x{n}, portable {portable})"
    return None
