"""The training loop: steps from a checkpoint, periodic checkpoints, replay.

A step is a pure function of the checkpoint (parameters, optimizer state, step, RNG key),
the manifest and the shard: the batch is ``rng.batch_indices(rng_key, n, batch, step)``
and, in ``repro`` mode, the gradient and update are bit-exact (``ops``, ``optim``).
So re-running steps k..k+m from checkpoint k gives checkpoint k+m bit for bit, which is
what a verifier or referee does (:func:`replay`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from ..errors import CheckpointError, DatasetError, ReproducibilityError, TrainingError
from .checkpoint import Checkpoint, decode_checkpoint
from .datasets import Shard, decode_shard
from .gemm_check import engine_for
from .intgemm import GemmEngine
from .manifest import Manifest, load_manifest
from .models import build_model, param_shapes
from .ops import repro_gradients
from .optim import build_stock_optimizer, export_stock_state, init_state, repro_update, stock_step
from .repro_ops import xent_loss
from .rng import batch_indices, subkey
from .text import TextShard


DROPOUT_DOMAIN = 0x64726F70  # "drop": the dropout keys' branch of a task's RNG key


def as_shard(data, manifest: Manifest | None = None):
    """A :class:`Shard` (classification) or a :class:`TextShard` (a manifest's LM), from
    shard bytes or as given."""
    if isinstance(data, (Shard, TextShard)):
        return data
    if manifest is not None and manifest.model.kind == "lm":
        return TextShard.from_bytes(data)
    return decode_shard(data)


def as_checkpoint(data) -> Checkpoint:
    return data if isinstance(data, Checkpoint) else decode_checkpoint(data)


def start_checkpoint(manifest: Manifest, model_params: dict[str, torch.Tensor],
                     rng_key: bytes, lr_step: int = 0) -> Checkpoint:
    """Step-0 checkpoint of a task: the given model, fresh optimizer state (a schedule
    starting at global inner step ``lr_step``), the task key."""
    params = {k: v.detach().cpu().clone() for k, v in model_params.items()}
    _check_params(manifest, params)
    state = init_state(manifest.optimizer, params, stock=not manifest.repro, lr_step=lr_step)
    tensors = {"model." + k: v for k, v in params.items()}
    tensors.update({"optim." + k: v.cpu() for k, v in state.items()})
    return Checkpoint(0, rng_key, tensors)


def _check_params(manifest: Manifest, params: dict[str, torch.Tensor]) -> None:
    want = param_shapes(manifest.model)
    if set(params) != set(want):
        raise CheckpointError(f"checkpoint parameters {sorted(params)} do not match the "
                              f"model's {sorted(want)}")
    for name, shape in want.items():
        if tuple(params[name].shape) != shape or params[name].dtype != torch.float32:
            raise CheckpointError(f"{name}: expected float32 {shape}, got "
                                  f"{params[name].dtype} {tuple(params[name].shape)}")


class BatchFeed:
    """A shard's training batches on a device: batch ``t`` of a task is a pure function of
    (shard, task RNG key, t). For a language model, windows of ``seq_len + 1`` bytes
    (inputs and their next bytes); for a classifier, rows and labels."""

    def __init__(self, manifest: Manifest, shard, device):
        spec = manifest.model
        self.m, self.device = manifest, device
        self.lm = spec.kind == "lm"
        if self.lm:
            if not isinstance(shard, TextShard) or len(shard) < spec.seq_len + 1:
                raise DatasetError(f"a text shard of at least {spec.seq_len + 1} bytes is needed "
                                   f"(sequence length {spec.seq_len} + 1)")
            self.tokens = torch.from_numpy(shard.tokens.copy()).to(self.device)
            self.n = len(shard) - spec.seq_len  # windows of seq_len + 1 bytes
        else:
            if not isinstance(shard, Shard) or shard.x.shape[1] != spec.features:
                raise DatasetError(f"shard has {getattr(shard, 'x', np.zeros((0, 0))).shape[1]} features, "
                                   f"model wants {spec.features}")
            if int(shard.y.max()) >= spec.classes:
                raise DatasetError(f"shard label {int(shard.y.max())} >= classes {spec.classes}")
            self.x = torch.from_numpy(shard.x).to(self.device)
            self.y = torch.from_numpy(shard.y).to(self.device)
            self.n = len(shard)
        self._perm_cache: dict = {}

    def batch(self, rng_key: bytes, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(inputs, targets)`` of step ``step``."""
        idx = batch_indices(rng_key, self.n, self.m.batch_size, step, self._perm_cache)
        idx = torch.from_numpy(idx).to(self.device)
        if self.lm:
            seq = self.m.model.seq_len
            window = self.tokens[idx.unsqueeze(1) + torch.arange(seq + 1, device=self.device)].long()
            return window[:, :-1], window[:, 1:]
        return self.x.index_select(0, idx), self.y.index_select(0, idx)


class TrainRun:
    """Live training state on one device, advanced one step at a time.

    ``engine`` overrides the device's GEMM engine (benchmarks compare routes in one
    process); every engine gives the same bits.
    """

    def __init__(self, manifest: Manifest, shard, ckpt: Checkpoint, *,
                 device=None, micro_batch: int | None = None, engine: GemmEngine | None = None):
        self.m = manifest
        spec = manifest.model
        self.device = torch.device(device or "cpu")
        self.lm = spec.kind == "lm"
        self.feed = BatchFeed(manifest, shard, self.device)
        self.step, self.rng_key = ckpt.step, ckpt.rng_key
        self.micro_batch = micro_batch
        params = ckpt.group("model")
        _check_params(manifest, params)
        state = ckpt.group("optim")
        fresh = init_state(manifest.optimizer, params, stock=not manifest.repro)
        if set(state) != set(fresh):
            raise CheckpointError(f"optimizer state {sorted(state)} does not match "
                                  f"{manifest.optimizer.kind}'s {sorted(fresh)}")
        self.state = {k: v.to(self.device).clone() for k, v in state.items()}
        self._losses: list = []
        if manifest.repro:  # the module's parameters are the ones updated
            self.module = build_model(spec, params).to(self.device)
            self.params = {k: p.data for k, p in self.module.named_parameters()}
            self.engine = engine or engine_for(self.device)
        else:
            self.params = {k: v.to(self.device).clone() for k, v in params.items()}
            self.module = build_model(spec, self.params).to(self.device)
            self.opt = build_stock_optimizer(manifest.optimizer, self.module, self.state)

    def run_step(self) -> None:
        xb, yb = self.feed.batch(self.rng_key, self.step)
        if self.lm and self.m.model.dropout:  # this step's dropout mask
            self.module.dropout_key = subkey(self.rng_key, DROPOUT_DOMAIN, self.step)
        if self.m.repro:
            grads, parts = self.gradients(xb, yb)
            repro_update(self.m.optimizer, self.params, grads, self.state)
            self._losses.append(parts[0] if len(parts) == 1 else tuple(torch.cat(t) for t in zip(*parts)))
        else:
            self.opt.zero_grad(set_to_none=True)
            loss = self.module.loss(xb, yb)
            loss.backward()
            stock_step(self.m.optimizer, self.module, self.opt, self.state)
            self._losses.append(loss.detach())
        self.step += 1

    def gradients(self, inputs: torch.Tensor, targets: torch.Tensor):
        """Repro ``(grads, loss parts)`` of the batch (``distributed.ShardedRun``: this
        rank's share, the whole batch's gradients)."""
        return repro_gradients(self.module, inputs, targets, self.engine, self.m.limbs, self.micro_batch)

    def take_losses(self) -> float:
        """Mean training loss since the last call (NaN if no step ran); checks finiteness."""
        if not self._losses:
            return float("nan")
        if self.m.repro:
            loss = xent_loss(torch.cat([s for s, _ in self._losses]),
                             torch.cat([t for _, t in self._losses]))
            value = float(loss.mean())
        else:
            value = float(torch.stack(self._losses).mean())
        self._losses = []
        if not np.isfinite(value):
            raise ReproducibilityError(f"training diverged: loss is {value} at step "
                                       f"{self.step}")
        return value

    def checkpoint(self) -> Checkpoint:
        """The current state as a CPU checkpoint (refuses inf/NaN in repro mode)."""
        if self.m.repro:
            params, state = self.params, self.state
        else:
            params = {k: v.detach() for k, v in self.module.state_dict().items()}
            state = export_stock_state(self.m.optimizer, self.module, self.opt, params,
                                       self.state.get("lr_step"))
        tensors = {"model." + k: v.detach().cpu().clone() for k, v in params.items()}
        tensors.update({"optim." + k: v.detach().cpu().clone() for k, v in state.items()})
        if self.m.repro:
            for name, t in tensors.items():
                if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                    raise ReproducibilityError(f"{name} holds inf or NaN at step {self.step}")
        return Checkpoint(self.step, self.rng_key, tensors)


def train(manifest, shard, ckpt, steps: int, *, every: int | None = None,
          micro_batch: int | None = None, device=None,
          on_checkpoint: Callable[[Checkpoint], None] | None = None):
    """Run ``steps`` steps from ``ckpt``; return ``(checkpoints, losses)``.

    ``checkpoints`` holds ``ckpt`` itself and the state after every ``every`` steps
    (default: only the end), ``losses`` the mean training loss of each interval.
    """
    manifest = load_manifest(manifest)
    ckpt = as_checkpoint(ckpt)
    if steps < 0:
        raise TrainingError("steps must be >= 0")
    every = every or steps or 1
    run = TrainRun(manifest, as_shard(shard, manifest), ckpt, device=device, micro_batch=micro_batch)
    checkpoints, losses = [ckpt], []
    for i in range(1, steps + 1):
        run.run_step()
        if i % every == 0 or i == steps:
            losses.append(run.take_losses())
            checkpoints.append(run.checkpoint())
            if on_checkpoint is not None:
                on_checkpoint(checkpoints[-1])
    return checkpoints, losses


def replay(manifest, shard_data, checkpoint_at_k, steps: int, *,
           micro_batch: int | None = None, device=None) -> Checkpoint:
    """Recompute ``steps`` steps from a checkpoint at step k: the checkpoint at k+steps."""
    return train(manifest, shard_data, checkpoint_at_k, steps, micro_batch=micro_batch,
                 device=device)[0][-1]
