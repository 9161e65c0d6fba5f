"""A referee's vote: recompute the one interval a bisection ended on.

The referee replays steps k..k+I from the checkpoint both parties hold at lo (fetched from a
CID either party claimed, checked against the agreed hash), or builds checkpoint 0 from the
task's verified inputs when lo is the inputs, or recomputes an aggregation task whole; then
it votes for the party whose hash at hi it got, or for neither. An agreed checkpoint nobody
can fetch cannot be replayed: the referee votes neither (a result whose data is withheld
does not stand).
"""

from __future__ import annotations

import logging

from truetrain.errors import PipelineError, ResultInvalid, StorageError
from truetrain.market import compute_task, decode_task_id
from truetrain.market.stage_run import replay_segment, start_leaf
from truetrain.market.stages import LeafRecord, aggregation_index
from truetrain.training.task import task_start
from truetrain.training.trainer import replay

from .game import GameView, Vote
from .logs import Disputed, disputed

log = logging.getLogger("truetrain.dispute")


def recompute_hi(reader, view: GameView, d: Disputed, *, device=None) -> bytes | None:
    """The hash the honest computation gives at the game's hi, given what the bisection
    ended on (None: the agreed checkpoint could not be fetched)."""
    job_id, round_index, index = decode_task_id(view.task_id)
    manifest = reader.manifest(job_id)
    if index == aggregation_index(manifest):
        return compute_task(reader, view.task_id, device=device).root
    if reader.is_stage_task(view.task_id):
        return stage_hi(reader, view, d, device=device)
    if d.lo == 0:
        return task_start(manifest, reader.round_start(job_id, round_index), index, round_index).hash()
    for cid in d.agreed_cids:
        try:
            start = reader.fetch_checkpoint(cid, d.agreed)
            break
        except StorageError as exc:
            log.warning("agreed checkpoint not retrievable", extra={"game": view.game_id, "cid": cid,
                                                                     "error": str(exc)})
    else:
        return None
    steps = (d.hi - d.lo) * manifest.checkpoint_interval
    return replay(manifest, reader.shard(job_id, index), start, steps, device=device).hash()


def stage_hi(reader, view: GameView, d: Disputed, *, device=None) -> bytes | None:
    """A stage task's honest leaf at hi: the start's leaf at lo = 0, else one interval
    replayed from the agreed leaf's record (fetched from a CID either party claimed and
    checked against the agreed leaf) on the inputs the stage's siblings committed to."""
    if d.lo == 0:
        return start_leaf(reader, view.task_id)
    for cid in d.agreed_cids:
        try:
            record = LeafRecord.from_bytes(reader.fetch_bundle(cid), d.agreed)
            break
        except (StorageError, ResultInvalid) as exc:
            log.warning("agreed leaf record not usable", extra={"game": view.game_id, "cid": cid, "error": str(exc)})
    else:
        return None
    try:
        return replay_segment(reader, view.task_id, d.lo, record, reader.store, device=device)
    except (StorageError, ResultInvalid, PipelineError) as exc:  # a sibling's committed input is not there
        log.warning("stage interval not replayable", extra={"game": view.game_id, "error": str(exc)})
        return None


def referee_vote(reader, game_contract, view: GameView, *, device=None) -> Vote:
    """The vote an honest referee casts on game ``view``."""
    d = disputed(game_contract, view)
    honest = recompute_hi(reader, view, d, device=device)
    if honest is not None and honest == d.worker:
        return Vote.WORKER
    if honest is not None and honest == d.challenger:
        return Vote.CHALLENGER
    return Vote.NEITHER
