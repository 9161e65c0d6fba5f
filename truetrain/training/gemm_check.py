"""The exactness self-test of the int8 GEMM kernel, and the engine each device uses.

Before a process trains or replays on a device, :func:`engine_for` runs :func:`self_test`
there once: the int8 kernel's products are checked against exact integer references on
fixed vectors that include the extremes (every digit -128 or 127, the longest K one call
may sum, shapes CUDA must pad). A kernel that gets any bit wrong (a CPU path that
saturates int16 intermediates, an odd CUDA shape) is never used: the device falls back to
the float64 route, which computes the same integers and so the same bits, only slower.
The outcome is logged, exported as a metric and declared in the hardware profile.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass

import torch

from ..errors import ReproducibilityError
from . import intgemm_fused
from .intgemm import (INT8_K_CHUNK, LIMB_COUNTS, SMALL_PRODUCT, GemmEngine, Operand, _int_mm, operand_bits,
                      pow2_scales, quantize)

log = logging.getLogger(__name__)

#: ``route`` values a process may force (``auto``: int8 when it passes the self-test).
ROUTE_CHOICES = ("auto", "int8", "float64")


@dataclass(frozen=True)
class KernelCheck:
    """Which route a device uses and why."""

    device: str
    route: str
    reason: str


def _vectors(device: str):
    """(a, b) int8 pairs: the extremes at the longest K, then seeded random shapes, each
    also with A or B column-major."""
    full = INT8_K_CHUNK
    lo, hi = torch.full((17, full), -128, dtype=torch.int8), torch.full((full, 8), 127, dtype=torch.int8)
    yield lo, torch.full((full, 8), -128, dtype=torch.int8)  # every sum = K * 2**14 = 2**30
    yield lo, hi
    yield torch.full((17, full), 127, dtype=torch.int8), hi
    gen = torch.Generator().manual_seed(20261204)
    for m, k, n in ((1, 1, 1), (5, 13, 7), (17, 1000, 24), (33, 4099, 40), (64, 784, 256)):
        a = torch.randint(-128, 128, (m, k), generator=gen, dtype=torch.int8)
        b = torch.randint(-128, 128, (k, n), generator=gen, dtype=torch.int8)
        yield a, b
        yield a.T.contiguous().T, b  # column-major A: how weight gradients read their planes
        yield torch.cat([a, -a], 1)[:, :k], b  # row-major A past K: one plane of (M, P, K)
        # column-major B with a leading dimension past K: how forward products read weights
        yield a, torch.cat([b, -b]).T.contiguous().T[:k]


def _exact(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Integer reference: float64 sums of at most 2**16 products of 2**14 are exact."""
    return (a.to(torch.float64) @ b.to(torch.float64)).to(torch.int64)


def self_test(device: str, kernel=_int_mm, fuse: bool = False) -> KernelCheck:
    """Check ``kernel`` (int8 x int8 -> int32) on ``device`` against exact references, then
    the whole engine against the float64 route, bit for bit, for every limb count (and the
    compiled kernels against their eager twins when ``fuse``)."""
    try:
        check = _check(device, kernel)
        if fuse and check.route == "int8" and (bad := fused_kernels_differ(device, kernel)):
            return KernelCheck(device, "float64", bad)
        return check
    except (RuntimeError, NotImplementedError, AssertionError) as exc:  # no int8 kernel here
        return KernelCheck(device, "float64", f"int8 kernel unavailable: {str(exc).splitlines()[0][:160]}")


def _operands(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded float32 operands (40, 300) @ (300, 24) with signed zeros, a tiny and two large
    magnitudes in the first row."""
    gen = torch.Generator().manual_seed(7)
    x = (torch.randn(40, 300, generator=gen) * 3).to(device)
    w = torch.randn(300, 24, generator=gen).to(device)
    x[0, :5] = torch.tensor([0.0, -0.0, 1e-30, -3e4, 65504.0])
    return x, w


def _engines_agree(fast: GemmEngine, left: Operand, right: Operand) -> bool:
    """Whether ``fast`` gives the float64 route's bits on ``left @ right``, with and without
    a bias."""
    slow = GemmEngine(fast.device, "float64")
    bias = torch.linspace(-2, 2, right.shape[1], device=fast.device)
    return (torch.equal(fast.matmul(left, right).cpu(), slow.matmul(left, right).cpu())
            and torch.equal(fast.matmul(left, right, bias).cpu(), slow.matmul(left, right, bias).cpu()))


def _check(device: str, kernel) -> KernelCheck:
    """The self-test's checks, in order; the first failure names the route."""
    for a, b in _vectors(device):
        got = kernel(a.to(device), b.to(device))
        if got.dtype != torch.int32 or not torch.equal(got.cpu().to(torch.int64), _exact(a, b)):
            return KernelCheck(device, "float64", f"int8 kernel inexact on {tuple(a.shape)} x "
                                                  f"{tuple(b.shape)}")
    x, w = _operands(device)
    fast = GemmEngine(device, "int8", small_product=0, kernel=kernel)
    for limbs in LIMB_COUNTS:
        if not _engines_agree(fast, quantize(x, 1, limbs), quantize(w, 0, limbs)):
            return KernelCheck(device, "float64", f"int8 engine differs from float64 at {limbs} limbs")
    return KernelCheck(device, "int8", "exact on every test vector")


def fused_kernels_differ(device: str, kernel=_int_mm) -> str | None:
    """Why the compiled kernels (``intgemm_fused``) may not run on ``device``, or None when
    every one gives its eager twin's bits (quantisers, combine, the training step's kernels)
    and the fused engine gives the float64 route's. Runs at every size, on small vectors."""
    x, w = _operands(device)
    fast = GemmEngine(device, "int8", small_product=0, kernel=kernel, fuse=True)
    try:
        with intgemm_fused.verifying():
            for limbs in LIMB_COUNTS:
                left, right = quantize(x, 1, limbs, fuse=True), quantize(w, 0, limbs, fuse=True)
                if not (torch.equal(left.q, quantize(x, 1, limbs).q)
                        and torch.equal(right.q, quantize(w, 0, limbs).q)):
                    return f"fused quantiser differs at {limbs} limbs"
                if not _engines_agree(fast, left, right):
                    return f"fused engine differs from float64 at {limbs} limbs"
                if bad := _fused_gradient_kernels_differ(x, left, limbs):
                    return f"fused kernel {bad} differs at {limbs} limbs"
    except Exception as exc:  # a compiler that is missing or fails: eager kernels, same bits
        return f"compiling failed: {str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__}"
    return None


def _fused_gradient_kernels_differ(g: torch.Tensor, left: Operand, limbs: int) -> str | None:
    """The first fused training-step kernel whose bits differ from its eager twin."""
    from .ops.attention import softmax_causal
    from .ops.elementwise import ln_forward

    rows = left.scale
    amax = intgemm_fused.call("column_maxima", g, rows)[0]
    up, _ = pow2_scales(amax, operand_bits(limbs))
    signed = g.clone()
    signed[0, :6] = torch.tensor([0.0, -0.0, math.nan, -math.inf, math.inf, -1e-30])
    mask = (torch.arange(signed.numel(), device=g.device) % 3 == 0).to(torch.float32).view(signed.shape)
    cases = {"column_maxima": (g, rows), "relu": (signed,), "apply_mask": (mask, signed),
             "quantize_right_scaled": (g, rows, up, float(1 << operand_bits(limbs)), limbs),
             "scaled_column_sums": (g, up.to(torch.float64)), "planes": (left.q, limbs, 0)}
    logits = torch.cat([g[:, :10] * 40, torch.full_like(g[:, :1], -1e4)], 1)  # exp underflows
    labels = torch.arange(g.shape[0], device=g.device) % 11
    cases["softmax_xent"] = (logits, labels, 100)  # not a power of two: a true division
    wide = torch.cat([signed[:, :12] * 4, torch.full_like(g[:, :1], 7.0)], 1)  # erf's table ends at 6
    cases["gelu"], cases["gelu_backward"] = (wide,), (wide, g[:, :13])
    rows = g[:, :24]
    gain, shift = torch.linspace(-2, 2, 24, device=g.device), torch.linspace(1, -1, 24, device=g.device)
    _, xhat, rstd = ln_forward(rows, gain, shift, 1e-5)
    cases["ln_forward"], cases["ln_backward"] = (rows, gain, shift, 1e-5), (g[:, 1:25], xhat, rstd, gain)
    scores = (g[:, :g.shape[0]] * 30).unsqueeze(0).repeat(2, 1, 1)  # (2, T, T): rows past exp's floor
    cases["softmax_causal"] = (scores,)
    cases["softmax_backward"] = (softmax_causal(scores), scores * 0.01, 0.125)
    return next((name for name, args in cases.items() if not intgemm_fused.twins_agree(name, *args)), None)


_lock = threading.Lock()
_checks: dict[str, KernelCheck] = {}
_engines: dict[str, GemmEngine] = {}


def engine_for(device: str | torch.device | None = None, route: str = "auto",
               small_product: int | None = None, fuse: bool = True) -> GemmEngine:
    """The engine this process uses on ``device`` (self-tested once per device).

    ``route``: ``auto`` takes the int8 kernel when its self-test passes (products smaller
    than ``small_product`` multiply-adds then take the float64 route, where fewer kernel
    launches win on a CPU); ``int8`` insists on the kernel for every product and raises
    :class:`ReproducibilityError` when it fails the self-test; ``float64`` is the fallback
    everywhere. ``fuse`` compiles the int8 route's elementwise steps on large tensors
    (``intgemm_fused``; self-tested when first needed, eager if that fails). Every route
    gives the same bits. The first choice made for a
    device sticks for the life of the process.
    """
    key = str(torch.device(device or "cpu"))
    if route not in ROUTE_CHOICES:
        raise ValueError(f"route must be one of {ROUTE_CHOICES}, got {route!r}")
    with _lock:
        if key not in _engines:
            check = self_test(key) if route != "float64" else KernelCheck(
                key, "float64", "chosen in the settings")
            if route == "int8" and check.route != "int8":
                raise ReproducibilityError(f"the int8 GEMM kernel failed its self-test on {key}: "
                                           f"{check.reason}")
            level = logging.INFO if check.route == route or route == "auto" and check.route == "int8" \
                else logging.WARNING
            log.log(level, "GEMM route on %s: %s (%s)", key, check.route, check.reason,
                    extra={"gemm_route": check.route, "device": key})
            if small_product is None:
                small_product = 0 if route == "int8" or key.startswith("cuda") else SMALL_PRODUCT
            _checks[key] = check
            _engines[key] = GemmEngine(key, check.route, small_product,
                                       fuse=fuse and check.route == "int8")
        return _engines[key]


def kernel_check(device: str | torch.device | None = None) -> KernelCheck:
    """The self-test outcome for ``device`` (running it if this process has not yet)."""
    key = str(torch.device(device or "cpu"))
    engine_for(key)
    return _checks[key]
