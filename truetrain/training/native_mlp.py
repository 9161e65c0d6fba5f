"""A small MLP's repro gradients in one C call (``mlp_kernels.c``).

On the digits MLP (64-128-10, batch 64) a step spent most of its time in Python and
dispatch: two autograd nodes a layer, the weights quantised twice, masks, the loss, the
book's bookkeeping, each a few small torch calls. :func:`gradients` runs a whole batch in
one piece as one call of the same C kernels the small linear route uses
(:mod:`native_linear`, :mod:`native`'s quantiser and softmax cross-entropy), in the same
order on the same operands, so the bits are that route's (and so every route's).
Taken by :func:`~.ops.repro_gradients` for a model that names its dense layers
(``dense_layers``) when every layer would take the small C route anyway.
"""

from __future__ import annotations

import ctypes
import threading

import torch

from . import intgemm_fused, native, native_linear, native_planes
from .intgemm import check_contraction, operand_bits
from .repro_ops import EXACT_BITS, ceil_log2
from .repro_ops import operand_bits as sum_bits

F32, F64, I64 = torch.float32, torch.float64, torch.int64
_local = threading.local()  # the scratch of each thread's plans: {(widths, rows): (doubles, floats)}


def declare(lib: ctypes.CDLL) -> None:
    """The C signatures (called by :func:`native._load`)."""
    p, i64, i32, dbl = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_double
    lib.tt_mlp_scratch.argtypes = [i32, p, i64, p, p]
    lib.tt_mlp_scratch.restype = i32
    lib.tt_mlp_grads.argtypes = [i32, p, i64, i32, i32, p, p, p, p, dbl, i32, p, p, p, p, p, p, p]
    lib.tt_mlp_grads.restype = i32


def usable(layers, inputs: torch.Tensor, targets: torch.Tensor, engine, limbs: int) -> bool:
    """Whether every op of the step would take the small C route: a fused CPU engine with
    the C kernels, float32 rows (m, widths[0]) with m labels, contiguous float32 weights
    and biases (trainable, chained widths), each product small and exact."""
    m = inputs.shape[0] if inputs.dim() == 2 else 0
    if not (engine.fuse and engine.device == "cpu" and m and inputs.dtype == F32 and inputs.device.type == "cpu"
            and targets.dim() == 1 and targets.numel() == m and not targets.is_floating_point()
            and native_linear.exact(m, limbs) and native.ready()):
        return False
    width, small = inputs.shape[1], intgemm_fused.min_elements()
    for _, _, w, b in layers:
        if not (w.dim() == 2 and w.shape[1] == width and b is not None and b.shape == (w.shape[0],)
                and all(t.dtype == F32 and t.device.type == "cpu" and t.is_contiguous() and t.requires_grad
                        for t in (w, b))):
            return False
        n, k = w.shape
        if not (m * w.numel() < engine.small_product and w.numel() < min(native_planes.MIN_ELEMENTS, small)
                and m * n < small and native_linear.exact(k, limbs) and native_linear.exact(n, limbs)):
            return False
        width = n
    return True


def _scratch(lib, widths: tuple[int, ...], m: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(widths as int64, float64 scratch, float32 scratch)`` of this thread's plan for the shape."""
    plans = getattr(_local, "plans", None)
    if plans is None:
        plans = _local.plans = {}
    key = (widths, m)
    if key not in plans:
        if len(plans) >= 8:  # shapes change rarely (a task's batch size is fixed)
            plans.clear()
        shape = torch.tensor(widths, dtype=I64)
        doubles, floats = ctypes.c_int64(), ctypes.c_int64()
        if lib.tt_mlp_scratch(len(widths) - 1, shape.data_ptr(), m, ctypes.byref(doubles), ctypes.byref(floats)):
            raise MemoryError(f"tt_mlp_scratch: {len(widths) - 1} layers are too many")
        plans[key] = (shape, torch.empty(doubles.value, dtype=F64), torch.empty(floats.value, dtype=F32))
    return plans[key]


def _addresses(tensors) -> ctypes.Array:
    return (ctypes.c_void_p * len(tensors))(*[t.data_ptr() for t in tensors])


def gradients(layers, inputs: torch.Tensor, targets: torch.Tensor, limbs: int):
    """``(grads, [(sumexp, target)])`` of the mean cross-entropy of an MLP (``layers``:
    ``(weight name, bias name, weight (n, k), bias (n,))`` in order, a ReLU between) on a
    batch in one piece, as :func:`~.ops.repro_gradients` gives them (see :func:`usable`)."""
    lib = native._state["lib"]
    m, classes = inputs.shape[0], layers[-1][2].shape[0]
    check_contraction(m, limbs)
    widths = (inputs.shape[1], *[w.shape[0] for _, _, w, _ in layers])
    shape, dscratch, fscratch = _scratch(lib, widths, m)
    flat = torch.empty(sum(w.numel() + b.numel() for _, _, w, b in layers), dtype=F32)
    dws, dbs, at = [], [], 0
    for _, _, w, b in layers:
        dws.append(flat[at:at + w.numel()].view(w.shape))
        dbs.append(flat[at + w.numel():at + w.numel() + b.numel()])
        at += w.numel() + b.numel()
    losses = torch.empty(2 * m, dtype=F64)
    x, y = inputs.contiguous(), targets.to(I64).contiguous()
    rc = lib.tt_mlp_grads(
        len(layers), shape.data_ptr(), m, operand_bits(limbs), sum_bits(m, 0), x.data_ptr(), y.data_ptr(),
        _addresses([w for _, _, w, _ in layers]), _addresses([b for _, _, _, b in layers]), float(m),
        EXACT_BITS - ceil_log2(classes), native.exp_coeffs().data_ptr(), dscratch.data_ptr(), fscratch.data_ptr(),
        _addresses(dws), _addresses(dbs), losses.data_ptr(), losses.data_ptr() + 8 * m)
    if rc == -2:
        raise IndexError(f"softmax_xent: a label outside [0, {classes})")
    if rc != 0:
        raise MemoryError("tt_mlp_grads: no scratch memory")
    grads = {}
    for (wname, bname, _, _), dw, db in reversed(list(zip(layers, dws, dbs, strict=True))):  # the book's order
        grads[wname], grads[bname] = dw, db
    return grads, [(losses[:m], losses[m:])]


def self_test(gen: torch.Generator, same) -> str | None:
    """Whether :func:`gradients` gives the bits of the op library's torch ops (the float64
    engine): None, or what differs (``same``: native's bit-for-bit comparison)."""
    from .intgemm import GemmEngine
    from .models import build_model, init_params, parse_model_spec
    from .ops import ReproStep

    for limbs, widths, m in ((2, [7, 13, 5, 3], 9), (3, [5, 17, 4], 1)):
        model = build_model(spec := parse_model_spec({"kind": "mlp", "widths": widths}), init_params(spec, 3))
        model.fc[0].weight.data[1] = -0.0
        x = torch.randn(m, widths[0], generator=gen) * torch.logspace(-6, 6, widths[0])
        x[0, :2], x[-1] = torch.tensor([0.0, -0.0]), -0.0  # (NaN rows: tests/training/test_native_mlp.py)
        y = torch.arange(m) % widths[-1]
        step, want_losses = ReproStep(GemmEngine("cpu", "float64"), limbs, m), []
        with torch.enable_grad():  # the first use may come inside an autograd node's forward
            model.loss(x, y, step, m, want_losses).backward()
        want = step.book.result()
        got, got_losses = gradients(model.dense_layers(), x, y, limbs)
        if not (list(got) == list(want) and all(same(got[k], want[k]) for k in want)
                and all(same(a, b) for a, b in zip(got_losses[0], want_losses[0], strict=True))):
            return f"tt_mlp_grads differs ({widths}, {m} rows, {limbs} limbs)"
    return None
