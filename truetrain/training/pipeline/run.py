"""A pipelined job's schedule, run in one process: GPipe.

Each step: every micro-batch's forward, stage 0 to the last (micro-batch 0 first); then
every micro-batch's backward, the last stage down to stage 0; then on each stage the
adding pass (M > 1), the tied-gradient swap, the global-norm exchange and the optimizer
update. Between workers the same schedule lets stage s+1 work on micro-batch m while
stage s works on m+1; here the stages take turns. All messages go through one
:class:`~.wire.MessageStore`, so what moved is counted and every stage's log holds the
addresses a worker would commit.

The result equals the single-process run of the same manifest bit for bit, for any plan
and micro-batch count (``tests/training/test_pipeline.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import DatasetError, TrainingError
from ...hashing import keccak256
from ..checkpoint import Checkpoint
from ..intgemm import GemmEngine
from ..manifest import load_manifest
from ..task import task_start
from ..trainer import as_checkpoint, as_shard
from .split import StagePlan, merge_checkpoints, stage_checkpoint
from .stage import Stage, Tamper
from .wire import MessageStore, StageLog


def pipeline_step(stages: list[Stage]) -> None:
    """One GPipe step across in-process ``stages`` (all at the same step)."""
    for stage in stages:
        stage.begin_step()
    for micro in range(len(stages[0].slices)):
        address = None
        for stage in stages:
            address = stage.forward(micro, address)
    for micro in range(len(stages[0].slices)):
        address = None
        for stage in reversed(stages):
            address = stage.backward(micro, address)
    for stage in stages:
        stage.finish_backward()
    tied = {s.index: s.send_tied() for s in stages}
    for stage in stages:
        partner = stage.plan.tied_partner(stage.index)
        stage.receive_tied(None if partner is None else tied[partner])
    sums: dict[int, bytes] = {}
    if stages[0].clipping:
        maxima = {s.index: s.send_norm_max() for s in stages}
        sums = {s.index: s.send_norm_sum(_others(maxima, s.index)) for s in stages}
    for stage in stages:
        stage.update(_others(sums, stage.index))


def _others(addresses: dict[int, bytes], me: int) -> dict[int, bytes]:
    return {s: a for s, a in addresses.items() if s != me}


@dataclass
class PipelineRun:
    """A pipelined run's outcome: whole-model checkpoints (the start, then every ``every``
    steps and the end), the mean loss of each interval, every stage's log, each stage's
    kept checkpoints by step, and the message store."""

    checkpoints: list[Checkpoint]
    losses: list[float]
    logs: list[StageLog]
    stage_checkpoints: list[dict[int, Checkpoint]]
    store: MessageStore = field(repr=False)

    @property
    def checkpoint_hashes(self) -> list[bytes]:
        return [c.hash() for c in self.checkpoints]


def train_pipelined(manifest, shard, ckpt, steps: int, plan: StagePlan, *, micro_batches: int = 1,
                    every: int | None = None, engine: GemmEngine | None = None, device=None,
                    tamper: dict[int, Tamper] | None = None) -> PipelineRun:
    """Run ``steps`` steps from the whole-model checkpoint ``ckpt`` as a pipeline of
    ``plan``'s stages (the same contract as ``trainer.train``). ``tamper``: a fault to
    inject on a stage's outgoing messages, by stage."""
    manifest = load_manifest(manifest)
    ckpt = as_checkpoint(ckpt)
    if steps < 0:
        raise TrainingError("steps must be >= 0")
    every = every or steps or 1
    shard = as_shard(shard, manifest)
    store = MessageStore()
    stages = [Stage(manifest, plan, s, stage_checkpoint(ckpt, plan, s), shard, store,
                    micro_batches=micro_batches, engine=engine, device=device, checkpoint_every=every,
                    tamper=(tamper or {}).get(s)) for s in range(plan.stages)]
    checkpoints, losses = [ckpt], []
    for i in range(1, steps + 1):
        pipeline_step(stages)
        if i % every == 0 or i == steps:
            losses.append(stages[-1].take_losses())
            checkpoints.append(merge_checkpoints([s.checkpoints.get(s.step) or _commit(s) for s in stages]))
    return PipelineRun(checkpoints, losses, [s.log for s in stages], [s.checkpoints for s in stages], store)


def _commit(stage: Stage) -> Checkpoint:
    stage.commit()
    return stage.checkpoints[stage.step]


def run_pipeline_task(manifest, shard_bytes: bytes, start_checkpoint_data, shard_index: int, round_index: int,
                      plan: StagePlan, *, micro_batches: int = 1, engine: GemmEngine | None = None,
                      device=None) -> PipelineRun:
    """Task (round, shard) of ``manifest`` as a pipeline (see ``task.run_task``): its
    checkpoints every ``checkpoint_interval`` steps are the data-parallel task's, bit for bit."""
    manifest = load_manifest(manifest)
    if not 0 <= shard_index < len(manifest.shards):
        raise TrainingError(f"shard index {shard_index} out of range")
    if keccak256(bytes(shard_bytes)) != manifest.shards[shard_index].hash:
        raise DatasetError(f"shard {shard_index} bytes do not match the manifest's hash")
    start = task_start(manifest, start_checkpoint_data, shard_index, round_index)
    return train_pipelined(manifest, as_shard(shard_bytes, manifest), start, manifest.steps_per_task, plan,
                           micro_batches=micro_batches, every=manifest.checkpoint_interval, engine=engine,
                           device=device)
