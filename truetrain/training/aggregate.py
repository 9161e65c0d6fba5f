"""Aggregation: the next global model from a round's results.

FedAvg (a manifest without ``outer``): the samples-weighted mean of the workers' models.
DiLoCo (``outer``): the pseudo-gradient ``start - mean`` (the round's global model minus
that mean) drives an outer SGD step with Nesterov momentum, whose momentum buffer lives in
the global checkpoint (``outer.momentum.<param>``, zero before the first round).

Only model parameters are averaged; the inner optimizer state is not carried across rounds
(every task starts with a fresh state, see ``trainer.start_checkpoint``). The mean is
computed elementwise in float64 in a fixed order (ascending task index): each term
``w * x`` is exact (w < 2**29 samples, x float32), the running sum rounds in that order,
the division by the total weight rounds once more. FedAvg rounds it once to float32; the
outer step takes ``float32(start - mean)`` and then float32 multiplies and adds, each its
own kernel. All of it is elementwise, so any device gives the same bits.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import TrainingError
from .checkpoint import Checkpoint
from .manifest import Manifest, load_manifest
from .rng import derive_key
from .trainer import _check_params, as_checkpoint

_MAX_WEIGHT = 2**29


@dataclass(frozen=True)
class Contribution:
    """One verified task result to average: its index in the round, weight, checkpoint."""

    task_index: int
    samples: int
    checkpoint: Checkpoint | bytes


def global_checkpoint(manifest: Manifest, rounds_done: int,
                      model_params: dict[str, torch.Tensor]) -> Checkpoint:
    """A global model checkpoint: step = rounds completed, model tensors only."""
    tensors = {"model." + k: v.detach().cpu().clone() for k, v in model_params.items()}
    return Checkpoint(rounds_done, derive_key(manifest.seed, "global", rounds_done), tensors)


def aggregate(manifest, round_index: int, contributions, start=None) -> Checkpoint:
    """Global checkpoint after round ``round_index`` (its step is ``round_index + 1``).

    ``contributions``: :class:`Contribution` objects or ``TaskResult``s (their
    ``shard_index``, ``samples_trained`` and final checkpoint are used). ``start``: the
    round's global checkpoint, which a DiLoCo manifest's outer step needs (None in round 0
    without an initial checkpoint: the seed's model).
    """
    manifest = load_manifest(manifest)
    items = []
    for c in contributions:
        if hasattr(c, "samples_trained"):
            c = Contribution(c.shard_index, c.samples_trained, c.final_checkpoint)
        items.append(c)
    if not items:
        raise TrainingError("aggregate needs at least one contribution")
    items.sort(key=lambda c: c.task_index)
    indices = [c.task_index for c in items]
    if len(set(indices)) != len(indices):
        raise TrainingError(f"duplicate task indices in aggregation: {indices}")
    total = 0
    acc: dict[str, torch.Tensor] | None = None
    for c in items:
        if not 0 < int(c.samples) < _MAX_WEIGHT:
            raise TrainingError(f"task {c.task_index}: samples must be in [1, 2**29)")
        params = as_checkpoint(c.checkpoint).group("model")
        _check_params(manifest, params)
        w = float(c.samples)
        total += int(c.samples)
        if acc is None:
            acc = {k: torch.zeros(v.shape, dtype=torch.float64) for k, v in params.items()}
        for name, value in params.items():
            acc[name] += value.to(torch.float64) * w
    mean = {k: v / float(total) for k, v in acc.items()}
    if manifest.outer is None:
        return global_checkpoint(manifest, round_index + 1, {k: v.to(torch.float32) for k, v in mean.items()})
    return _outer_step(manifest, round_index, mean, start)


def _f32(v: float) -> float:
    return float(torch.tensor(v, dtype=torch.float32))


def _outer_step(manifest: Manifest, round_index: int, mean: dict, start) -> Checkpoint:
    """DiLoCo's outer step: ``delta = start - mean``; ``v = mu * v + delta``; Nesterov
    ``g = delta + mu * v`` (else ``g = v``); ``model = start - lr * g``."""
    if start is None:
        from .task import initial_model

        start = initial_model(manifest)
    start = as_checkpoint(start)
    params = start.group("model")
    _check_params(manifest, params)
    momentum = start.group("outer.momentum")
    outer = manifest.outer
    lr, mu = _f32(outer.lr), _f32(outer.momentum)
    model, buffers = {}, {}
    for name, theta in params.items():
        delta = (theta.to(torch.float64) - mean[name]).to(torch.float32)
        v = momentum.get(name, torch.zeros_like(theta)) * mu + delta
        g = delta + v * mu if outer.nesterov else v
        model[name] = theta - g * lr
        buffers[name] = v
    ckpt = global_checkpoint(manifest, round_index + 1, model)
    ckpt.tensors.update({"outer.momentum." + k: v for k, v in buffers.items()})
    return ckpt
