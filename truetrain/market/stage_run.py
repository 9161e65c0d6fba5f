"""Running, replaying and publishing stage tasks of pipelined jobs (see ``stages.py``).

* :func:`run_stage_task`: a worker runs its stage against the other stages of its group
  through a board (``truetrain.daemon.mailbox``) and IPFS;
* :func:`replay_stage_task`: an auditor re-runs the stage alone on the inputs its siblings
  committed to sending it (their revealed bundles), giving the leaves an honest stage has;
* :func:`replay_segment`: a referee re-runs one interval from an agreed leaf;
* :func:`publish_stage`: checkpoints, leaf records and the bundle onto IPFS;
* :func:`merged_contribution`: a group's stage checkpoints merged into the whole model,
  what the round's aggregation averages.
"""

from __future__ import annotations

from dataclasses import dataclass

from truetrain.errors import ResultInvalid
from truetrain.training import Contribution
from truetrain.training.checkpoint import Checkpoint, decode_checkpoint
from truetrain.training.pipeline import (IpfsMessageStore, Stage, StageLog, merge_checkpoints, replay_stage_run,
                                         stage_checkpoint, train_stage)
from truetrain.training.task import task_start

from .codes import decode_task_id, encode_task_id
from .stages import (LeafRecord, LeafRef, StageBundle, committed_inputs, group_indices, segments, stage_leaf_records,
                     task_place)


@dataclass
class StageRun:
    """A stage's run (its own or a replay): the stage, with its log and checkpoints, and the
    message store that holds the CIDs of what it received and sent."""

    task_id: int
    shard: int
    stage: Stage
    messages: IpfsMessageStore

    @property
    def steps(self) -> int:
        return self.stage.step


def _inputs(reader, task_id: int):
    """(manifest, plan, stage, shard bytes or None, round start bytes or None, shard index,
    round) of a stage task: the shard only where the stage reads it (the first and last)."""
    job_id, round_index, index = decode_task_id(task_id)
    manifest = reader.manifest(job_id)
    shard_index, stage = task_place(manifest, index)
    plan = manifest.pipeline.plan(manifest.model)
    shard = reader.shard(job_id, shard_index) if stage in (0, plan.stages - 1) else None
    return manifest, plan, stage, shard, reader.round_start(job_id, round_index), shard_index, round_index


def _committed(reader, task_id: int, plan, stage: int, store_client, timeout_s: float):
    """The stage's inputs as its siblings committed to sending them, and a message store
    that knows where each is."""
    siblings = sibling_bundles(reader, task_id)
    messages = IpfsMessageStore(store_client, None, timeout_s=timeout_s)
    for bundle in siblings.values():
        for address, cid in bundle.cids.items():
            messages.learn(address, cid)
    return committed_inputs(stage, plan.stages, plan.tied_partner(stage), siblings), messages


def run_stage_task(reader, task_id: int, board, store_client, *, timeout_s: float, device=None,
                   tamper=None) -> StageRun:
    """Run stage task ``task_id`` against its siblings through ``board`` (each received
    record waited for up to ``timeout_s``) and the IPFS node behind ``store_client``."""
    manifest, _plan, stage_index, shard, start, shard_index, round_index = _inputs(reader, task_id)
    messages = IpfsMessageStore(store_client, board, timeout_s=timeout_s)
    stage = train_stage(manifest, stage_index, shard, start, shard_index, round_index, messages, device=device,
                        tamper=tamper)
    return StageRun(task_id, shard_index, stage, messages)


def sibling_bundles(reader, task_id: int) -> dict[int, StageBundle]:
    """The revealed bundles of the other stages of ``task_id``'s group, by stage
    (ResultInvalid naming the first that has none yet)."""
    job_id, round_index, index = decode_task_id(task_id)
    manifest = reader.manifest(job_id)
    out = {}
    for stage, sibling in enumerate(group_indices(manifest, index)):
        if sibling != index:
            out[stage] = reader.stage_result(encode_task_id(job_id, round_index, sibling))
    return out


def replay_stage_task(reader, task_id: int, store_client, *, device=None, timeout_s: float = 60.0) -> StageRun:
    """Stage task ``task_id`` re-run alone from its start on the inputs its siblings committed
    to sending it: the leaves an honest stage has."""
    manifest, plan, stage_index, shard, start, shard_index, round_index = _inputs(reader, task_id)
    inputs, messages = _committed(reader, task_id, plan, stage_index, store_client, timeout_s)
    ckpt = stage_checkpoint(task_start(manifest, start, shard_index, round_index), plan, stage_index)
    stage = _replay(manifest, plan, stage_index, ckpt, shard, inputs, messages, manifest.steps_per_task, device)
    return StageRun(task_id, shard_index, stage, messages)


def _replay(manifest, plan, index: int, ckpt: Checkpoint, shard, inputs: StageLog, messages, steps: int,
            device) -> Stage:
    return replay_stage_run(manifest, plan, index, ckpt, shard, inputs, messages, steps,
                            micro_batches=manifest.pipeline.micro_batches, device=device)


def start_leaf(reader, task_id: int) -> bytes:
    """Leaf 0 of stage task ``task_id``: its stage's part of the task's start, no messages."""
    job_id, round_index, index = decode_task_id(task_id)
    manifest = reader.manifest(job_id)
    shard_index, stage_index = task_place(manifest, index)
    plan = manifest.pipeline.plan(manifest.model)
    ckpt = stage_checkpoint(task_start(manifest, reader.round_start(job_id, round_index), shard_index, round_index),
                            plan, stage_index)
    return LeafRecord(0, ckpt.hash(), "", ()).hash


def replay_segment(reader, task_id: int, lo: int, agreed: LeafRecord, store_client, *,
                   device=None, timeout_s: float = 60.0) -> bytes:
    """The leaf an honest stage has at game position ``lo + 1`` (leaf ``lo``), re-run for
    one interval from the agreed leaf at position ``lo`` (leaf ``lo - 1``, its record
    ``agreed``; lo >= 1) on the inputs the siblings committed to sending."""
    manifest, plan, stage_index, shard, *_ = _inputs(reader, task_id)
    interval = manifest.checkpoint_interval
    if lo < 1 or agreed.step != (lo - 1) * interval:
        raise ResultInvalid(f"agreed leaf record at step {agreed.step} is not leaf {lo - 1}")
    ckpt = decode_checkpoint(reader.fetch_checkpoint(agreed.checkpoint_cid, agreed.checkpoint_hash))
    inputs, messages = _committed(reader, task_id, plan, stage_index, store_client, timeout_s)
    stage = _replay(manifest, plan, stage_index, ckpt, shard, inputs, messages, interval, device)
    entries = segments(stage.log, plan.stages, interval, manifest.checkpoint_leaves)[lo]
    return LeafRecord(lo * interval, stage.checkpoints[lo * interval].hash(), "", tuple(entries)).hash


def publish_stage(store, run: StageRun, manifest) -> tuple[str, StageBundle]:
    """Add the run's checkpoints, leaf records and bundle to IPFS; the bundle's CID and the bundle."""
    _, round_index, index = decode_task_id(run.task_id)
    stage = run.stage
    refs = {}
    for step, ckpt in sorted(stage.checkpoints.items()):
        refs[step] = (store.add_bytes(ckpt.to_bytes()).cid, ckpt.hash())
    records = stage_leaf_records(stage.log, refs, stages=stage.plan.stages, interval=manifest.checkpoint_interval,
                                 leaves=manifest.checkpoint_leaves)
    leaves = []
    for record in records:
        cid = store.add_bytes(record.to_bytes()).cid
        leaves.append(LeafRef(record.step, record.checkpoint_cid, record.checkpoint_hash, record.hash, cid))
    losses = stage.losses
    metrics = {"steps": stage.step, "numeric_mode": manifest.numeric_mode,
               "moved": {kind.name.lower(): n for kind, n in sorted(run.messages.moved.items())}}
    if losses:  # the last stage takes the loss
        metrics["final_train_loss"] = losses[-1]
        metrics["mean_train_loss"] = sum(losses) / len(losses)
    bundle = StageBundle(run.task_id, round_index, index, run.shard, stage.index,
                         manifest.steps_per_task * manifest.batch_size, tuple(leaves), tuple(stage.log.entries),
                         dict(run.messages.cids), metrics)
    return store.add_bytes(bundle.to_bytes()).cid, bundle


def merged_contribution(reader, job_id: int, round_index: int, shard_index: int) -> Contribution:
    """Shard ``shard_index``'s contribution to the round: its stages' final checkpoints
    (each checked against its revealed bundle) merged into the whole model."""
    manifest = reader.manifest(job_id)
    stages = manifest.pipeline.stages
    parts, samples = [], None
    for stage in range(stages):
        bundle = reader.stage_result(encode_task_id(job_id, round_index, shard_index * stages + stage))
        final = bundle.final
        parts.append(decode_checkpoint(reader.fetch_checkpoint(final.checkpoint_cid, final.checkpoint_hash)))
        samples = bundle.samples
    return Contribution(shard_index, samples, merge_checkpoints(parts).to_bytes())


__all__ = ["StageRun", "merged_contribution", "publish_stage", "replay_segment", "replay_stage_task",
           "run_stage_task", "sibling_bundles", "start_leaf"]
