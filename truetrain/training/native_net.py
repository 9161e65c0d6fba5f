"""A small classifier's repro gradients in one C call (``net_kernels.c``).

On the digits models (the MLP 64-128-10, the CNN [8, 16] k3, batch 64) a step spent most
of its time in Python and dispatch: autograd nodes, the weights quantised twice, masks,
patches, pooling, the loss and the book's bookkeeping, each a few small torch calls.
:func:`gradients` runs a whole batch in one piece as one call of the same C kernels the
small route uses (:mod:`native_linear`, :mod:`native`'s quantiser, patches, pooling and
softmax cross-entropy), in the same order on the same operands, so the bits are that
route's (and so every route's). Taken by :func:`~.ops.repro_gradients` for a model that
lists its layers (``fused_layers``) when every op would take the small C route anyway.
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
_local = threading.local()  # each thread's scratch by plan: {plan: (plan tensor, doubles, floats)}


def declare(lib: ctypes.CDLL) -> None:
    """The C signatures (called by :func:`native._load`)."""
    p, i32 = ctypes.c_void_p, ctypes.c_int
    lib.tt_net_scratch.argtypes = [p, p, p]
    lib.tt_net_scratch.restype = i32
    lib.tt_net_grads.argtypes = [p, i32, p, p, p, p, i32, p, p, p, p, p, p, p]
    lib.tt_net_grads.restype = i32


def _rows(layer) -> int:
    """Rows a layer's product has per sample: a conv layer's positions, else 1."""
    return layer[4][1] * layer[4][2] if len(layer) > 4 else 1


def usable(net, inputs: torch.Tensor, targets: torch.Tensor, engine, limbs: int) -> bool:
    """Whether every op of the step would take the small C route: a fused CPU engine with
    the C kernels, float32 rows (m, features) with m labels, contiguous trainable float32
    weights and biases, every tensor small and every product exact."""
    kernel, layers = net
    m = inputs.shape[0] if inputs.dim() == 2 else 0
    if not (engine.fuse and engine.device == "cpu" and m and inputs.dtype == F32 and inputs.device.type == "cpu"
            and targets.dim() == 1 and targets.numel() == m and not targets.is_floating_point() and native.ready()):
        return False
    small = intgemm_fused.min_elements()
    for layer in layers:
        w, b = layer[2], layer[3]
        if not (b is not None and b.shape == (w.shape[0],) and all(
                t.dtype == F32 and t.device.type == "cpu" and t.is_contiguous() and t.requires_grad for t in (w, b))):
            return False
        rows, n, k = m * _rows(layer), w.shape[0], w.numel() // w.shape[0]
        if not (rows * w.numel() < engine.small_product and w.numel() < min(native_planes.MIN_ELEMENTS, small)
                and rows * max(n, k) < small and all(native_linear.exact(s, limbs) for s in (rows, n, k))):
            return False
    return True


def _plan(net, m: int) -> tuple[int, ...]:
    """The kernel's plan: [convs, dense layers, kernel, rows, (c, h, w, o) per conv, the
    dense widths, each layer's bias-sum bits]."""
    kernel, layers = net
    convs = [layer for layer in layers if len(layer) > 4]
    dense = layers[len(convs):]
    shape = [len(convs), len(dense), kernel, m]
    for _, _, w, _, (c, h, wd) in convs:
        shape += [c, h, wd, w.shape[0]]
    shape += [dense[0][2].shape[1], *[w.shape[0] for _, _, w, _ in dense]]
    return tuple(shape + [sum_bits(m * _rows(layer), 0) for layer in layers])


def _scratch(lib, plan: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(plan as int64, float64 scratch, float32 scratch)``, this thread's, kept per plan."""
    plans = getattr(_local, "plans", None)
    if plans is None:
        plans = _local.plans = {}
    if plan not in plans:
        if len(plans) >= 8:  # shapes change rarely (a task's batch size is fixed)
            plans.clear()
        shape = torch.tensor(plan, dtype=I64)
        doubles, floats = ctypes.c_int64(), ctypes.c_int64()
        if lib.tt_net_scratch(shape.data_ptr(), ctypes.byref(doubles), ctypes.byref(floats)):
            raise MemoryError(f"tt_net_scratch: a plan of {plan[0] + plan[1]} layers is too long")
        plans[plan] = (shape, torch.empty(doubles.value, dtype=F64), torch.empty(floats.value, dtype=F32))
    return plans[plan]


def _addresses(tensors) -> ctypes.Array:
    return (ctypes.c_void_p * len(tensors))(*[t.data_ptr() for t in tensors])


def gradients(net, inputs: torch.Tensor, targets: torch.Tensor, limbs: int):
    """``(grads, [(sumexp, target)])`` of the mean cross-entropy of a classifier on a batch
    in one piece, as :func:`~.ops.repro_gradients` gives them (see :func:`usable`). ``net``:
    ``(kernel, layers)``, each layer ``(weight name, bias name, weight, bias)`` and for a
    conv layer its input map's ``(channels, height, width)``, conv layers first."""
    lib = native._state["lib"]
    layers = net[1]
    m, classes = inputs.shape[0], layers[-1][2].shape[0]
    for layer in layers:  # what the book checks
        check_contraction(m * _rows(layer), limbs)
    shape, dscratch, fscratch = _scratch(lib, _plan(net, m))
    flat = torch.empty(sum(layer[2].numel() + layer[3].numel() for layer in layers), dtype=F32)
    dws, dbs, at = [], [], 0
    for _, _, w, b, *_ in layers:
        dws.append(flat[at:at + w.numel()].view(w.shape))
        dbs.append(flat[at + w.numel():at + w.numel() + b.numel()])
        at += w.numel() + b.numel()
    losses = torch.empty(2 * m, dtype=F64)
    x, y = inputs.contiguous(), targets.to(I64).contiguous()
    rc = lib.tt_net_grads(
        shape.data_ptr(), operand_bits(limbs), x.data_ptr(), y.data_ptr(), _addresses([la[2] for la in layers]),
        _addresses([la[3] for la in layers]), EXACT_BITS - ceil_log2(classes), native.exp_coeffs().data_ptr(),
        dscratch.data_ptr(), fscratch.data_ptr(), _addresses(dws), _addresses(dbs), losses.data_ptr(),
        losses.data_ptr() + 8 * m)
    if rc == -2:
        raise IndexError(f"softmax_xent: a label outside [0, {classes})")
    if rc != 0:
        raise MemoryError("tt_net_grads: no scratch memory")
    grads = {}
    for layer, dw, db in reversed(list(zip(layers, dws, dbs, strict=True))):  # the book's order
        grads[layer[0]], grads[layer[1]] = dw, db
    return grads, [(losses[:m], losses[m:])]


def self_test(gen: torch.Generator, same) -> str | None:
    """Whether :func:`gradients` gives the bits of the op library's torch ops (the float64
    engine): None, or what differs (``same``: native's bit-for-bit comparison)."""
    from .intgemm import GemmEngine
    from .models import build_model, init_params, parse_model_spec
    from .ops import ReproStep

    cases = ((2, {"kind": "mlp", "widths": [7, 13, 5, 3]}, 9), (3, {"kind": "mlp", "widths": [5, 17, 4]}, 1),
             (2, {"kind": "cnn", "in_shape": [2, 4, 8], "channels": [3, 5], "kernel": 3, "hidden": [6],
                  "classes": 3}, 5))
    for limbs, raw, m in cases:
        model = build_model(spec := parse_model_spec(raw), init_params(spec, 3))
        next(iter(model.parameters())).data[1] = -0.0
        x = torch.randn(m, spec.features, generator=gen) * torch.logspace(-6, 6, spec.features)
        x[0, :2], x[-1] = torch.tensor([0.0, -0.0]), -0.0  # (NaN rows: tests/training/test_native_net.py)
        y = torch.arange(m) % spec.classes
        step, want_losses = ReproStep(GemmEngine("cpu", "float64"), limbs, m), []
        with torch.enable_grad():  # the first use may come inside an autograd node's forward
            model.loss(x, y, step, m, want_losses).backward()
        want = step.book.result()
        got, got_losses = gradients(model.fused_layers(), x, y, limbs)
        if not (list(got) == list(want) and all(same(got[k], want[k]) for k in want)
                and all(same(a, b) for a, b in zip(got_losses[0], want_losses[0], strict=True))):
            return f"tt_net_grads differs ({raw['kind']}, {m} rows, {limbs} limbs)"
    return None
