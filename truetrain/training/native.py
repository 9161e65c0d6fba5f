"""Exact small-tensor kernels in C for CPUs: one call where eager torch takes a dozen.

On the demo models a repro step is hundreds of microsecond-sized torch ops, so dispatch,
not arithmetic, sets its time. ``exact_kernels.c`` does the worst offenders (quantising a
matrix per row or column with its power-of-two scales; scaling and rounding exact float64
sums to float32) in one pass each, with the same bits as the torch ops in ``intgemm``.

The library is compiled on first use with the system C compiler (``cc``, flags that
forbid contraction and fast-math) into ``~/.cache/truetrain`` (``$XDG_CACHE_HOME``), named
by the hash of its source and flags, then self-tested against the torch ops on vectors
with signed zeros, NaN, inf, subnormals, ties and the clamp edges. Without a compiler, or
when any bit differs, the process stays on the torch ops (logged once): same bits, slower.
Used by fused engines (the default) for float32 CPU tensors below the size where the
compiled kernels of ``intgemm_fused`` take over.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import torch

log = logging.getLogger(__name__)

F32, F64 = torch.float32, torch.float64
SOURCE = Path(__file__).with_name("exact_kernels.c")
#: The transformer's float64 chains (:mod:`native_chains`), built into the same library.
CHAIN_SOURCE = Path(__file__).with_name("chain_kernels.c")
#: The int8 route's quantising and combining (:mod:`native_planes`), and the header of helpers.
PLANE_SOURCE = Path(__file__).with_name("plane_kernels.c")
#: A small linear map's forward and weight gradient in one call each (:mod:`native_linear`).
LINEAR_SOURCE = Path(__file__).with_name("linear_kernels.c")
#: Attention's batched exact products in one call (:mod:`native_planes`).
BMM_SOURCE = Path(__file__).with_name("bmm_kernels.c")
#: A bias gradient's column sums (:mod:`native_chains`).
COLUMN_SOURCE = Path(__file__).with_name("column_kernels.c")
#: A small classifier's gradients in one call (:mod:`native_net`).
NET_SOURCE = Path(__file__).with_name("net_kernels.c")
HEADER = Path(__file__).with_name("exact_common.h")
# -fopenmp: the plane kernels split rows over threads; the runtime (libgomp.so.1) is the one
# torch has already loaded, so they share its thread pool.
FLAGS = ["-O3", "-std=c11", "-shared", "-fPIC", "-ffp-contract=off", "-fno-fast-math", "-fno-math-errno",
         "-fopenmp"]
if platform.machine() in ("x86_64", "AMD64"):
    # this CPU's vector units (the chains' loops vectorise; nearbyint is one instruction).
    # Elementwise IEEE operations give the same bits in any vector width, and contraction
    # stays off, so the instruction set changes speed only; the library's name carries
    # the CPU's feature flags, so a cache shared with another CPU builds its own.
    FLAGS.append("-march=native")


def _cpu_flags() -> bytes:
    try:
        with open("/proc/cpuinfo", "rb") as f:
            return next((line for line in f if line.startswith(b"flags")), b"")
    except OSError:
        return platform.processor().encode()

_lock = threading.Lock()
_state: dict[str, object] = {}  # "lib": the CDLL or None, "reason": why not


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "truetrain"


def build_library(name: str, sources: list[Path], flags: list[str], *, extra: tuple[Path, ...] = (),
                  args: tuple[str, ...] = ()) -> Path:
    """The shared library ``name-<digest>.so`` built from ``sources`` with ``flags`` (and
    ``args`` after the sources) in the kernel cache, compiled once per machine: the digest
    covers the sources, the ``extra`` files they include, the compiler, the flags and the
    CPU's feature flags."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise OSError("no C compiler (cc) on PATH")
    source = b"".join(path.read_bytes() for path in [*sources, *extra])
    digest = hashlib.sha256(source + " ".join([compiler, *flags, *args]).encode() + _cpu_flags()).hexdigest()[:16]
    target = _cache_dir() / f"{name}-{digest}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # One build a machine: daemons starting together wait for the first one's compile
    # (twenty at once on two cores took minutes) instead of each running gcc.
    with open(target.parent / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.exists():
            with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
                built = Path(tmp) / target.name
                subprocess.run([compiler, *flags, *map(str, sources), "-o", str(built), *args],
                               check=True, capture_output=True, timeout=120)
                os.replace(built, target)  # atomic: a reader never sees a half-written library
    return target


def _compile() -> Path:
    """The exact kernels' shared library for these sources and flags."""
    sources = [SOURCE, CHAIN_SOURCE, PLANE_SOURCE, LINEAR_SOURCE, BMM_SOURCE, COLUMN_SOURCE, NET_SOURCE]
    # the header each source includes lies beside it (a test's faulty copy beside its own)
    headers = sorted({path.with_name(HEADER.name) for path in sources if path.with_name(HEADER.name).exists()})
    return build_library("exact-kernels", sources, [*FLAGS, f"-I{HEADER.parent}"], extra=tuple(headers), args=("-lm",))


def _load() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(_compile()))
    p, i64, i32, dbl = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_double
    lib.tt_quantize.argtypes = [p, i64, i64, i32, i32, p, p, p]
    lib.tt_quantize.restype = i32
    lib.tt_finish.argtypes = [p, i64, i64, p, dbl, p, p]
    lib.tt_finish.restype = None
    lib.tt_softmax_xent.argtypes = [p, p, i64, i64, dbl, i32, p, p, p, p, p]
    lib.tt_softmax_xent.restype = i32
    lib.tt_grad_columns.argtypes = [p, i64, i64, p, i32, i32, p, p, p, p, p]
    lib.tt_grad_columns.restype = i32
    for name in ("tt_im2col", "tt_col2im"):
        getattr(lib, name).argtypes = [p, i64, i64, i64, i64, i64, p]
        getattr(lib, name).restype = None
    lib.tt_pool.argtypes = [p, i64, i64, i64, i64, p, p]
    lib.tt_pool.restype = None
    lib.tt_unpool.argtypes = [p, p, i64, i64, i64, i64, p]
    lib.tt_unpool.restype = None
    from . import native_chains, native_linear, native_net, native_planes

    native_chains.declare(lib)
    native_planes.declare(lib)
    native_linear.declare(lib)
    native_net.declare(lib)
    return lib


def ready() -> bool:
    """Whether this process uses the C kernels (built, loaded and self-tested on first asking)."""
    if "lib" not in _state:
        with _lock:
            if "lib" not in _state:
                _state["lib"], _state["reason"] = None, None
                try:
                    lib = _load()
                    _state["lib"] = lib  # the self-test calls the kernels through it
                    reason = _self_test()
                except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
                    reason = f"not built: {str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__}"
                if reason is None:
                    log.info("exact C kernels on cpu: exact on every test vector", extra={"native_kernels": True})
                else:
                    _state["lib"], _state["reason"] = None, reason
                    log.warning("exact C kernels refused (%s): the torch ops run, same bits", reason,
                                extra={"native_kernels": False})
    return _state["lib"] is not None


def small(t: torch.Tensor, fuse: bool) -> bool:
    """Whether a fused engine (``fuse``) runs ``t``'s op here: a float32 CPU tensor below
    the size where the compiled kernels take over."""
    if not (fuse and t.dtype == F32 and t.device.type == "cpu"):
        return False
    from . import intgemm_fused  # (imports this module)

    if t.numel() < intgemm_fused.min_elements():  # the common case, asked many times a step
        return ready()
    return not intgemm_fused.worth_it(True, t.numel(), t.device) and ready()


def im2col(a: torch.Tensor, k: int) -> torch.Tensor:
    """``ops.conv.im2col`` of a (b, h, w, c) map: (b*h*w, c*k*k) patches."""
    a = a.contiguous()
    b, h, w, c = a.shape
    out = torch.empty((b * h * w, c * k * k), dtype=F32)
    _state["lib"].tt_im2col(a.data_ptr(), b, h, w, c, k, out.data_ptr())
    return out


def col2im(d: torch.Tensor, shape: tuple[int, int, int, int], k: int) -> torch.Tensor:
    """``ops.conv.col2im``: patch gradients (b*h*w, c*k*k) back to a (b, h, w, c) map."""
    d = d.contiguous()
    out = torch.empty(shape, dtype=F32)
    _state["lib"].tt_col2im(d.data_ptr(), *shape, k, out.data_ptr())
    return out


def pool(a: torch.Tensor):
    """``ops.conv.pool``: 2x2 max pooling of a (b, h, w, c) map and its first-max mask."""
    a = a.contiguous()
    b, h, w, c = a.shape
    out, mask = torch.empty((b, h // 2, w // 2, c), dtype=F32), torch.empty((b, h // 2, w // 2, c, 4), dtype=F32)
    _state["lib"].tt_pool(a.data_ptr(), b, h, w, c, out.data_ptr(), mask.data_ptr())
    return out, mask


def unpool(g: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``ops.conv.unpool``: the pooled gradient put back where each window's max was."""
    g, mask = g.contiguous(), mask.contiguous()
    b, h2, w2, c = g.shape
    out = torch.empty((b, 2 * h2, 2 * w2, c), dtype=F32)
    _state["lib"].tt_unpool(g.data_ptr(), mask.data_ptr(), b, h2, w2, c, out.data_ptr())
    return out


def quantize(x: torch.Tensor, dim: int, bits: int, amax: torch.Tensor | None = None):
    """``(q64, down)``: the integers ``q`` that ``intgemm`` computes with torch ops, as
    float64, and their scales (see ``tt_quantize``)."""
    flip = not x.is_contiguous() and x.T.is_contiguous()
    if flip:  # w.T: quantise w's rows, read transposed
        x, dim = x.T, 1 - dim
    elif not x.is_contiguous():
        x = x.contiguous()
    rows, cols = x.shape
    q64 = torch.empty((rows, cols), dtype=F64)
    down = torch.empty(rows if dim == 1 else cols, dtype=F32)
    if amax is not None and (amax.dtype != F32 or not amax.is_contiguous()):
        amax = amax.to(F32).contiguous()
    if _state["lib"].tt_quantize(x.data_ptr(), rows, cols, dim, bits, None if amax is None else amax.data_ptr(),
                                 q64.data_ptr(), down.data_ptr()) != 0:
        raise MemoryError("tt_quantize: no scratch memory")
    return (q64.T, down) if flip else (q64, down)


def finish(s: torch.Tensor, row: torch.Tensor | None, factor: float, col: torch.Tensor | None) -> torch.Tensor:
    """float32 ``s * (row[:, None] * factor) * col[None, :]`` for contiguous float64 ``s``."""
    m, n = s.shape
    out = torch.empty((m, n), dtype=F32)
    # the converted scales are held until the call returns (a converted copy passed only by
    # its address would be freed before C reads it)
    row = None if row is None else row.to(F32).contiguous()
    col = None if col is None else col.to(F32).contiguous()
    _state["lib"].tt_finish(s.data_ptr(), m, n, None if row is None else row.data_ptr(), float(factor),
                            None if col is None else col.data_ptr(), out.data_ptr())
    return out


def grad_columns(g: torch.Tensor, sa: torch.Tensor, bits: int, bits_b: int):
    """``(q64, down, sb, down_b)`` of a one-slice batch's output gradient ``g``: ``g * sa``
    quantised per column (as ``quantize_scaled_columns`` gives it) and the bias gradient's
    exact column sums with their scales (as ``ops.GradBook`` takes them; see ``tt_grad_columns``)."""
    g, sa = g.contiguous(), sa.to(F32).contiguous()
    rows, cols = g.shape
    scratch = torch.empty(2 * cols, dtype=F32)
    q64 = torch.empty((rows, cols), dtype=F64)
    down = torch.empty(cols, dtype=F32)
    sb, down_b = torch.empty(cols, dtype=F64), torch.empty(cols, dtype=F64)
    _state["lib"].tt_grad_columns(g.data_ptr(), rows, cols, sa.data_ptr(), bits, bits_b, scratch.data_ptr(),
                                  q64.data_ptr(), down.data_ptr(), sb.data_ptr(), down_b.data_ptr())
    return q64, down, sb, down_b


_EXP_COEFFS = None


def exp_coeffs() -> torch.Tensor:
    """``repro_ops.exp64``'s polynomial as float64, for the kernels' exp."""
    global _EXP_COEFFS
    if _EXP_COEFFS is None:
        from .repro_ops import _EXP_COEFFS as coeffs

        _EXP_COEFFS = torch.tensor(coeffs, dtype=F64)
    return _EXP_COEFFS


def softmax_xent(logits: torch.Tensor, y: torch.Tensor, total_rows: int):
    """``repro_ops.softmax_xent`` in one call: ``(grad, sumexp, target)``, the same bits
    (a NaN logit gives NaN rows, as there, though not necessarily the same NaN)."""
    from .repro_ops import EXACT_BITS, ceil_log2

    logits, y = logits.contiguous(), y.to(torch.int64).contiguous()
    rows, classes = logits.shape
    grad = torch.empty_like(logits)
    e, sumexp, target = torch.empty(classes, dtype=F64), torch.empty(rows, dtype=F64), torch.empty(rows, dtype=F64)
    k = EXACT_BITS - ceil_log2(classes)
    if _state["lib"].tt_softmax_xent(logits.data_ptr(), y.data_ptr(), rows, classes, float(total_rows), k,
                                     exp_coeffs().data_ptr(), e.data_ptr(), grad.data_ptr(), sumexp.data_ptr(),
                                     target.data_ptr()) != 0:
        raise IndexError(f"softmax_xent: a label outside [0, {classes})")
    return grad, sumexp, target


def _self_test() -> str | None:
    """The first kernel whose bits differ from the torch ops on the test vectors, or None."""
    from .intgemm import ExactSum, _quantize_with, pow2_scales

    gen = torch.Generator().manual_seed(20261205)
    x = torch.randn(37, 29, generator=gen) * torch.logspace(-30, 30, 29)
    x[0, :8] = torch.tensor([0.0, -0.0, 2.5, -3.5, 1e-42, -1e-44, 3.4e38, -3.4e38])
    x[1], x[2, 3], x[3, 5], x[4, 7] = -0.0, float("nan"), float("inf"), float("-inf")
    for bits in (13, 20):
        # a row whose scale is 1 (largest magnitude in [2**(b-1), 2**b)): its halves are ties
        x[5] = torch.arange(-14, 15) + 0.5
        x[5, 0] = 2.0 ** bits - 1
        for dim in (0, 1):
            for given in (None, x.abs().amax(dim) * 2):
                amax = x.abs().amax(dim) if given is None else given
                up, down = pow2_scales(amax, bits)
                want = _quantize_with(x, up.unsqueeze(1) if dim == 1 else up, bits)
                for src in (x, x.T.contiguous().T):
                    q64, d = quantize(src, dim, bits, given)
                    if not (_same(d, down) and _same(q64, want.to(F64)) and _same(q64.to(F32), want)):
                        return f"tt_quantize differs (bits {bits}, dim {dim}, amax {'given' if given is not None else 'own'})"
    s = torch.randn(9, 11, generator=gen, dtype=F64) * 2.0 ** 40
    s[0, :3] = torch.tensor([0.0, -0.0, 2.0 ** 53 - 1], dtype=F64)
    row, col = torch.ldexp(torch.ones(9), torch.arange(-60, -51)), torch.ldexp(torch.ones(11), torch.arange(-5, 6))
    for r, c, shift in ((row, col, 0), (None, col, 7), (row, None, -14), (None, None, 0)):
        if not _same(finish(s, r, 2.0 ** shift, c), ExactSum(s, shift).finish(r, c)):
            return "tt_finish differs"
    from .repro_ops import softmax_xent as torch_softmax_xent

    logits = torch.randn(23, 11, generator=gen) * 30
    logits[0, :4] = torch.tensor([1e4, -1e4, 0.0, -0.0])  # exp underflows below -708
    logits[1] = 7.25  # a flat row
    labels = torch.arange(23) % 11
    for total in (23, 100):  # 100: a true division
        if not all(_same(a, b) for a, b in zip(softmax_xent(logits, labels, total),
                                               torch_softmax_xent(logits, labels, total), strict=True)):
            return "tt_softmax_xent differs"
    from .intgemm import quantize_scaled_columns
    from .repro_ops import power_scales

    g = torch.randn(40, 13, generator=gen) * torch.logspace(-8, 8, 13)
    g[0, :3], g[1] = torch.tensor([-0.0, 1e-42, float("nan")]), 0.0
    sa = torch.ldexp(torch.ones(40), torch.arange(-20, 20))
    for bits, bits_b in ((13, 40), (20, 30)):
        q64, down, sb, down_b = grad_columns(g, sa, bits, bits_b)
        want = quantize_scaled_columns(g, sa, (g * sa.unsqueeze(1)).abs().amax(0), (bits + 1) // 7)
        up_b, want_down_b = power_scales(g.abs().amax(0), bits_b)
        want_sb = torch.round(g.to(F64) * up_b).sum(0).add_(0.0)
        if not (_same(q64, want.q64) and _same(down, want.scale) and _same(sb, want_sb)
                and _same(down_b, want_down_b)):
            return "tt_grad_columns differs"
    from . import native_chains, native_linear, native_net, native_planes

    return (_self_test_maps(gen) or native_chains.self_test(gen, _same) or native_planes.self_test(gen, _same)
            or native_linear.self_test(gen, _same) or native_net.self_test(gen, _same))


def _self_test_maps(gen: torch.Generator) -> str | None:
    """The CNN's data movement and pooling kernels against the op library's torch ops."""
    from .ops import conv

    a = torch.relu(torch.randn(3, 6, 4, 5, generator=gen))  # pooling sees ReLU outputs: no -0.0
    a[0, 0, 0, 0], a[1, 2:4, 0:2, 1], a[2, 0, 1, 2] = float("nan"), 0.5, float("inf")  # a NaN, a 4-way tie
    for k in (1, 3, 5):
        if not _same(im2col(a, k), conv.im2col(a, k)):
            return "tt_im2col differs"
        d = torch.randn(3 * 6 * 4, 5 * k * k, generator=gen)
        d[0, 0], d[1, :] = -0.0, -0.0
        if not _same(col2im(d, (3, 6, 4, 5), k), conv.col2im(d, (3, 6, 4, 5), k)):
            return "tt_col2im differs"
    got, want = pool(a), conv.pool(a)
    if not all(_same(x, y) for x, y in zip(got, want, strict=True)):
        return "tt_pool differs"
    g = torch.randn(3, 3, 2, 5, generator=gen)
    g[0, 0, 0, 0] = -0.0
    if not _same(unpool(g, want[1]), conv.unpool(g, want[1])):
        return "tt_unpool differs"
    return None


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit for bit (NaN equals NaN; -0.0 differs from +0.0)."""
    view = {F32: torch.int32, F64: torch.int64}
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(
        a.contiguous().view(view[a.dtype]), b.contiguous().view(view[b.dtype]))
