"""Compute a task's result from its verified inputs: what a worker publishes and an auditor replays."""

from __future__ import annotations

from dataclasses import dataclass

from truetrain.errors import PipelineError
from truetrain.training import Checkpoint, TaskResult, aggregate, run_task

from .codes import decode_task_id
from .stages import aggregation_index, stage_count


@dataclass(frozen=True)
class ComputedResult:
    """A training task's :class:`TaskResult` or an aggregation task's merged checkpoint."""

    task_id: int
    root: bytes
    training: TaskResult | None = None
    aggregated: Checkpoint | None = None

    @property
    def is_aggregation(self) -> bool:
        return self.aggregated is not None

    @property
    def steps(self) -> int:
        return int(self.training.metrics["steps"]) if self.training else 0


def compute_task(reader, task_id: int, *, device=None, devices: int = 1) -> ComputedResult:
    """Train (index < shards) or aggregate (index == shards) task ``task_id`` from the inputs
    ``reader`` (a :class:`~truetrain.market.reader.MarketReader`) finds and verifies. A
    pipelined job's stage tasks run with their siblings (``stage_run``), not here.
    ``devices``: ranks a training task runs on (``run_task``; the same bits)."""
    job_id, round_index, index = decode_task_id(task_id)
    manifest = reader.manifest(job_id)
    if index == aggregation_index(manifest):
        start = reader.round_start(job_id, round_index) if manifest.outer is not None else None
        merged = aggregate(manifest, round_index, reader.contributions(job_id, round_index), start)
        return ComputedResult(task_id, merged.hash(), aggregated=merged)
    if stage_count(manifest) > 1:
        raise PipelineError(f"task {task_id} is a pipeline stage: it runs with its group's other stages")
    result = run_task(manifest, reader.shard(job_id, index), reader.round_start(job_id, round_index),
                      index, round_index, device=device, devices=devices)
    return ComputedResult(task_id, result.merkle_root, training=result)
