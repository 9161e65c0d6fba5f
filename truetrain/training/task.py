"""Task-level API for the worker and verifier daemons: run a task, evaluate a checkpoint."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import DatasetError, TrainingError
from ..hashing import keccak256
from .aggregate import global_checkpoint
from .checkpoint import Checkpoint
from .datasets import Shard, decode_shard
from .manifest import Manifest, load_manifest
from .merkle import merkle_root
from .models import build_model, init_params
from . import intgemm_fused
from .gemm_check import engine_for
from .ops import ReproStep
from .repro_ops import first_argmax
from .rng import derive_key
from .text import TextShard
from .trainer import TrainRun, as_checkpoint, as_shard, start_checkpoint, train


@dataclass(frozen=True)
class TaskResult:
    """What a worker commits to and publishes for one task."""

    shard_index: int
    round: int
    checkpoint_hashes: list[bytes]  # checkpoints 0, I, 2I, ..., K
    merkle_root: bytes
    checkpoints: list[bytes] = field(repr=False)  # their canonical bytes, same order
    samples_trained: int
    metrics: dict

    @property
    def final_checkpoint(self) -> bytes:
        return self.checkpoints[-1]


def task_rng_key(manifest: Manifest, round_index: int, shard_index: int) -> bytes:
    """The batch-order key of task (round, shard): part of its checkpoint 0."""
    return derive_key(manifest.seed, "batches", round_index, shard_index)


def initial_model(manifest) -> Checkpoint:
    """Global checkpoint 0 initialised from the manifest's seed."""
    manifest = load_manifest(manifest)
    return global_checkpoint(manifest, 0, init_params(manifest.model, manifest.seed))


def task_start(manifest, start_checkpoint_data, shard_index: int,
               round_index: int) -> Checkpoint:
    """Checkpoint 0 of a task: the round's global model, fresh optimizer, task key."""
    manifest = load_manifest(manifest)
    if start_checkpoint_data is None:
        if manifest.initial_checkpoint is not None:
            raise TrainingError("the manifest names an initial checkpoint: pass its bytes")
        start = initial_model(manifest)
    else:
        start = as_checkpoint(start_checkpoint_data)
    return start_checkpoint(manifest, start.group("model"),
                            task_rng_key(manifest, round_index, shard_index),
                            lr_step=round_index * manifest.steps_per_task)


def run_task(manifest, shard_bytes: bytes, start_checkpoint_data, shard_index: int,
             round_index: int, *, micro_batch: int | None = None, device=None,
             devices: int = 1) -> TaskResult:
    """Train task (round, shard) for ``steps_per_task`` steps, checkpointing every
    ``checkpoint_interval``; commit to the checkpoints with a Merkle root.

    ``start_checkpoint_data``: the round's global checkpoint (bytes or Checkpoint), or None
    in round 0 to initialise from the seed. ``micro_batch`` and ``device`` change speed and
    memory, never the bits (repro mode; stock mode ignores ``micro_batch``). ``devices``
    > 1 trains a repro task data-parallel on that many ranks (at most one a batch sample):
    CPU processes, or GPUs when ``device`` is a CUDA one (``launch``); the same bits.
    """
    manifest = load_manifest(manifest)
    if not 0 <= shard_index < len(manifest.shards):
        raise TrainingError(f"shard index {shard_index} out of range")
    if not 0 <= round_index < manifest.rounds:
        raise TrainingError(f"round {round_index} out of range")
    if keccak256(bytes(shard_bytes)) != manifest.shards[shard_index].hash:
        raise DatasetError(f"shard {shard_index} bytes do not match the manifest's hash")
    ckpt0 = task_start(manifest, start_checkpoint_data, shard_index, round_index)
    if devices > 1 and manifest.repro:
        from .launch import train_distributed

        checkpoints, losses = train_distributed(
            manifest, shard_bytes, ckpt0, manifest.steps_per_task, world=min(devices, manifest.batch_size),
            device_type="cuda" if str(device or "cpu").startswith("cuda") else "cpu",
            every=manifest.checkpoint_interval, micro_batch=micro_batch)
    else:
        checkpoints, losses = train(manifest, as_shard(shard_bytes, manifest), ckpt0,
                                    manifest.steps_per_task, every=manifest.checkpoint_interval,
                                    micro_batch=micro_batch, device=device)
    encoded = [c.to_bytes() for c in checkpoints]
    hashes = [c.hash() for c in checkpoints]
    metrics = {"train_loss": losses, "final_train_loss": losses[-1],
               "steps": manifest.steps_per_task, "numeric_mode": manifest.numeric_mode}
    return TaskResult(shard_index, round_index, hashes, merkle_root(hashes), encoded,
                      manifest.steps_per_task * manifest.batch_size, metrics)


def needs_warm_up(manifest) -> bool:
    """Whether a step of ``manifest``'s model compiles kernels (repro mode with a tensor at
    or above the compiled kernels' size: an LM's widest activation or attention scores, a
    classifier's widest layer or feature map, over the batch); smaller models run eagerly
    and the C kernels, which need no warming."""
    manifest = load_manifest(manifest)
    if not manifest.repro:
        return False
    spec, batch = manifest.model, manifest.batch_size
    if spec.kind == "lm":
        widest = max(batch * spec.seq_len * max(spec.d_ff, 3 * spec.d_model, spec.vocab),
                     batch * spec.n_heads * spec.seq_len ** 2)
    else:
        maps = [c * h * w for c, h, w in spec.conv_shapes()] + [out * h * w for out, (_, h, w)
                                                                  in zip(spec.channels, spec.conv_shapes())]
        widest = batch * max(maps + list(spec.fc_widths) + [spec.features])
    return widest >= intgemm_fused.MIN_ELEMENTS


def warm_up(manifest, *, device=None) -> None:
    """One training step of ``manifest``'s model on stand-in data of its task's shapes,
    thrown away. On large tensors the repro engine compiles its kernels per shape and
    self-tests them on first use: in a fresh process that takes up to a minute for the
    default LM, which a worker pays here, before it accepts a task, rather than inside
    the task's compute window. The bits of any later task do not depend on it."""
    manifest = load_manifest(manifest)
    if not manifest.repro:
        return  # stock PyTorch compiles nothing
    spec = manifest.model
    if spec.kind == "lm":
        shard = TextShard(np.zeros(spec.seq_len + manifest.batch_size, dtype=np.uint8))
    else:
        shard = Shard(np.zeros((manifest.batch_size, spec.features), dtype=np.float32),
                      np.zeros(manifest.batch_size, dtype=np.int64))
    start = start_checkpoint(manifest, init_params(spec, manifest.seed), task_rng_key(manifest, 0, 0))
    TrainRun(manifest, shard, start, device=device).run_step()


def predict(manifest, checkpoint, x: np.ndarray, *, device=None,
            chunk: int = 4096) -> np.ndarray:
    """Predicted classes for float32 inputs ``x`` (n, features)."""
    manifest = load_manifest(manifest)
    params = {k: v.to(device or "cpu") for k, v in as_checkpoint(checkpoint).group(
        "model").items()}
    xs = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(device or "cpu")
    out = []
    module = build_model(manifest.model, params).to(device or "cpu")
    with torch.no_grad():
        if manifest.repro:  # one step context: the weights are quantised once
            step = ReproStep(engine_for(device), manifest.limbs, 1)
            for i in range(0, len(xs), chunk):
                out.append(first_argmax(module(xs[i:i + chunk], step), 1))
        else:
            for i in range(0, len(xs), chunk):
                out.append(module(xs[i:i + chunk]).argmax(1))
    return torch.cat(out).cpu().numpy()


def evaluate(manifest, checkpoint, test_bytes: bytes, *, device=None) -> float:
    """Accuracy of a checkpoint's model on a test set (shard-encoded bytes)."""
    manifest = load_manifest(manifest)
    test = decode_shard(test_bytes)
    if test.x.shape[1] != manifest.model.features:
        raise DatasetError(f"test set has {test.x.shape[1]} features, model wants "
                           f"{manifest.model.features}")
    pred = predict(manifest, checkpoint, test.x, device=device)
    return float((pred == test.y).mean())
