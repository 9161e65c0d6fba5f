"""Replaying one stage alone: what an auditor or a referee runs.

From the stage's checkpoint at step k, the shard (stage 0 and the last stage read it) and
the messages the stage committed to having received, re-executing steps k .. k+n gives
the addresses of everything the stage sent and its checkpoints. An honest stage's
replay reproduces its log; a stage that sent something its inputs do not explain is
caught at the first such message (:func:`audit_stage`). A stage whose *inputs* were
wrong replays clean: its received addresses are the upstream stage's sent ones
(:func:`~.wire.broken_links` is empty), so the blame moves upstream.
"""

from __future__ import annotations

from ..checkpoint import Checkpoint
from ..intgemm import GemmEngine
from ..manifest import load_manifest
from .split import StagePlan
from .stage import Stage
from .wire import Entry, Kind, MessageStore, StageLog, causal_position


def replay_stage(manifest, plan: StagePlan, index: int, ckpt: Checkpoint, shard, committed: StageLog,
                 store: MessageStore, steps: int, **options) -> StageLog:
    """Stage ``index`` re-run alone for ``steps`` steps from ``ckpt`` (its checkpoint),
    fed the messages ``committed`` says it received (fetched from ``store``); its log."""
    return replay_stage_run(manifest, plan, index, ckpt, shard, committed, store, steps, **options).log


def replay_stage_run(manifest, plan: StagePlan, index: int, ckpt: Checkpoint, shard, committed: StageLog,
                     store: MessageStore, steps: int, *, micro_batches: int = 1, checkpoint_every: int | None = None,
                     engine: GemmEngine | None = None, device=None) -> Stage:
    """:func:`replay_stage`, returning the replayed stage (its log and its checkpoints)."""
    manifest = load_manifest(manifest)
    stage = Stage(manifest, plan, index, ckpt, shard, store, micro_batches=micro_batches, engine=engine,
                  device=device, checkpoint_every=checkpoint_every)
    others = [s for s in range(plan.stages) if s != index]
    partner = plan.tied_partner(index)
    for _ in range(steps):
        received = committed.received(stage.step)

        def at(kind: Kind, micro: int, source: int | None) -> bytes | None:
            return received.get((stage.step, kind, micro, source))

        stage.begin_step()
        for micro in range(micro_batches):
            stage.forward(micro, at(Kind.ACT, micro, index - 1))
        for micro in range(micro_batches):
            stage.backward(micro, at(Kind.GRAD, micro, index + 1))
        stage.finish_backward()
        stage.send_tied()
        stage.receive_tied(at(Kind.TIED, 0, partner))
        sums = None
        if stage.clipping:
            stage.send_norm_max()
            stage.send_norm_sum({s: at(Kind.NORM_MAX, 0, s) for s in others})
            sums = {s: at(Kind.NORM_SUM, 0, s) for s in others}
        stage.update(sums)
        if stage.last:
            stage.losses.append(stage.take_losses())
    if stage.step not in stage.checkpoints:
        stage.commit()
    return stage


def replay_micro_batch(manifest, plan: StagePlan, index: int, ckpt: Checkpoint, shard, committed: StageLog,
                       store: MessageStore, micro: int, *, micro_batches: int = 1, engine: GemmEngine | None = None,
                       device=None) -> dict[Kind, bytes | None]:
    """Micro-batch ``micro`` of step ``ckpt.step`` alone through stage ``index``: the
    addresses of the activations (``ACT``) and input gradient (``GRAD``) it sends, None
    where the stage sends none. What referees recompute once a dispute is narrowed to one
    (step, micro-batch, stage): a micro-batch's forward and input gradient need neither
    the other micro-batches nor the optimizer."""
    manifest = load_manifest(manifest)
    stage = Stage(manifest, plan, index, ckpt, shard, store, micro_batches=micro_batches, engine=engine,
                  device=device, checkpoint_every=1)
    received = committed.received(stage.step)
    stage.begin_step()
    act = stage.forward(micro, received.get((stage.step, Kind.ACT, micro, index - 1)))
    grad = stage.backward(micro, received.get((stage.step, Kind.GRAD, micro, index + 1)))
    return {Kind.ACT: act, Kind.GRAD: grad}


def first_mismatch(replayed: StageLog, committed: StageLog, stages: int) -> Entry | None:
    """The committed sent message or checkpoint, earliest in causal order, that the replay
    did not reproduce (over the replay's steps; checkpoints where both have one)."""
    mine, theirs = {e.key: e for e in replayed.entries if e.sent}, committed.sent()
    steps = {e.step for e in replayed.entries if e.kind != Kind.CHECKPOINT}
    bad = [e for e in committed.entries if e.sent and (
        (e.kind == Kind.CHECKPOINT and e.key in mine and mine[e.key].hash != e.hash)
        or (e.kind != Kind.CHECKPOINT and e.step in steps and (e.key not in mine or mine[e.key].hash != e.hash)))]
    bad += [e for e in mine.values() if e.kind != Kind.CHECKPOINT and e.key not in theirs]
    return min(bad, key=lambda e: causal_position(e, stages), default=None)


def audit_stage(manifest, plan: StagePlan, index: int, ckpt: Checkpoint, shard, committed: StageLog,
                store: MessageStore, steps: int, **options) -> Entry | None:
    """Replay stage ``index`` and return the first committed message or checkpoint its
    inputs do not explain (None: the stage is honest over these steps)."""
    replayed = replay_stage(manifest, plan, index, ckpt, shard, committed, store, steps, **options)
    return first_mismatch(replayed, committed, plan.stages)
