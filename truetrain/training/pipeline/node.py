"""A pipelined task as one OS process per stage, messages over IPFS (issue 17).

A stage process knows only its :class:`StageJob`: where the manifest is (CID and hash; the
manifest's ``pipeline`` field gives the plan and the micro-batches), its stage, the task
(shard, round, the round's start checkpoint or none), the IPFS API address and the
rendezvous directory. It fetches and checks what it needs like a worker (the manifest,
and on stage 0 and the last the shard), runs the GPipe step of ``run.py`` with
:class:`~.transport.IpfsMessageStore` in place of the in-process store, waiting on the
board for each address it receives, and at the end adds its stage checkpoints to the node
and posts its **result** record: those checkpoints (CID, hash), its log and ``log_root``,
and the bytes it sent. A failing stage posts an **error** record instead.

:func:`run_stages` starts the stages (``spawn``: fresh interpreters, nothing inherited but
the job), waits for them within a deadline, posts ``abort`` as soon as one fails so the
others stop waiting, and ends any that outlive the deadline. :func:`merge_results` fetches
the stages' checkpoints and merges them into whole-model checkpoints: the single-process
task's, bit for bit (``tests/training/test_pipeline_ipfs.py``). ``spawn`` imports the
caller's main module in every stage process: a script that calls :func:`run_stages` keeps
its work under ``if __name__ == "__main__":`` (a stage that dies before it can post an
error is reported by its exit status).
"""

from __future__ import annotations

import multiprocessing
import time
import traceback
from dataclasses import dataclass
from functools import partial

import torch

from ...errors import PipelineError, StorageError, TruetrainError
from ...storage import StorageClient, StorageSettings
from ..checkpoint import Checkpoint, decode_checkpoint, fetch_checkpoint
from ..manifest import DataRef, load_manifest
from ..task import task_start
from .split import merge_checkpoints, stage_checkpoint
from .stage import Stage
from .transport import ABORT, MAX_MESSAGE_BYTES, IpfsMessageStore, Rendezvous
from .wire import Entry, Kind, StageLog, log_root


@dataclass(frozen=True)
class StageJob:
    """Everything one stage process is told. ``timeout_s`` bounds every wait for a record
    and every fetch; ``threads``: torch's intra-op threads (the bits do not depend on it)."""

    manifest: DataRef
    stage: int
    api_addr: str
    rendezvous: str
    shard_index: int = 0
    round_index: int = 0
    start: DataRef | None = None
    timeout_s: float = 30.0
    threads: int = 1


def _fetch(client: StorageClient, ref: DataRef, what: str, checkpoint: bool = False) -> bytes:
    """``ref``'s bytes, checked against its hash (a checkpoint's: its checkpoint hash)."""
    fetch = partial(fetch_checkpoint, client) if checkpoint else client.fetch
    try:
        return fetch(ref.cid, ref.hash, max_size=MAX_MESSAGE_BYTES, timeout=client.settings.timeout_s)
    except StorageError as exc:
        raise PipelineError(f"could not fetch the {what} {ref.cid}: {exc}") from exc


def stage_step(stage: Stage, store: IpfsMessageStore) -> None:
    """One GPipe step of ``stage`` against the others through ``store`` (``run.pipeline_step``
    with each received address awaited on the board)."""
    i, k, plan = stage.index, stage.step, stage.plan
    others = [s for s in range(plan.stages) if s != i]
    stage.begin_step()
    for m in range(len(stage.slices)):
        stage.forward(m, None if stage.first else store.await_address(Kind.ACT, k, m, i - 1))
    for m in range(len(stage.slices)):
        stage.backward(m, None if stage.last else store.await_address(Kind.GRAD, k, m, i + 1))
    stage.finish_backward()
    stage.send_tied()
    partner = plan.tied_partner(i)
    stage.receive_tied(None if partner is None else store.await_address(Kind.TIED, k, 0, partner))
    sums = None
    if stage.clipping:
        stage.send_norm_max()
        stage.send_norm_sum({s: store.await_address(Kind.NORM_MAX, k, 0, s) for s in others})
        sums = {s: store.await_address(Kind.NORM_SUM, k, 0, s) for s in others}
    stage.update(sums)


def train_stage(manifest, index: int, shard, start: bytes | None, shard_index: int, round_index: int,
                store: IpfsMessageStore, *, device=None, tamper=None) -> Stage:
    """Stage ``index`` of a task (shard ``shard_index`` of round ``round_index``, from the
    round's ``start`` checkpoint or the seed's model) run for the manifest's
    ``steps_per_task`` steps against the other stages through ``store``; the stage, with
    its log, its checkpoints every ``checkpoint_interval`` steps and (the last stage) each
    step's training loss in ``losses``."""
    plan = manifest.pipeline.plan(manifest.model)
    full = task_start(manifest, start, shard_index, round_index)
    stage = Stage(manifest, plan, index, stage_checkpoint(full, plan, index), shard, store,
                  micro_batches=manifest.pipeline.micro_batches, device=device, tamper=tamper)
    for _ in range(manifest.steps_per_task):
        stage_step(stage, store)
        if stage.last:
            stage.losses.append(stage.take_losses())
    return stage


def run_stage(job: StageJob) -> dict:
    """Run stage ``job.stage`` of the task for the manifest's ``steps_per_task`` steps; its
    result record (also posted on the board as ``result-{stage}``)."""
    settings = StorageSettings(api_addr=job.api_addr, timeout_s=job.timeout_s, retries=2, backoff_s=0.05)
    board = Rendezvous(job.rendezvous)
    with StorageClient(settings) as client:
        manifest = load_manifest(_fetch(client, job.manifest, "manifest"))
        if manifest.pipeline is None:
            raise PipelineError("the manifest declares no pipeline")
        plan = manifest.pipeline.plan(manifest.model)
        if not 0 <= job.stage < plan.stages:
            raise PipelineError(f"stage {job.stage} of a {plan.stages}-stage pipeline")
        if not 0 <= job.shard_index < len(manifest.shards):
            raise PipelineError(f"shard index {job.shard_index} out of range")
        ends = job.stage in (0, plan.stages - 1)
        shard = _fetch(client, manifest.shards[job.shard_index], "shard") if ends else None
        start = None if job.start is None else _fetch(client, job.start, "start checkpoint", True)
        store = IpfsMessageStore(client, board, timeout_s=job.timeout_s)
        stage = train_stage(manifest, job.stage, shard, start, job.shard_index, job.round_index, store)
        checkpoints = {}
        for step, ckpt in sorted(stage.checkpoints.items()):
            cid = client.add_bytes(ckpt.to_bytes()).cid
            checkpoints[str(step)] = {"cid": cid, "hash": "0x" + ckpt.hash().hex()}
        log = [[e.step, int(e.kind), e.micro, e.source, e.sent, "0x" + e.hash.hex()] for e in stage.log.entries]
        record = {"stage": job.stage, "checkpoints": checkpoints, "log": log,
                  "log_root": "0x" + log_root(stage.log, plan.stages).hex(),
                  "moved": {kind.name: n for kind, n in sorted(store.moved.items())},
                  "cids": {"0x" + a.hex(): c for a, c in sorted(store.cids.items())}}
    board.post(f"result-{job.stage}", record)
    return record


def _stage_main(job: StageJob) -> None:
    """A stage process: run the stage, or post why it failed (exit status 1)."""
    torch.set_num_threads(job.threads)
    try:
        run_stage(job)
    except TruetrainError as exc:
        Rendezvous(job.rendezvous).post(f"error-{job.stage}", {"error": f"{type(exc).__name__}: {exc}"})
        raise SystemExit(1)
    except BaseException as exc:  # noqa: BLE001 - a crash is a failed stage too, reported the same way
        Rendezvous(job.rendezvous).post(f"error-{job.stage}", {"error": f"{type(exc).__name__}: {exc}",
                                                               "trace": traceback.format_exc()})
        raise SystemExit(1)


def run_stages(jobs: list[StageJob], *, deadline_s: float = 120.0, grace_s: float = 5.0) -> list[dict]:
    """Run each job in its own process (all on one rendezvous); their result records, by
    job. A failed stage posts ``abort`` for the rest (they stop within ``grace_s``); the
    first failure raises PipelineError naming its stage; a process alive after
    ``deadline_s`` (or the grace) is ended."""
    board = Rendezvous(jobs[0].rendezvous)
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=_stage_main, args=(job,), name=f"stage-{job.stage}") for job in jobs]
    for proc in procs:
        proc.start()
    deadline = time.monotonic() + deadline_s
    ended: list[int] = []  # stages this runner had to end
    try:
        while any(p.is_alive() for p in procs) and time.monotonic() < deadline:
            failed = _failures(board, jobs, procs)
            if failed and board.read(ABORT) is None:
                board.post(ABORT, {"reason": failed[0]})
                deadline = min(deadline, time.monotonic() + grace_s)
            time.sleep(0.02)
    finally:
        for job, proc in zip(jobs, procs):
            if proc.is_alive():
                ended.append(job.stage)
                proc.terminate()
                proc.join(2.0)
                if proc.is_alive():
                    proc.kill()
            proc.join()
    aborted = board.read(ABORT)
    if aborted is not None:
        raise PipelineError(aborted["reason"])
    failed = _failures(board, [j for j in jobs if j.stage not in ended], [p for j, p in zip(jobs, procs)
                                                                         if j.stage not in ended])
    if failed:
        raise PipelineError(failed[0])
    if ended:
        raise PipelineError(f"stages {ended} did not finish within {deadline_s:g} s")
    return [board.read(f"result-{job.stage}") for job in jobs]


def _failures(board: Rendezvous, jobs: list[StageJob], procs) -> list[str]:
    """Why stages failed so far: their error records, or the exit status of a process that
    ended without a result or an error (killed)."""
    failed = []
    for job, proc in zip(jobs, procs):
        error = board.read(f"error-{job.stage}")
        if error is not None:
            failed.append(f"stage {job.stage}: {error['error']}")
        elif proc.exitcode not in (None, 0) and board.read(f"result-{job.stage}") is None:
            failed.append(f"stage {job.stage}: its process ended with status {proc.exitcode}")
    return failed


def result_log(record: dict) -> StageLog:
    """A result record's log as a :class:`~.wire.StageLog`."""
    log = StageLog(record["stage"])
    for step, kind, micro, source, sent, address in record["log"]:
        log.add(Entry(step, Kind(kind), micro, source, sent, bytes.fromhex(address[2:])))
    return log


def merge_results(client: StorageClient, records: list[dict]) -> list[Checkpoint]:
    """The whole-model checkpoints (by step) from every stage's result record, each stage
    checkpoint fetched and checked against its hash."""
    steps = sorted({int(s) for r in records for s in r["checkpoints"]})
    merged = []
    for step in steps:
        parts = []
        for record in sorted(records, key=lambda r: r["stage"]):
            ref = record["checkpoints"].get(str(step))
            if ref is None:
                raise PipelineError(f"stage {record['stage']} published no checkpoint at step {step}")
            data = _fetch(client, DataRef(ref["cid"], bytes.fromhex(ref["hash"][2:])), f"stage {record['stage']} checkpoint",
                          True)
            parts.append(decode_checkpoint(data))
        merged.append(merge_checkpoints(parts))
    return merged
