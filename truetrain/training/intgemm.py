"""The integer GEMM engine of repro mode: exact products of quantised operands.

Every matrix product of a repro training step is ``A @ B`` where ``A`` (M, K) has been
quantised per row and ``B`` (K, N) per column (:func:`quantize`) to integers ``q`` with
``-2**b <= q < 2**b`` (``b = 7 * limbs - 1``: 13 bits for 2 limbs, 20 for 3) and one
power-of-two scale per row or column. The engine computes the integer sums ``S = qA @ qB``
**exactly**, so any blocking, thread count, batch split or device gives the same ``S``, and
then ``float32(float64(S) * scaleA[m] * scaleB[n])``: the scalings are exact, the one
rounding is IEEE round-to-nearest on every device.

Two routes compute the same ``S`` (:class:`GemmEngine`):

* ``int8``: each ``q`` is split into ``limbs`` balanced base-128 digits (each in [-64, 64],
  so that the sum of two digits is an int8 too), and the products are taken Karatsuba's way:
  one ``torch._int_mm`` per digit (``A_i B_i``) and one per pair of digits (``(A_i + A_j)
  (B_i + B_j)``, from which ``A_i B_j + A_j B_i`` follows by subtraction): 3 int8 products
  for 2 limbs instead of 4, 6 for 3 instead of 9. Each is exact in int32 while ``K * 2**14
  < 2**31`` (K is split in chunks of 2**16 beyond that); they are combined in int64.
* ``float64``: the integers as float64 through the ordinary BLAS, exact while
  ``K * 2**(2b) <= 2**53`` (K split in chunks beyond that, summed in int64). This is the
  fallback when the int8 kernel fails its self-test, and serves small products, where
  fewer kernel launches win; it gives the same bits, only at another speed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import math

import torch

from ..errors import ReproducibilityError
from ..numerics.gemm_element import LIMB_BITS, LIMB_COUNTS, MIN_EXPONENT_MARGIN
from . import intgemm_fused, native, native_planes
from .intgemm_fused import combine_exact, plane_count, planes_eager

F32, F64, I8, I32, I64 = torch.float32, torch.float64, torch.int8, torch.int32, torch.int64

DEFAULT_LIMBS = 2
#: Longest contraction one ``_int_mm`` call sums: K * 2**14 < 2**31 (plane values in [-128, 127]).
INT8_K_CHUNK = 1 << 16
#: Products with fewer multiply-adds than this run on the float64 route (same bits): below
#: it one BLAS call beats the int8 route's quantise-split-combine passes on a CPU (measured
#: 2026-12-05: 16 Mi multiply-adds 2.1 ms float64 vs 4.4 ms int8; 32 Mi 3.5 ms vs 2.3 ms).
SMALL_PRODUCT = 1 << 25
_EXACT = 1 << 53
# LIMB_BITS, LIMB_COUNTS (2: 13-bit operands, 3: 20-bit) and MIN_EXPONENT_MARGIN (the float32
# exponent field of the largest magnitude is clamped at least this far above the operand
# bits, so every scale is a normal float32; rows whose largest magnitude is below
# 2**(bits - 100) quantise coarsely, the same on every device) come from the reference,
# truetrain/numerics/gemm_element.py.


def operand_bits(limbs: int) -> int:
    """Significant bits of a quantised operand with ``limbs`` int8 limbs."""
    if limbs not in LIMB_COUNTS:
        raise ReproducibilityError(f"limbs must be one of {LIMB_COUNTS}, got {limbs!r}")
    return LIMB_BITS * limbs - 1


def pow2_scales(amax: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(up, down)`` float32 powers of two for non-negative float32 maxima ``amax``.

    With ``E`` the biased float32 exponent of ``amax`` (read from its bits, exact),
    ``|x| <= amax`` implies ``|x * up| < 2**bits``; ``down = 1 / up``. Both are built from
    bits, with no division or ``log``. A row or column holding inf or NaN (``E`` = 255)
    gets ``down = NaN``, so its products come out NaN on every route and device and reach
    the loss and the checkpoint, which the trainer checks (no sync per product here).
    """
    field = (amax.to(F32).view(I32) >> 23) & 0xFF  # a NaN maximum may carry the sign bit
    e = field.clamp(min=bits + MIN_EXPONENT_MARGIN)
    up = ((bits + 253) - e) << 23
    down = ((e - (bits - 1)) << 23).view(F32)
    down = torch.where(field == 255, torch.full_like(down, math.nan), down)
    return up.view(F32), down


def _quantize_with(x: torch.Tensor, up: torch.Tensor, bits: int) -> torch.Tensor:
    """round(x * up) in [-2**bits, 2**bits - 1] (a NaN stays NaN; its scale is NaN too)."""
    return torch.mul(x, up).round_().clamp_(min=-float(1 << bits), max=float((1 << bits) - 1))


class Operand:
    """A quantised matrix: float32 integers ``q`` and float32 power-of-two ``scale`` per
    row (a left operand) or per column (a right operand, or None for unit scales);
    ``x ~= q * scale``.

    Its int8 planes (:func:`intgemm_fused.planes_stacked`: the digits, then their pair sums)
    are computed on first use, in the layout each side of a product wants: as a left operand
    ``(M, P, K)``, as a right operand ``(P*K, N)`` (plane ``p`` in rows ``p*K`` to
    ``(p+1)*K``). An operand used on both sides (the forward's input rows, reused by the
    weight gradient) makes the second from the first. The fused route quantises straight to
    planes; ``q`` is then rebuilt from them (exactly) only if a route asks for it.
    """

    __slots__ = ("_q", "scale", "limbs", "_left", "_right", "_q64")

    def __init__(self, q: torch.Tensor | None, scale: torch.Tensor | None, limbs: int,
                 left: torch.Tensor | None = None, right: torch.Tensor | None = None,
                 q64: torch.Tensor | None = None):
        if q is None and q64 is None and left is None and right is None:
            raise ReproducibilityError("an operand needs its integers or its planes")
        self._q, self.scale, self.limbs, self._left, self._right = q, scale, limbs, left, right
        self._q64 = q64

    @property
    def has_q64(self) -> bool:
        """Whether the float64 integers are at hand (no conversion from planes)."""
        return self._q64 is not None

    @property
    def q64(self) -> torch.Tensor:
        """The integers as float64 (kept when quantising made them, else converted anew)."""
        return self._q64 if self._q64 is not None else self.q.to(F64)

    @property
    def q(self) -> torch.Tensor:
        if self._q is None and self._q64 is not None:
            self._q = self._q64.to(F32)
        elif self._q is None and self._left is not None:
            self._q = join_planes(self._left, self.limbs, 1)
        elif self._q is None:
            planes = self._right.reshape(plane_count(self.limbs), -1, self._right.shape[1])
            self._q = join_planes(planes, self.limbs, 0)
        return self._q

    @property
    def shape(self) -> tuple[int, int]:
        if self._q is not None:
            return tuple(self._q.shape)
        if self._q64 is not None:
            return tuple(self._q64.shape)
        if self._left is not None:
            return (self._left.shape[0], self._left.shape[2])
        return (self._right.shape[0] // plane_count(self.limbs), self._right.shape[1])

    def left_planes(self, fuse: bool = False) -> torch.Tensor:
        if self._left is None:
            q = self.q
            self._left = intgemm_fused.run("planes", fuse, q, self.limbs, 1)
        return self._left

    def right_planes(self, fuse: bool = False) -> torch.Tensor:
        if self._right is None:
            k, n = self.shape
            planes = plane_count(self.limbs)
            if self._left is not None:
                self._right = self._left.permute(1, 0, 2).reshape(planes * k, n)
            else:
                self._right = intgemm_fused.run("planes", fuse, self.q, self.limbs, 0).view(planes * k, n)
        return self._right

    def unscaled(self) -> "Operand":
        """The same integers with unit scale (shares the planes)."""
        return Operand(self._q, None, self.limbs, self._left, self._right, self._q64)

    def transposed(self) -> "Operand":
        """The transposed integers with unit scale, as a left operand whose planes are a
        view of this operand's left planes: column-major matrices the int8 kernel reads as
        they lie, so nothing is copied."""
        left = None if self._left is None else self._left.permute(2, 1, 0)
        q = None if self._q is None else self._q.T
        q64 = None if self._q64 is None else self._q64.T
        return Operand(q, None, self.limbs, left, q64=q64)


def join_planes(planes: torch.Tensor, limbs: int, dim: int) -> torch.Tensor:
    """float32 integers of int8 planes stacked along ``dim`` (the digits first, most
    significant first): exact."""
    q = planes.select(dim, 0).to(F32)
    for i in range(1, limbs):
        q = torch.add(planes.select(dim, i).to(F32), q, alpha=128.0)
    return q


def split_planes(q: torch.Tensor, limbs: int) -> torch.Tensor:
    """int8 planes ``(P, *q.shape)`` of float32 integers (see
    :func:`intgemm_fused.planes_stacked`)."""
    return planes_eager(q, limbs, 0)


def quantize(x: torch.Tensor, dim: int, limbs: int, amax: torch.Tensor | None = None,
             fuse: bool = False) -> Operand:
    """Quantise float32 ``x`` (2-D) per row (``dim=1``: one scale per row, a left operand)
    or per column (``dim=0``: one scale per column, a right operand).

    ``amax`` (the largest magnitude of each row or column) may be given when ``x`` is one
    slice of a larger batch, so that every slice uses the whole batch's scales. ``fuse``
    runs the elementwise passes as compiled kernels (same bits).
    """
    bits = operand_bits(limbs)
    if x.dim() == 2 and native_planes.usable(x, fuse):  # straight to planes: one C pass
        return native_planes.operand(x, dim, bits, limbs, amax)
    if x.dim() == 2 and native.small(x, fuse):
        q64, down = native.quantize(x, dim, bits, amax)  # small: one C call
        return Operand(None, down, limbs, q64=q64)
    fuse = intgemm_fused.worth_it(fuse, x.numel(), x.device)
    if amax is None:
        amax = intgemm_fused.call("amax", x, dim) if fuse else x.abs().amax(dim=dim)
    up, down = pow2_scales(amax, bits)
    up = up.unsqueeze(1) if dim == 1 else up
    span, planes = float(1 << bits), plane_count(limbs)
    if fuse and dim == 1:
        return Operand(None, down, limbs, left=intgemm_fused.call("quantize_left", x, up, span, limbs))
    if fuse and x.dim() == 2 and not x.is_contiguous() and x.T.is_contiguous():
        # x = w.T (a weight in the forward): quantise w's rows to left planes and read the
        # right operand as their column-major transpose (no copy)
        rows = intgemm_fused.call("quantize_left", x.T, up.unsqueeze(1), span, limbs)
        return Operand(None, down, limbs, right=rows.view(x.shape[1], planes * x.shape[0]).T)
    if fuse:
        right = intgemm_fused.call("quantize_right", x, up, span, limbs)
        return Operand(None, down, limbs, right=right.view(planes * x.shape[0], x.shape[1]))
    return Operand(_quantize_with(x, up, bits), down, limbs)


def quantize_scaled_columns(g: torch.Tensor, rows: torch.Tensor, amax: torch.Tensor, limbs: int,
                            fuse: bool = False) -> Operand:
    """``g * rows[:, None]`` (``rows``: float32 powers of two) quantised per column with the
    given maxima, as a right operand; fused, the product is never stored."""
    if native_planes.usable(g, fuse):
        return native_planes.operand(g, 0, operand_bits(limbs), limbs, amax, rscale=rows)
    if not intgemm_fused.worth_it(fuse, g.numel(), g.device):
        return quantize(torch.mul(g, rows.unsqueeze(1)), 0, limbs, amax, fuse)
    bits = operand_bits(limbs)
    up, down = pow2_scales(amax, bits)
    right = intgemm_fused.call("quantize_right_scaled", g, rows, up, float(1 << bits), limbs)
    return Operand(None, down, limbs, right=right.view(plane_count(limbs) * g.shape[0], g.shape[1]))


def pad_for_cuda(a: torch.Tensor, b: torch.Tensor):
    """``(a, b)`` zero-padded to CUDA ``_int_mm``'s rules (M > 16, K and N multiples of 8);
    zero rows and columns add nothing to the integer sums."""
    m, k = a.shape
    n = b.shape[1]
    pm, pk, pn = max(0, 17 - m), (-k) % 8, (-n) % 8
    if pm or pk:
        a = torch.nn.functional.pad(a, (0, pk, 0, pm))
    if pk or pn:
        b = torch.nn.functional.pad(b, (0, pn, 0, pk))
    return a.contiguous(), b.contiguous()


def _int_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """int8 x int8 -> int32 on the operands' device (padded on CUDA, then cut back)."""
    if a.device.type != "cuda":
        return torch._int_mm(a, b)
    m, n = a.shape[0], b.shape[1]
    out = torch._int_mm(*pad_for_cuda(a, b))
    return out[:m, :n]


@dataclass(frozen=True)
class GemmEngine:
    """Exact integer products on one device by one route (``int8`` or ``float64``).

    ``kernel`` is the int8 x int8 -> int32 product; tests pass a deliberately faulty one
    to see the self-test refuse it. ``fuse`` compiles the limb splitting and the combine
    epilogue into one kernel each (``intgemm_fused``; same bits, fewer trips to memory).
    """

    device: str = "cpu"
    route: str = "int8"
    small_product: int = SMALL_PRODUCT
    kernel: object = field(default=_int_mm, compare=False)
    fuse: bool = False

    def exact_sum(self, left: Operand, right: Operand) -> "ExactSum":
        """``S = qL @ qR`` exactly, unscaled (see :class:`ExactSum`)."""
        m, k = left.shape
        n = right.shape[1]
        if right.shape[0] != k or left.limbs != right.limbs:
            raise ReproducibilityError(f"shapes {left.shape} @ {right.shape}")
        check_contraction(k, left.limbs)
        if self._float64(m, k, n):
            return _float64_sum(left.q64, right.q64, left.limbs)
        return self._combine(self._planes(left, right), k, left.limbs)

    def _float64(self, m: int, k: int, n: int) -> bool:
        return self.route == "float64" or m * k * n < self.small_product

    def _planes(self, left: Operand, right: Operand) -> list[torch.Tensor]:
        """One int8 product per plane (:func:`intgemm_fused.combine_exact` puts them
        together): int32, or int64 when K had to be split. A transposed operand's planes
        are column-major views; the kernel takes them as they lie."""
        a, r = left.left_planes(self.fuse), right.right_planes(self.fuse)
        planes, k = a.shape[1], a.shape[2]
        if k <= INT8_K_CHUNK:
            return [self.kernel(a[:, p], r[p * k:(p + 1) * k]) for p in range(planes)]
        sums = []
        for p in range(planes):  # K too long for one int32 sum: chunks, added in int64
            total = None
            for lo in range(0, k, INT8_K_CHUNK):
                hi = min(k, lo + INT8_K_CHUNK)
                part = self.kernel(a[:, p, lo:hi], r[p * k + lo:p * k + hi]).to(I64)
                total = part if total is None else total.add_(part)
            sums.append(total)
        return sums

    @staticmethod
    def _combine(sums: list[torch.Tensor], k: int, limbs: int) -> "ExactSum":
        """``S`` in int64, as float64 when every figure fits 53 bits (|S| <= K * 2**(2b))."""
        acc = combine_exact(sums)
        if (k << (2 * operand_bits(limbs))) < _EXACT:
            return ExactSum(acc.to(F64), 0)
        return ExactSum(acc, 0)

    def matmul(self, left: Operand, right: Operand, bias: torch.Tensor | None = None) -> torch.Tensor:
        """float32 ``(qL * sL) @ (qR * sR)`` with the one rounding at the end (then ``+ bias``
        in float32, when given: a second rounding, the same on every route)."""
        m, k = left.shape
        n = right.shape[1]
        limbs = left.limbs
        if (self.fuse and self.device == "cpu" and not self._float64(m, k, n) and right.shape[0] == k
                and k <= INT8_K_CHUNK and (k << (2 * operand_bits(limbs))) < _EXACT and native.ready()):
            a, r = left.left_planes(self.fuse), right.right_planes(self.fuse)
            sums = native_planes.plane_products(a.permute(1, 0, 2).unsqueeze(0),
                                                r.view(-1, k, n).unsqueeze(0),
                                                None if self.kernel is _int_mm else self.kernel)
            return native_planes.combine(sums, limbs, left.scale, right.scale, bias)[0]
        if (intgemm_fused.worth_it(self.fuse, m * n, self.device)
                and not self._float64(m, k, n) and right.shape[0] == k
                and k <= INT8_K_CHUNK and (k << (2 * operand_bits(limbs))) < _EXACT):
            sums = self._planes(left, right)
            rows = _scale64(left.scale, m, sums[0].device, 1.0)
            cols = _scale64(right.scale, n, sums[0].device, 1.0)
            if bias is None:
                return intgemm_fused.call("combine", sums, rows, cols)
            return intgemm_fused.call("combine_bias", sums, rows, cols, bias)
        out = self.exact_sum(left, right).finish(left.scale, right.scale, self.fuse)
        return out if bias is None else out + bias


def _scale64(scale: torch.Tensor | None, size: int, device, factor: float) -> torch.Tensor:
    if scale is None:
        return torch.full((size,), factor, dtype=F64, device=device)
    return scale.to(F64) * factor


def max_contraction(limbs: int) -> int:
    """Longest sum of products int64 holds with room: |S| <= k * 2**(2b) < 2**62."""
    return ((1 << 62) >> (2 * operand_bits(limbs))) - 1


def check_contraction(k: int, limbs: int) -> None:
    """Refuse a sum of ``k`` products longer than :func:`max_contraction`."""
    if k > max_contraction(limbs):
        raise ReproducibilityError(
            f"a sum over {k} rows is too long for exact {limbs}-limb products (at most "
            f"{max_contraction(limbs)}); use fewer limbs or a smaller batch")


def _float64_sum(a64: torch.Tensor, b64: torch.Tensor, limbs: int) -> "ExactSum":
    """The integers (as float64) through the BLAS: exact in chunks of K (int64 between)."""
    k = a64.shape[1]
    chunk = max(1, _EXACT >> (2 * operand_bits(limbs)))
    if k <= chunk:  # +0.0: a zero sum is +0.0 whatever sign the BLAS gives it
        return ExactSum(torch.mm(a64, b64).add_(0.0), 0)
    total = None
    for lo in range(0, k, chunk):
        part = torch.mm(a64[:, lo:lo + chunk], b64[lo:lo + chunk]).to(I64)
        total = part if total is None else total.add_(part)
    return ExactSum(total, 0)


@dataclass
class ExactSum:
    """Exact integer sums ``S = value * 2**shift``: ``value`` float64 when every figure
    fits 53 bits, else int64 (``shift`` 0).

    Sums of several slices (micro-batches that share their scales) add exactly with
    :meth:`add`; :meth:`finish` scales and rounds once.
    """

    value: torch.Tensor
    shift: int

    def exact(self) -> torch.Tensor:
        """``S`` as int64."""
        if self.value.dtype == I64:
            return self.value
        return torch.mul(self.value, 2.0 ** self.shift).to(I64)

    def add(self, other: "ExactSum") -> "ExactSum":
        """Add another slice's sums: in int64, since the total may pass 2**53 even where
        each slice's float64 figures were exact."""
        self.value, self.shift = self.exact().add(other.exact()), 0
        return self

    def finish(self, row_scale: torch.Tensor | None, col_scale: torch.Tensor | None, fuse: bool = False):
        """float32 ``S * row_scale[:, None] * col_scale[None, :]``: the scalings are exact
        in float64 and the cast to float32 is the one rounding. An int64 ``S`` beyond 2**53
        first becomes float64 rounded to odd (exact, or the odd neighbour), so that the
        cast still rounds ``S`` itself to nearest (53 >= 24 + 2 bits). ``fuse``: one C call
        for a small CPU sum (:mod:`native`), the same bits."""
        v = self.value
        if (fuse and v.dtype == F64 and v.device.type == "cpu" and v.is_contiguous()
                and not intgemm_fused.worth_it(fuse, v.numel(), v.device) and native.ready()):
            return native.finish(self.value, row_scale, 2.0 ** self.shift, col_scale)
        s = _to_float64_odd(self.value) if self.value.dtype == I64 else self.value
        s = torch.mul(s, _scale64(row_scale, s.shape[0], s.device, 2.0 ** self.shift).unsqueeze(1))
        out = torch.empty(s.shape, dtype=F32, device=s.device)
        if col_scale is None:
            return out.copy_(s)
        return torch.mul(s, col_scale.to(F64), out=out)


def _to_float64_odd(v: torch.Tensor) -> torch.Tensor:
    """int64 -> float64 with round-to-odd: exact values stay; an inexact one becomes the
    float64 neighbour of ``v`` whose last significand bit is 1."""
    h = v.to(F64)
    inexact = v != h.to(I64)  # |v| < 2**62 (check_contraction): h converts back exactly
    even = (h.view(I64) & 1) == 0
    step = torch.where(v > h.to(I64), torch.full_like(h, math.inf), torch.full_like(h, -math.inf))
    return torch.where(inexact & even, torch.nextafter(h, step), h)
