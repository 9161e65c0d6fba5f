"""What a job binds on chain for its disputes to end in StepGame (``DisputeGame.bindProgram``):
its program's root, entry count and layout, the steps between its checkpoints, its shard
count, and the data root: the Merkle root over every task's per-step batch roots
(:func:`~truetrain.trace.game.job_batch_leaves`, task slot ``round · shards + shard``).

Everything here is derived from the manifest and the shards' bytes, which the manifest's
hashes fix, so anyone can recompute a job's binding and compare it with the chain's
(:func:`check_binding`): a worker does before it takes a task of the job.

One program holds for every step of a job (Adam's rate, the one value that changes, is a
batch tensor, committed by the data root with the step's batch); :func:`unbound_reason`
says why a job cannot bind (its kind of model or numerics).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..errors import TraceError
from ..training.checkpoint import Checkpoint
from ..training.manifest import Manifest, load_manifest
from ..training.merkle import merkle_root
from ..training.task import task_rng_key
from ..training.tensor_roots import tensor_root
from .game import job_batch_leaves
from ..training.trainer import as_shard
from .builder import step_batch
from .program import Program, derive


@dataclass(frozen=True)
class Binding:
    """``DisputeGame.Program``'s fields."""

    root: bytes
    entries: int
    interval: int
    shards: int
    data: bytes
    layout: tuple[int, ...]

    def as_tuple(self) -> tuple:
        return (self.root, self.entries, self.interval, self.shards, self.data, list(self.layout))

    @classmethod
    def from_chain(cls, raw) -> "Binding":
        root, entries, interval, shards, data, layout = raw
        return cls(bytes(root), int(entries), int(interval), int(shards), bytes(data), tuple(int(x) for x in layout))


def unbound_reason(manifest) -> str | None:
    """Why ``manifest``'s job cannot bind a program (None: it can)."""
    manifest = load_manifest(manifest)
    if not manifest.repro:
        return "a stock-mode job has no program"
    if manifest.pipeline is not None:
        return "a pipelined job's stages have no program yet"
    if manifest.model.kind not in ("mlp", "lm"):
        return f"no program is derived for a {manifest.model.kind!r} model yet"
    return None


def task_batch_roots(manifest: Manifest, program: Program, shard, round_index: int, shard_index: int) -> list[bytes]:
    """Task (round, shard)'s per-step batch roots, as :func:`~.builder.batch_root` gives them
    from each of its checkpoints (the batch depends on the task key and the step only)."""
    key, shard = task_rng_key(manifest, round_index, shard_index), as_shard(shard, manifest)
    roots = []
    for step in range(manifest.steps_per_task):
        # the schedule position (AdamW's rate is a batch tensor): the round's first inner step on
        lr_step = torch.tensor(round_index * manifest.steps_per_task + step, dtype=torch.int64)
        batch = step_batch(manifest, shard, Checkpoint(step, key, {"optim.lr_step": lr_step}), program,
                           torch.device("cpu"))
        roots.append(merkle_root([tensor_root(b) for b in batch]))
    return roots


def job_data_leaves(manifest, shard_bytes: Callable[[int], bytes]) -> list[bytes]:
    """The leaves of ``manifest``'s job's data root (every task's per-step batch roots, task
    slot round · shards + shard, each padded to the task width); ``shard_bytes(k)`` gives
    shard k's bytes."""
    manifest = load_manifest(manifest)
    reason = unbound_reason(manifest)
    if reason is not None:
        raise TraceError(f"the job cannot bind a program: {reason}")
    program = derive(manifest)
    shards = [shard_bytes(k) for k in range(len(manifest.shards))]
    return job_batch_leaves([task_batch_roots(manifest, program, shards[k], r, k)
                             for r in range(manifest.rounds) for k in range(len(shards))])


def job_binding(manifest, shard_bytes: Callable[[int], bytes]) -> Binding:
    """The binding of ``manifest``'s job; ``shard_bytes(k)`` gives shard k's bytes."""
    manifest = load_manifest(manifest)
    data = merkle_root(job_data_leaves(manifest, shard_bytes))
    program = derive(manifest)
    return Binding(program.root(), len(program), manifest.checkpoint_interval, len(manifest.shards), data,
                   tuple(program.layout()))


def check_binding(manifest, on_chain: Binding, shard_bytes: Callable[[int], bytes]) -> None:
    """Raise :class:`TraceError` unless ``on_chain`` is ``manifest``'s job's binding."""
    if on_chain != job_binding(manifest, shard_bytes):
        raise TraceError("the job's bound program or data root is not its manifest's")


__all__ = ["Binding", "check_binding", "job_binding", "job_data_leaves", "task_batch_roots", "unbound_reason"]
