"""Optimizers: reproducible SGD (momentum, weight decay), Adam and AdamW (decoupled weight
decay, warm-up and cosine schedule, global gradient-norm clipping), and stock state mapping.

Repro updates are float32 elementwise + - * / and ``sqrt32`` (correctly rounded on every
device, which ``torch.sqrt`` is not), each its own kernel (no ``alpha=``,
``addcdiv`` or ``lerp``, which may fuse a multiply-add), with every hyperparameter first
rounded to float32, so they round the same on any device. Adam's bias corrections use
running products ``beta1_power``/``beta2_power`` kept in the state (no ``pow``).

State tensor names (all float32, in the checkpoint under ``optim.``):

* sgd with momentum > 0: ``momentum.<param>``;
* adam: ``exp_avg.<param>``, ``exp_avg_sq.<param>``, ``beta1_power``, ``beta2_power``
  (0-dim, start at 1); stock Adam keeps ``step`` (int64, 0-dim) instead of the powers;
* adamw: as adam, plus ``lr_step`` (int64, 0-dim): the job's global inner step, the
  position in the learning-rate schedule (``schedule.py``), set at task start to
  ``round * steps_per_task``.

Each task starts from a fresh state (see docs/checkpoint-format.md, "Aggregation").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .repro_ops import sqrt32
from .schedule import clip_factor, lr_factor


@dataclass(frozen=True)
class OptimizerSpec:
    """Validated optimizer settings from the manifest."""

    kind: str  # "sgd" | "adam" | "adamw"
    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    warmup_steps: int = 0  # adamw: linear warm-up over this many global inner steps
    total_steps: int = 0  # adamw: where the cosine reaches min_lr_ratio (the manifest sets it)
    min_lr_ratio: float = 1.0  # adamw: the floor of the schedule, a multiple of lr
    clip_norm: float = 0.0  # adamw: global gradient-norm clip (0: none)

    def lr_at(self, step: int) -> float:
        """The float32 learning rate at global inner step ``step``."""
        if self.kind != "adamw":
            return _f32(self.lr)
        return _f32(self.lr * lr_factor(step, self.warmup_steps, self.total_steps, self.min_lr_ratio))


def _f32(v: float) -> float:
    """The float32 value nearest ``v``, as a Python float (exact in float64)."""
    return float(np.float32(v))


def init_state(spec: OptimizerSpec, params: dict[str, torch.Tensor], stock: bool = False,
               lr_step: int = 0):
    """Fresh optimizer state for ``params`` (same device); ``lr_step``: where an adamw
    schedule starts."""
    state: dict[str, torch.Tensor] = {}
    if spec.kind == "adamw":
        state["lr_step"] = torch.tensor(lr_step, dtype=torch.int64)
    if spec.kind == "sgd":
        if spec.momentum > 0:
            for name, p in params.items():
                state["momentum." + name] = torch.zeros_like(p)
        return state
    for name, p in params.items():
        state["exp_avg." + name] = torch.zeros_like(p)
        state["exp_avg_sq." + name] = torch.zeros_like(p)
    device = next(iter(params.values())).device
    if stock:
        state["step"] = torch.zeros((), dtype=torch.int64)
    else:
        state["beta1_power"] = torch.ones((), dtype=torch.float32, device=device)
        state["beta2_power"] = torch.ones((), dtype=torch.float32, device=device)
    return state


def repro_update(spec: OptimizerSpec, params, grads, state, clip: torch.Tensor | None = None) -> None:
    """One reproducible update of ``params`` and ``state`` in place. ``clip``: adamw's clip
    factor where it is computed over more gradients than ``grads`` (a pipeline's stages
    share one over all theirs, ``pipeline/stage.py``); by default it is ``grads``'s own."""
    lr, wd = _f32(spec.lr), _f32(spec.weight_decay)
    if spec.kind == "sgd":  # g (+ p * wd); buf = buf * mu + g; p -= buf * lr: one op over all tensors each
        mu = _f32(spec.momentum)
        ps, gs = list(params.values()), [grads[name] for name in params]
        if wd:
            gs = torch._foreach_add(gs, torch._foreach_mul(ps, wd))
        if mu:
            bufs = [state["momentum." + name] for name in params]
            torch._foreach_mul_(bufs, mu)
            torch._foreach_add_(bufs, gs)
            gs = bufs
        torch._foreach_sub_(ps, torch._foreach_mul(gs, lr))
        return
    decoupled = spec.kind == "adamw"
    if decoupled:
        step = int(state["lr_step"])
        lr = spec.lr_at(step)
        state["lr_step"].fill_(step + 1)
        decay = _f32(lr * wd)  # p -= p * (lr * wd): the weight decay, apart from the gradient
        if spec.clip_norm:
            factor = clip if clip is not None else clip_factor([grads[name] for name in params], spec.clip_norm)
            grads = {name: grads[name] * factor for name in params}
    b1, b2, eps = _f32(spec.betas[0]), _f32(spec.betas[1]), _f32(spec.eps)
    omb1, omb2 = _f32(np.float32(1) - np.float32(b1)), _f32(np.float32(1) - np.float32(b2))
    b1p = state["beta1_power"].mul_(b1)
    b2p = state["beta2_power"].mul_(b2)
    step_size = lr / (1.0 - b1p)  # float32 0-dim tensors: float32 arithmetic
    bc2_sqrt = sqrt32(1.0 - b2p)
    for name, p in params.items():
        g = grads[name]
        if decoupled and decay:
            p.sub_(p * decay)
        elif wd:
            g = g + p * wd
        m = state["exp_avg." + name]
        v = state["exp_avg_sq." + name]
        m.mul_(b1).add_(g * omb1)
        v.mul_(b2).add_((g * g) * omb2)
        denom = sqrt32(v) / bc2_sqrt + eps
        p.sub_((m / denom) * step_size)


def build_stock_optimizer(spec: OptimizerSpec, module: torch.nn.Module, state):
    """A ``torch.optim`` optimizer for ``module`` loaded from our named ``state``."""
    named = dict(module.named_parameters())
    if spec.kind == "sgd":
        opt = torch.optim.SGD(named.values(), lr=spec.lr, momentum=spec.momentum,
                              weight_decay=spec.weight_decay)
        for name, p in named.items():
            if "momentum." + name in state:
                opt.state[p]["momentum_buffer"] = state["momentum." + name].clone()
        return opt
    kind = torch.optim.AdamW if spec.kind == "adamw" else torch.optim.Adam
    opt = kind(named.values(), lr=spec.lr_at(int(state.get("lr_step", 0))), betas=spec.betas, eps=spec.eps,
               weight_decay=spec.weight_decay)
    step = int(state["step"]) if "step" in state else 0
    if step:
        for name, p in named.items():
            opt.state[p] = {"step": torch.tensor(float(step)),
                            "exp_avg": state["exp_avg." + name].clone(),
                            "exp_avg_sq": state["exp_avg_sq." + name].clone()}
    return opt


def stock_step(spec: OptimizerSpec, module: torch.nn.Module, opt, state) -> None:
    """One ``torch.optim`` step (after ``backward``), with adamw's schedule and clipping
    done the stock way (``clip_grad_norm_``)."""
    if spec.kind == "adamw":
        step = int(state["lr_step"])
        for group in opt.param_groups:
            group["lr"] = spec.lr_at(step)
        if spec.clip_norm:
            torch.nn.utils.clip_grad_norm_(module.parameters(), spec.clip_norm)
        state["lr_step"].fill_(step + 1)
    opt.step()


def export_stock_state(spec: OptimizerSpec, module: torch.nn.Module, opt, params_like, lr_step=None):
    """Our named state from a ``torch.optim`` optimizer (zeros where it has none yet)."""
    state = init_state(spec, params_like, stock=True)
    if lr_step is not None and "lr_step" in state:
        state["lr_step"] = lr_step.detach().clone()
    for name, p in module.named_parameters():
        st = opt.state.get(p, {})
        if spec.kind == "sgd" and "momentum_buffer" in st and st["momentum_buffer"] is not None:
            state["momentum." + name] = st["momentum_buffer"].detach().clone()
        if spec.kind in ("adam", "adamw") and st:
            state["exp_avg." + name] = st["exp_avg"].detach().clone()
            state["exp_avg_sq." + name] = st["exp_avg_sq"].detach().clone()
            state["step"] = torch.tensor(int(st["step"]), dtype=torch.int64)
    return state
