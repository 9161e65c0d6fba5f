"""The update's applications of a step's program: SGD, or Adam / AdamW with AdamW's clip
factor (the global norm's block maxima and block sums, the factor) and its schedule
position (``lr_step``). The learning rate at it is the batch tensor ``lr`` (the step's
rate, as the dropout key is the step's key), so the program is the same at every step."""

from __future__ import annotations

import math

import numpy as np

from ..errors import TraceError
from ..training.manifest import Manifest
from .program import BATCH, CLIP_WIDTH, Builder, Ref


def _f32(v: float) -> float:
    return float(np.float32(v))


def update(b: Builder, manifest: Manifest, grads: dict[str, Ref], params: list[str], lr_step: int) -> None:
    """The optimizer's applications, one a parameter and output (``b.updates`` maps each
    state tensor to the entry that gives its value after the step)."""
    spec = manifest.optimizer
    if spec.kind == "sgd":
        _sgd(b, spec, grads, params)
        return
    if spec.kind not in ("adam", "adamw"):
        raise TraceError(f"the program of a {spec.kind} update is not derived yet")
    decoupled = spec.kind == "adamw"
    clip = _clip_factor(b, spec.clip_norm, [grads[n] for n in params]) if decoupled and spec.clip_norm else None
    b1, b2 = _f32(spec.betas[0]), _f32(spec.betas[1])
    powers = [b.state_ref("optim.beta1_power"), b.state_ref("optim.beta2_power")]
    for ref, out in zip(powers, b.outputs("adam_powers", powers, [(), ()], "beta powers", beta1=b1, beta2=b2)):
        b.updates[ref.index] = out.index
    if decoupled:
        b.scalars["lr_step"] = int(lr_step)
    lr = Ref(BATCH, b.batch.index("lr"))
    for name in params:
        p = b.state_ref("model." + name)
        m, v = b.state_ref("optim.exp_avg." + name), b.state_ref("optim.exp_avg_sq." + name)
        inputs = [p, grads[name], m, v, *powers] + ([clip] if clip is not None else []) + [lr]
        refs = b.outputs("adam", inputs, [b.shape(p)] * 3, f"{name} update", lr=0.0,
                         weight_decay=_f32(spec.weight_decay), beta1=b1, beta2=b2, eps=_f32(spec.eps),
                         decoupled=int(decoupled), clipped=int(clip is not None))
        for state, out in zip((p, m, v), refs):
            b.updates[state.index] = out.index
    if decoupled:
        step = b.state_ref("optim.lr_step")
        b.updates[step.index] = b.add("increment", [step], (), "schedule position").index


def _clip_factor(b: Builder, clip_norm: float, grads: list[Ref]) -> Ref:
    """``min(1, clip_norm / (norm + 1e-6))`` of the gradients' global norm: the ranges'
    largest magnitudes, their sums of squares on the largest's grid, the factor (the norm is
    a metric no entry reads)."""
    sizes = [math.prod(b.shape(g)) for g in grads]
    count, ranges = sum(sizes), sum(-(-n // CLIP_WIDTH) for n in sizes)
    maxima = b.add("clip_max", grads, (ranges,), "clip: ranges' maxima", width=CLIP_WIDTH)
    sums = b.add("clip_sum", [*grads, maxima], (ranges,), "clip: ranges' sums of squares", width=CLIP_WIDTH,
                 count=count)
    return b.add("clip_factor", [maxima, sums], (), "clip: the factor", count=count, clip_norm_f64=float(clip_norm))


def _sgd(b: Builder, spec, grads: dict[str, Ref], params: list[str]) -> None:
    for name in params:
        p = b.state_ref("model." + name)
        buf = f"optim.momentum.{name}"
        inputs = [p, grads[name]] + ([b.state_ref(buf)] if buf in b.state else [])
        refs = b.outputs("sgd", inputs, [b.shape(p)] * (len(inputs) - 1), f"{name} update",
                         lr=spec.lr_at(0), weight_decay=_f32(spec.weight_decay), momentum=_f32(spec.momentum))
        b.updates[p.index] = refs[0].index
        if len(refs) > 1:
            b.updates[b.state_ref(buf).index] = refs[1].index
