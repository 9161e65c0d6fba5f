"""The step game's one-step openings of the kinds of StepKindsQuant, StepKindsNorm,
StepKindsOptim and StepKindsData (contracts/numerics/), in the order each kind takes them
(:mod:`.kind_names`; docs/onestep.md). ``ins`` are the entry's inputs as
:class:`.openings._Tensor` (tree, 2-D descriptor, range openings)."""

from __future__ import annotations

import math

import torch

from ..errors import TraceError
from ..numerics.clip import ranges
from . import kind_names as k

EMPTY = (b"", [])


def _whole(x):
    return x.open(0, x.rows * x.cols)


def _pool_window(shape, o: int) -> list[int]:
    """The flat indices of pooled element ``o``'s window in a (B, H, W, C) map."""
    _, h, w, c = shape
    n, rest = divmod(o, (h // 2) * (w // 2) * c)
    y, rest = divmod(rest, (w // 2) * c)
    x, ch = divmod(rest, c)
    first = ((n * h + 2 * y) * w + 2 * x) * c + ch
    return [first + ((t >> 1) * w + (t & 1)) * c for t in range(4)]


def openings_of(app, ins, element: int) -> list:
    """The openings of element ``element`` of entry ``app`` (its inputs ``ins``)."""
    kind, at = app.kind, app.attrs
    cols = app.shape[-1] if app.shape else 1
    i, j = divmod(element, cols)
    if kind == k.ROW_SCALES:
        return [ins[0].row(element)]
    if kind == k.WEIGHT_GRAD:
        return [_whole(x) for x in ins]
    if kind == k.WEIGHT_GRAD_TRANSPOSED:
        return [ins[0].row(i), ins[1].row(j), _whole(ins[2])]
    if kind == k.BMM:  # the operands as rows of K, part a_part / b_part of them
        batches, (m, p), ka = math.prod(app.shape[:-2]), app.shape[-2:], ins[0].cols
        i = at["a_part"] * batches * m + element // p
        j = at["b_part"] * batches * p + element // (m * p) * p + element % p
        return [ins[0].open(i * ka, ka), ins[1].open(j * ka, ka)]
    if kind in (k.GELU, k.GELU_BACKWARD, k.FEDAVG, k.DILOCO):
        return [x.open(element) for x in ins]
    if kind == k.LAYERNORM:
        return [ins[0].row(i), ins[1].open(j), ins[2].open(j)]
    if kind == k.LAYERNORM_BACKWARD:
        return [ins[0].row(i), ins[1].row(i), _whole(ins[2])]
    if kind == k.ADAM:
        return [x.open(element) for x in ins[:4]] + [x.open(0) for x in ins[4:]] + [EMPTY] * (7 - len(ins))
    if kind == k.ADAM_POWERS:
        return [x.open(0) for x in ins]
    if kind == k.INCREMENT:  # the int64 word pair, high first
        return [ins[0].open(0, 2)]
    if kind in (k.CLIP_MAX, k.CLIP_SUM):
        grads = ins if kind == k.CLIP_MAX else ins[:-1]
        t, start, count = ranges([x.rows * x.cols for x in grads], at["width"])[element]
        return [grads[t].open(start, count)] + ([] if kind == k.CLIP_MAX else [_whole(ins[-1])])
    if kind == k.CLIP_FACTOR:
        return [_whole(x) for x in ins]
    if kind == k.EMBEDDING:
        row = int(ins[0].t.reshape(-1).view(torch.int32)[i])
        return [ins[0].open(i), ins[1].open(row * ins[1].cols + j)]
    if kind == k.SCATTER:
        return [ins[0].row(j), _whole(ins[1])]
    if kind == k.DROPOUT:
        return [ins[0].open(element), ins[1].open(0, 8)]
    if kind == k.POOL:
        return [ins[0].open(s) for s in _pool_window(at["shape"], element if app.output == 0 else element // 4)]
    if kind == k.UNPOOL:
        _, h, w, c = at["shape"]
        n, rest = divmod(element, h * w * c)
        y, rest = divmod(rest, w * c)
        x, ch = divmod(rest, c)
        src = ((n * (h // 2) + y // 2) * (w // 2) + x // 2) * c + ch
        return [ins[0].open(src), ins[1].open(4 * src + 2 * (y % 2) + x % 2)]
    raise TraceError(f"no step-game opening for the kind {kind!r} here")
