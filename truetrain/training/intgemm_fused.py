"""Fused kernels for the int8 route: quantising, limb splitting, combining and rounding.

Eager PyTorch runs the integer engine's elementwise steps as separate kernels, each a
round trip through memory; on a CPU those trips, not the int8 products, set the cost
(bench/repro.py). Here the same steps are compiled with ``torch.compile`` into one loop
each. Every step is exact (power-of-two scaling, ``floor`` of exact quotients, sums of
integers that float64 holds exactly) up to the one final cast to float32, so a compiler
may fuse, reorder or contract them in any way and the bits stay those of the eager route:
the engine's self-test checks that on each device before the fused kernels are used.

On by default (``GemmEngine(fuse=True)``; the daemons' ``--no-gemm-fuse`` turns it off),
for tensors of :data:`MIN_ELEMENTS` or more only: compiling takes seconds per kernel and
shape, and a compiled kernel's fixed cost per call exceeds what it saves on small tensors.
The first time a device would run a compiled kernel, :func:`ready` self-tests every one
there against its eager twin (``gemm_check.fused_kernels_differ``); one that differs, or a
compiler that is missing (CPU needs a C++ compiler, CUDA Triton), leaves that device on the
eager kernels for good, with a warning in the log: the same bits, only slower.
"""

from __future__ import annotations

import contextlib
import logging
import threading

import torch

from . import native_chains, native_planes
from .repro_ops import softmax_xent

log = logging.getLogger(__name__)

F32, F64, I8, I64 = torch.float32, torch.float64, torch.int8, torch.int64

_lock = threading.Lock()
_kernels: dict[str, object] = {}
_broken: set[str] = set()


def _quantize(x: torch.Tensor, up: torch.Tensor, span: float) -> torch.Tensor:
    """round(x * up) in [-span, span - 1]: exact scaling, one rounding to an integer."""
    return torch.clamp(torch.round(x * up), min=-span, max=span - 1.0)


def _amax(x: torch.Tensor, dim: int) -> torch.Tensor:
    return x.abs().amax(dim=dim)


def digit_pairs(limbs: int) -> list[tuple[int, int]]:
    """The digit pairs ``(i, j)``, ``i < j``, whose sums are planes after the digits."""
    return [(i, j) for i in range(limbs) for j in range(i + 1, limbs)]


def plane_count(limbs: int) -> int:
    """Planes per operand, one int8 product each: the digits and their pair sums."""
    return limbs * (limbs + 1) // 2


def planes_stacked(q: torch.Tensor, limbs: int, dim: int) -> torch.Tensor:
    """int8 planes of float32 integers ``-2**(7L-1) <= q < 2**(7L-1)``, stacked along
    ``dim``: first the ``L`` balanced base-128 digits, most significant first (``q = sum
    d_i 128**(L-1-i)``; lower digits in [-64, 63], the top one in [-64, 64]), then the sum
    of each pair of digits (:func:`digit_pairs`; in [-128, 127]). Exact float ops."""
    digits = []
    rest = q
    for _ in range(limbs - 1):
        high = torch.floor((rest + 64.0) * (1.0 / 128))
        digits.append(rest - high * 128.0)
        rest = high
    digits.append(rest)
    digits.reverse()
    sums = [digits[i] + digits[j] for i, j in digit_pairs(limbs)]
    return torch.stack(digits + sums, dim=dim).to(I8)


def planes_eager(q: torch.Tensor, limbs: int, dim: int) -> torch.Tensor:
    """:func:`planes_stacked` as eager ops writing each plane into its place (no stacked
    float32 copy): the same int8 values."""
    count = plane_count(limbs)
    out = torch.empty(q.shape[:dim] + (count,) + q.shape[dim:], dtype=I8, device=q.device)
    digits = [None] * limbs
    rest = q
    for i in range(limbs - 1, 0, -1):
        high = torch.add(rest, 64.0).mul_(1.0 / 128).floor_()
        digits[i] = torch.sub(rest, high, alpha=128.0)
        rest = high
    digits[0] = rest
    for p, plane in enumerate(digits + [torch.add(digits[i], digits[j]) for i, j in digit_pairs(limbs)]):
        out.select(dim, p).copy_(plane)
    return out


def combine_exact(sums: list[torch.Tensor]) -> torch.Tensor:
    """int64 ``S`` from the plane products (Karatsuba): ``P_i = A_i B_i`` for each digit and
    ``M_ij = (A_i + A_j)(B_i + B_j)`` for each pair, so ``A_i B_j + A_j B_i = M_ij - P_i - P_j``
    and ``S = sum_i P_i 128**(2T-2i) + sum_ij (M_ij - P_i - P_j) 128**(2T-i-j)``, T = L - 1."""
    limbs = {3: 2, 6: 3}[len(sums)]
    top = 2 * limbs - 2
    p = [s.to(I64) for s in sums[:limbs]]
    acc = p[0] * (1 << (7 * top))
    for i in range(1, limbs):
        acc = acc + p[i] * (1 << (7 * (top - 2 * i)))
    for (i, j), m in zip(digit_pairs(limbs), sums[limbs:]):
        acc = acc + (m.to(I64) - p[i] - p[j]) * (1 << (7 * (top - i - j)))
    return acc


def _quantize_left(x: torch.Tensor, up: torch.Tensor, span: float, limbs: int,
                   planes=planes_eager) -> torch.Tensor:
    """Left planes (M, P, K) of round(x * up) clamped to [-span, span - 1] (compiled: one pass)."""
    return planes(_quantize(x, up, span), limbs, 1)


def _quantize_right(x: torch.Tensor, up: torch.Tensor, span: float, limbs: int,
                    planes=planes_eager) -> torch.Tensor:
    """Right planes (P, K, N) of round(x * up) clamped (compiled: one pass)."""
    return planes(_quantize(x, up, span), limbs, 0)


def _combine_bias(sums: list[torch.Tensor], rows: torch.Tensor, cols: torch.Tensor,
                  bias: torch.Tensor) -> torch.Tensor:
    """:func:`_combine` then ``+ bias`` in float32 (one more rounding, as eager rounds it)."""
    return _combine(sums, rows, cols) + bias


def _quantize_right_scaled(g: torch.Tensor, rows: torch.Tensor, up: torch.Tensor, span: float,
                           limbs: int, planes=planes_eager) -> torch.Tensor:
    """Right planes of ``g * rows[:, None]`` quantised per column (rows: powers of two)."""
    return _quantize_right(g * rows.unsqueeze(1), up, span, limbs, planes)


def _column_maxima(g: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per column: ``max |g * rows[:, None]|`` and ``max |g|``, in one pass."""
    return (g * rows.unsqueeze(1)).abs().amax(0), g.abs().amax(0)


def _scaled_column_sums(g: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """float64 column sums of ``round(g * up)``: integers, so exact in any order while
    they fit 53 bits (the caller's choice of ``up``)."""
    return torch.round(g.to(F64) * up).sum(0)


def _apply_mask(mask: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``x * mask + 0.0`` for a float32 0/1 mask (eager): +0.0 for -0.0, NaN for inf * 0."""
    return torch.mul(x, mask).add_(0.0)


def _relu(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(relu(h), mask)``: the mask float32 0/1 (``h > 0``), relu as :func:`_apply_mask`."""
    mask = torch.gt(h, 0).to(F32)
    return _apply_mask(mask, h), mask


def _apply_mask_selects(mask: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """:func:`_apply_mask` for the compiler: ``x * 1.0 + 0.0`` is ``x`` but +0.0 for -0.0;
    ``x * 0.0 + 0.0`` is +0.0 but NaN for inf and NaN. Zeros are chosen by selects, since
    the compiler's flags let it drop a ``+ 0.0``; the self-test checks the bits."""
    zero = x * 0.0
    kept = torch.where(x == 0, 0.0, x)
    dropped = torch.where(zero == 0, 0.0, zero)
    return torch.where(mask != 0, kept, dropped)


def _relu_selects(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mask = (h > 0).to(F32)
    return _apply_mask_selects(mask, h), mask


def _combine(sums: list[torch.Tensor], rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """float32(S * rows[:, None] * cols[None, :]) with ``S`` from :func:`combine_exact`
    (int64, exact) held exactly by float64 (the caller checks |S| < 2**53): exact until the
    cast."""
    return (combine_exact(sums).to(F64) * rows.unsqueeze(1) * cols).to(F32)


_EAGER = {"quantize_left": _quantize_left, "quantize_right": _quantize_right,
          "quantize_right_scaled": _quantize_right_scaled, "column_maxima": _column_maxima,
          "scaled_column_sums": _scaled_column_sums, "amax": _amax, "planes": planes_eager,
          "relu": _relu, "apply_mask": _apply_mask, "combine": _combine, "combine_bias": _combine_bias,
          # rounding ops (float64 +, -, *, /, round): compiled only because the self-test
          # checks its bits on the device against the eager ops (no contraction, no reassociation)
          "softmax_xent": softmax_xent}


def _register_elementwise() -> None:
    """The op library's float64 chains (GELU, LayerNorm, attention's softmax), compiled
    like softmax_xent."""
    from .ops.attention import softmax_backward, softmax_causal
    from .ops.elementwise import gelu_backward, gelu_forward, ln_backward, ln_forward

    _EAGER.update({"gelu": gelu_forward, "gelu_backward": gelu_backward, "ln_forward": ln_forward,
                   "ln_backward": ln_backward, "softmax_causal": softmax_causal,
                   "softmax_backward": softmax_backward})


#: Kernels compiled from another formulation than their eager twin (same bits, self-tested).
_COMPILED_FROM = {
    "relu": _relu_selects, "apply_mask": _apply_mask_selects, "planes": planes_stacked,
    "quantize_left": lambda *a: _quantize_left(*a, planes=planes_stacked),
    "quantize_right": lambda *a: _quantize_right(*a, planes=planes_stacked),
    "quantize_right_scaled": lambda *a: _quantize_right_scaled(*a, planes=planes_stacked)}


def kernel(name: str):
    """The compiled kernel ``name``, or its eager twin when compiling is not possible."""
    if name not in _EAGER:
        _register_elementwise()
    if name in _broken:
        return _EAGER[name]
    with _lock:
        if name not in _kernels:
            # shapes, ranks and thread counts vary: allow recompiles beyond dynamo's default 8
            torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
            _kernels[name] = torch.compile(_COMPILED_FROM.get(name, _EAGER[name]), dynamic=False, fullgraph=True)
    return _kernels[name]


def twins_agree(name: str, *args) -> bool:
    """Whether compiled kernel ``name`` gives its eager twin's bits on ``args``."""
    got = call(name, *args)
    want = _EAGER[name](*args)
    if isinstance(want, torch.Tensor):
        got, want = (got,), (want,)
    return all(g.dtype == w.dtype and torch.equal(_bits(g.cpu()), _bits(w.cpu())) for g, w in zip(got, want, strict=True))


def _bits(t: torch.Tensor) -> torch.Tensor:
    """Floats as their bit patterns (so NaN equals itself and -0.0 differs from +0.0)."""
    return t.view({F32: torch.int32, F64: I64}[t.dtype]) if t.is_floating_point() else t


#: Tensors smaller than this run eager even when fused: a compiled kernel's fixed cost per
#: call (guards, launch) and its compile per shape are more than the memory passes it saves
#: on them (the demo models' tensors are all smaller; a d256 layer's 1024 x 256 is not).
MIN_ELEMENTS = 1 << 18


_override = threading.local()


def min_elements() -> int:
    """The size from which compiled kernels run, in this thread (:func:`every_size` lowers it)."""
    return getattr(_override, "min_elements", MIN_ELEMENTS)


def worth_it(fuse: bool, elements: int, device: torch.device | str = "cpu") -> bool:
    """Whether to run a compiled kernel on a tensor of ``elements`` on ``device``: asked to,
    large enough, and the device's compiled kernels passed their self-test."""
    return fuse and elements >= min_elements() and ready(device)


_verified: dict[str, str | None] = {}  # device -> None (compiled kernels exact) or the reason not
_verify_lock = threading.Lock()


def ready(device: torch.device | str) -> bool:
    """Whether ``device`` runs compiled kernels: self-tested on first asking (bit for bit
    against the eager twins, at every size), the outcome logged and kept for the process."""
    key = str(torch.device(device))
    if getattr(_override, "verifying", False):
        return True
    if key not in _verified:
        from .gemm_check import fused_kernels_differ  # the self-test lives with the others
        with _verify_lock:
            if key not in _verified:
                _verified[key] = fused_kernels_differ(key)
                if _verified[key] is None:
                    log.info("fused GEMM kernels on %s: exact on every test vector", key,
                             extra={"gemm_fused": True, "device": key})
                else:
                    log.warning("fused GEMM kernels refused on %s (%s): the eager int8 kernels run, "
                                "same bits", key, _verified[key], extra={"gemm_fused": False, "device": key})
    return _verified[key] is None


@contextlib.contextmanager
def every_size():
    """In this thread, fused kernels run on tensors of any size (self-tests, tests)."""
    before = getattr(_override, "min_elements", MIN_ELEMENTS)
    _override.min_elements = 0
    try:
        yield
    finally:
        _override.min_elements = before


@contextlib.contextmanager
def verifying():
    """In this thread, compiled kernels run at every size without asking :func:`ready`
    (the self-test that decides it)."""
    with every_size():
        _override.verifying = True
        try:
            yield
        finally:
            _override.verifying = False


def run(name: str, fuse: bool, *args):
    """Kernel ``name`` compiled (``fuse``, and the first argument large enough) or eager:
    the same bits either way."""
    if name not in _EAGER:
        _register_elementwise()
    if name in native_chains.KERNELS and native_chains.usable(args[0], fuse):
        return native_chains.KERNELS[name](*args)
    if name == "column_maxima" and native_planes.usable(args[0], fuse, 0):
        return native_planes.column_maxima(*args)
    return call(name, *args) if worth_it(fuse, args[0].numel(), args[0].device) else _EAGER[name](*args)


def call(name: str, *args):
    """Run kernel ``name``; on a compile failure fall back to eager for good (logged)."""
    try:
        return kernel(name)(*args)
    except Exception as exc:  # torch._dynamo / inductor / a missing compiler
        if name in _broken:
            raise
        _broken.add(name)
        log.warning("fused GEMM kernel %s unavailable, using eager: %s", name,
                    str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__)
        return _EAGER[name](*args)

