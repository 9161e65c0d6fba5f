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


def _digits_stacked(q: torch.Tensor, limbs: int, dim: int) -> torch.Tensor:
    """int8 limbs of float32 integers, stacked along ``dim`` (most significant first)."""
    parts = []
    rest = q
    for _ in range(limbs - 1):
        high = torch.floor(rest * (1.0 / 128))
        parts.append(rest - high * 128.0)
        rest = high
    parts.append(rest)
    return torch.stack(parts[::-1], dim=dim).to(I8)


def _quantize_left(x: torch.Tensor, up: torch.Tensor, span: float, limbs: int) -> torch.Tensor:
    """Left limbs (M, L, K) of round(x * up) clamped to [-span, span - 1], in one pass."""
    return _digits_stacked(_quantize(x, up, span), limbs, 1)


def _quantize_left_lsf(x: torch.Tensor, up: torch.Tensor, span: float, limbs: int) -> torch.Tensor:
    """Like :func:`_quantize_left` with the least significant limb first: (M, L, K) whose
    (M, L*K) transpose is the right-operand layout of ``x.T``, read in place."""
    return _digits_stacked(_quantize(x, up, span), limbs, 1).flip(1)


def _quantize_right(x: torch.Tensor, up: torch.Tensor, span: float, limbs: int) -> torch.Tensor:
    """Right limbs (L, K, N), least significant first, of round(x * up) clamped, in one pass."""
    return _digits_stacked(_quantize(x, up, span), limbs, 0).flip(0)


def _combine_bias(sums: list[torch.Tensor], rows: torch.Tensor, cols: torch.Tensor,
                  bias: torch.Tensor) -> torch.Tensor:
    """:func:`_combine` then ``+ bias`` in float32 (one more rounding, as eager rounds it)."""
    return _combine(sums, rows, cols) + bias


def _quantize_right_scaled(g: torch.Tensor, rows: torch.Tensor, up: torch.Tensor, span: float,
                           limbs: int) -> torch.Tensor:
    """Right limbs of ``g * rows[:, None]`` quantised per column (rows: powers of two)."""
    return _quantize_right(g * rows.unsqueeze(1), up, span, limbs)


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


def _split_left(q: torch.Tensor, limbs: int) -> torch.Tensor:
    """(M, K) -> (M, L, K)."""
    return _digits_stacked(q, limbs, 1)


def _split_right(q: torch.Tensor, limbs: int) -> torch.Tensor:
    """(K, N) -> (L, K, N), least significant limb first."""
    return _digits_stacked(q, limbs, 0).flip(0)


def _combine(sums: list[torch.Tensor], rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """float32(S * rows[:, None] * cols[None, :]) with ``S = sum_d 128**(D-d) * sums[d]``
    summed in int64 (exact) and held exactly by float64 (the caller checks |S| < 2**53):
    exact until the cast. Integer shifts keep the loop at half the float64 work."""
    top = len(sums) - 1
    acc = sums[0].to(I64) << (7 * top)
    for d in range(1, len(sums)):
        acc = acc + (sums[d].to(I64) << (7 * (top - d)))
    return (acc.to(F64) * rows.unsqueeze(1) * cols).to(F32)


_EAGER = {"quantize": _quantize, "quantize_left": _quantize_left, "quantize_left_lsf": _quantize_left_lsf, "quantize_right": _quantize_right,
          "quantize_right_scaled": _quantize_right_scaled, "column_maxima": _column_maxima,
          "scaled_column_sums": _scaled_column_sums,
          "amax": _amax, "split_left": _split_left, "relu": _relu, "apply_mask": _apply_mask,
          "split_right": _split_right, "combine": _combine, "combine_bias": _combine_bias,
          # rounding ops (float64 +, -, *, /, round): compiled only because the self-test
          # checks its bits on the device against the eager ops (no contraction, no reassociation)
          "softmax_xent": softmax_xent}


#: Kernels compiled from another formulation than their eager twin (same bits, self-tested).
_COMPILED_FROM = {"relu": _relu_selects, "apply_mask": _apply_mask_selects}


def kernel(name: str):
    """The compiled kernel ``name``, or its eager twin when compiling is not possible."""
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
    got, want = call(name, *args), _EAGER[name](*args)
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


def worth_it(fuse: bool, elements: int, device: torch.device | str = "cpu") -> bool:
    """Whether to run a compiled kernel on a tensor of ``elements`` on ``device``: asked to,
    large enough, and the device's compiled kernels passed their self-test."""
    return fuse and elements >= getattr(_override, "min_elements", MIN_ELEMENTS) and ready(device)


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
