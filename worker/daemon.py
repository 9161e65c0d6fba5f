"""The worker daemon: drive each task drawn to this worker from offer to payment.

``step`` reads the task from the chain and does the one thing its state asks for:

* Offered  → fetch the task's inputs (its shard and the checkpoint its round starts from,
  content-verified; kept for the training step), then accept, if the job fits this machine
  (device class, memory), after a warm-up step of a model that compiles kernels
  (truetrain.daemon.warmup). Inputs that cannot be fetched (altered, not found, or not
  served in time) are the submitter's fault, not a reason to be bound to the task: the
  worker declines the offer (``declineTask``) once instead. A task that is not a stage
  starts training in the lane as soon as the accept is mined, in the same step (and the
  loop wakes when the lane finishes, not a poll later);
* Running  → compute the result (or take the one started at the accept) (train a shard, data-parallel on ``--devices N`` ranks for
  a repro job (truetrain.training.launch: the bits of one), run its stage of a pipelined shard with
  the group's other stages, or aggregate the round) and publish it in
  the background lane (truetrain.daemon.lane; the loop keeps defending games meanwhile),
  persist root, CID and a fresh salt, then commit; a restart finds them in the book and
  commits without training again;
* Committed → reveal, once the audit draw (settled from a block after the commitment) drew
  no audit, or its auditor has committed; a drawn audit's auditor is drawn first
  (``settleAudit``);
* later states → nothing to do; Finalized closes the entry as done, a task that moved to
  another worker (this one timed out, or lost a dispute) as lost.

A pipelined job's stage exchanges its messages through this worker's mailbox
(truetrain.daemon.mailbox, published in its profile) and the mailboxes of the workers
holding the other stages of its group.

Disputes: an audit mismatch on one of its tasks makes it open the game
(``openAuditDispute``, unless someone did); every game where it is the worker is driven by
:class:`~truetrain.dispute.GameDriver` with the checkpoint hashes of its *published* result
bundle (a worker whose data is not retrievable cannot defend itself).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from truetrain.daemon.base import Daemon
from truetrain.daemon.book import Entry
from truetrain.daemon.devices import DevicePool
from truetrain.daemon.lane import Pending
from truetrain.daemon.mailbox import Mailbox, StageBoard, stage_space
from truetrain.daemon.warmup import WarmUps
from truetrain.errors import (ConfigError, ContentMismatch, ContentNotFound, ContentTooLarge, InvalidCid, PipelineError,
                              StorageTimeout)
from truetrain.market import (ROLE_WORKER, TaskStatus, compute_task, decode_task_id, new_salt, pending_audit_draw,
                              publish_result, result_commitment)
from truetrain.market.codes import FLAG_STALLED, encode_task_id
from truetrain.market.compute import ComputedResult
from truetrain.market.faulty import WithholdingStore, corrupt_messages, faulty_result
from truetrain.market.stage_run import publish_stage, run_stage_task
from truetrain.market.stages import group_indices, task_place
from truetrain.training.memory import offer_refusal

log = logging.getLogger("worker")

WORK, DEFEND, OPEN_GAME = "work", "defend", "open-game"
#: States in which a stage task's worker serves its records to the other stages.
STAGE_LIVE = {TaskStatus.OFFERED, TaskStatus.RUNNING, TaskStatus.COMMITTED, TaskStatus.REVEALED,
              TaskStatus.CHALLENGE_WINDOW, TaskStatus.DISPUTED, TaskStatus.FINALIZED}
WAITING = {TaskStatus.REVEALED, TaskStatus.CHALLENGE_WINDOW, TaskStatus.DISPUTED}
#: What a fetch of a job's data raises when the data, not this worker, is at fault (after the
#: storage client's retries): an IPFS node of this worker that cannot be reached is not.
UNFETCHABLE = (ContentMismatch, ContentNotFound, ContentTooLarge, InvalidCid, StorageTimeout)


def check_devices(settings) -> None:
    """Refuse more CUDA devices than the machine has (before connecting to anything); CPU
    ranks are processes, any number of them."""
    if settings.devices > 1 and settings.torch_device().startswith("cuda"):
        import torch

        if settings.devices > torch.cuda.device_count():
            raise ConfigError(f"devices is {settings.devices} but this machine has {torch.cuda.device_count()} "
                              "CUDA devices")


class WorkerDaemon(Daemon):
    role = "worker"
    role_bits = ROLE_WORKER
    #: A game has a clock; a task's work trains (slow).
    kinds = (DEFEND, OPEN_GAME, WORK)
    slow_kinds = frozenset({WORK})
    declares_network = True

    def __init__(self, settings):
        check_devices(settings)
        super().__init__(settings)
        #: The device of each of the up to max_concurrent tasks training at once.
        self.devices = DevicePool(self.device, self.lane_threads())
        self.warmups = WarmUps(self, self.devices.acquire)
        self.mailbox: Mailbox | None = None
        self._boards: dict[int, tuple[float, tuple[str, str] | None]] = {}
        #: the mailbox space each stage task of this worker posts in (dropped when it ends)
        self._spaces: dict[int, str] = {}
        #: stage tasks taken from this worker while their stage ran: the run stops waiting
        self.abandoned: set[int] = set()
        #: tasks whose computation started with their accept, by the offer's accept deadline
        self._early: dict[int, int] = {}

    def complete_profile(self, profile):
        """Serve the mailbox of this worker's pipeline stages and declare where it is, and
        how many devices train each of its tasks."""
        if self.mailbox is None:
            self.mailbox = Mailbox(self.settings.mailbox_host, self.settings.mailbox_port)
        return replace(profile, mailbox=self.mailbox.url, devices=self.settings.devices)

    def close(self) -> None:
        super().close()
        if self.mailbox is not None:
            self.mailbox.close()

    def on_event(self, event) -> None:
        args, mine = event.args, event.args.get("worker", "").lower() == self.address.lower()
        if event.event == "TaskDrawn" and mine:
            if self.book.open(args["taskId"], WORK):
                log.info("task offered", extra={"task": str(args["taskId"]), "job": args["jobId"],
                                                "round": args["round"], "index": args["index"]})
        elif event.event == "TaskDisputed" and mine:
            self.book.open(args["taskId"], OPEN_GAME)
        elif event.event == "DisputeOpened" and mine:
            self.book.open(args["gameId"], DEFEND)
            log.warning("result disputed", extra={"task": str(args["taskId"]), "game": args["gameId"],
                                                  "challenger": args["challenger"], "audit": args["audit"]})

    def step(self, entry: Entry) -> None:
        if entry.kind == WORK:
            self.work(entry)
        elif entry.kind == DEFEND:
            self.defend(entry)
        else:
            self.open_audit_game(entry)

    def defend(self, entry: Entry) -> None:
        if "stall-dispute" in self.faults:
            return  # the named faulty worker never answers: it loses on its clock
        outcome = self.play_game(entry.task_id, lambda: self.published_trace(self.game_view(entry.task_id).task_id))
        if outcome is not None:
            self.book.close_entry(entry.task_id, DEFEND, "done", outcome)
            self.metrics.disputes.labels(outcome).inc()
            log.log(logging.INFO if outcome == "won" else logging.WARNING, "dispute %s", outcome,
                    extra={"game": entry.task_id})

    def lane_threads(self) -> int:
        """As many tasks at once as this worker declares it runs (the contracts assign no more)."""
        return self.settings.max_concurrent

    def refusal(self, task) -> str | None:
        """Why this worker declines the task (its device or memory; a stage task: that stage's), or None."""
        manifest = self.reader.manifest(task.job_id)
        stage = task_place(manifest, task.index)[1] if self.reader.is_stage_task(task.task_id) else None
        return offer_refusal(self.reader.job(task.job_id), manifest, self.profile.device_class,
                             self.profile.memory_mib, stage)

    def work(self, entry: Entry) -> None:
        task = self.reader.task(entry.task_id)
        ident = {"task": str(entry.task_id)}
        if task.status == TaskStatus.FINALIZED and task.is_worker(self.address):
            self.book.close_entry(entry.task_id, WORK, "done")
            self.drop_space(entry.task_id)
            log.info("task finalized: paid", extra=ident)
            return
        if not task.is_worker(self.address) or task.status in (TaskStatus.NONE, TaskStatus.PENDING, TaskStatus.CLOSED):
            self.book.close_entry(entry.task_id, WORK, "lost", f"task is {task.status.name} with {task.worker}")
            self.reader.release(entry.task_id)
            self.lane.forget((entry.task_id, WORK))  # a result computed for it is not the next attempt's
            self.abandoned.add(entry.task_id)
            self.drop_space(entry.task_id)
            log.warning("task no longer ours", extra={**ident, "status": task.status.name})
            return
        market = self.market.functions
        if task.status == TaskStatus.OFFERED:
            if (entry.root is not None or entry.task_id in self._spaces
                    or self._early.get(entry.task_id, task.deadline) != task.deadline):
                # Offered again (a stage whose group was reset): what this worker computed for
                # the earlier attempt is not this one's, and a run still going stops.
                self.book.clear_result(entry.task_id, WORK)
                self.lane.forget((entry.task_id, WORK))
                self.abandoned.add(entry.task_id)
                self.drop_space(entry.task_id)
                log.info("offered again: the earlier attempt's result is dropped", extra=ident)
            if not self.take_up(entry, task):
                return
            self.send("acceptTask", market.acceptTask(entry.task_id))
            if not self.reader.is_stage_task(entry.task_id):
                # Train at once, in this step, rather than on the tick that reads the task as
                # Running (a poll later). It is this offer's: one made again drops it above.
                self._early[entry.task_id] = task.deadline
                self.lane.start((entry.task_id, WORK), lambda: self.compute_and_publish(entry.task_id))
        elif task.status == TaskStatus.RUNNING:
            try:
                entry = self.ensure_result(entry)
            except Pending:
                self.report_if_stalled(task)
                raise
            commitment = result_commitment(entry.task_id, entry.root, entry.cid, entry.salt, self.address)
            self.send("commitResult", market.commitResult(entry.task_id, commitment))
        elif task.status == TaskStatus.COMMITTED:
            if task.audited and not task.audit_committed:
                return  # the auditor commits first
            draw = pending_audit_draw(self.client.w3, task, self.reader.job(task.job_id))
            if draw is not None and not draw.ready:
                return  # the audit draw is settled from a block that does not exist yet
            if draw is not None and draw.audited:
                # An audit was drawn: its auditor is drawn first (anyone may; we need it to reveal).
                self.send("settleAudit", market.settleAudit(entry.task_id), random_path=True)
                return
            if entry.salt is None:
                self.book.close_entry(entry.task_id, WORK, "failed", "committed, but the salt was lost")
                log.error("cannot reveal: no salt in the book", extra=ident)
                return
            self.send("revealResult", market.revealResult(entry.task_id, entry.root, entry.cid, entry.salt))

    def take_up(self, entry: Entry, task) -> bool:
        """Before accepting an offer: refuse it (False), or hold its inputs and warm up for
        its model (True)."""
        ident = {"task": str(entry.task_id)}
        try:
            refusal = self.refusal(task)
            if refusal is None:
                self.reader.hold(entry.task_id)  # before it is bound to them
        except UNFETCHABLE as exc:
            self.decline(entry, task, exc)
            return False
        if refusal is not None:
            self.book.close_entry(entry.task_id, WORK, "lost", refusal)
            log.warning("declined offer: %s", refusal, extra=ident)
            return False
        self.warmups.ensure(task.job_id)  # before the compute window's clock starts
        return True

    def decline(self, entry: Entry, task, exc: Exception) -> None:
        """The task's inputs cannot be fetched: decline the offer (its accept penalty, burned,
        the same as letting it time out; repaid if the job ends because nobody can fetch
        them) once, and close the entry. Past the accept deadline there is nothing to send."""
        ident = {"task": str(entry.task_id), "job": task.job_id}
        if self.block <= task.deadline:
            self.send("declineTask", self.market.functions.declineTask(entry.task_id))
        self.book.close_entry(entry.task_id, WORK, "declined", f"inputs cannot be fetched: {exc}"[:300])
        log.warning("declined offer: its inputs cannot be fetched (%s)", type(exc).__name__, extra=ident)

    def ensure_result(self, entry: Entry) -> Entry:
        """The task's result from the book, or computed and published in the lane (raising
        :class:`~truetrain.daemon.lane.Pending` until it is ready), then written to the book."""
        if entry.root is not None and entry.salt is not None:
            return entry
        root, cid = self.lane.take((entry.task_id, WORK), lambda: self.compute_and_publish(entry.task_id))
        self.book.record_result(entry.task_id, WORK, root, cid, new_salt())
        return self.book.get(entry.task_id, WORK)

    def compute_and_publish(self, task_id: int) -> tuple[bytes, str]:
        """Run in the lane: the task's result and the CID it was published under."""
        try:
            return self._compute_and_publish(task_id)
        finally:
            self.reader.release(task_id)  # the inputs held since the offer

    def _compute_and_publish(self, task_id: int) -> tuple[bytes, str]:
        started, at = time.monotonic(), time.time()
        self.faults.before_compute()
        if self.reader.is_stage_task(task_id):
            with self.devices.acquire() as device:
                return self.run_stage(task_id, device, started, at)
        with self.devices.acquire() as device:
            result = self.compute(task_id, device)
        seconds = time.monotonic() - started
        store = WithholdingStore() if "withhold" in self.faults else self.store
        if result.is_aggregation:
            cid = store.add_bytes(result.aggregated.to_bytes()).cid
            log.info("aggregated round", extra={"task": str(task_id), "cid": cid, "seconds": round(seconds, 2),
                                                "started": round(at, 3), "device": device})
        else:
            manifest = self.reader.manifest(decode_task_id(task_id)[0])
            cid, _ = publish_result(store, task_id, result.training, manifest.checkpoint_interval)
            self.metrics.steps.inc(result.steps)
            self.metrics.steps_per_second.set(result.steps / seconds if seconds > 0 else 0)
            log.info("trained task", extra={"task": str(task_id), "steps": result.steps, "cid": cid,
                                            "seconds": round(seconds, 2), "started": round(at, 3), "device": device,
                                            "devices": self.settings.devices if manifest.repro else 1,
                                            "loss": round(result.training.metrics["final_train_loss"], 4)})
        return result.root, cid

    def run_stage(self, task_id: int, device: str, started: float, at: float) -> tuple[bytes, str]:
        """Run in the lane: a pipeline stage with the other stages of its group, published."""
        job_id, round_index, index = decode_task_id(task_id)
        manifest = self.reader.manifest(job_id)
        group = group_indices(manifest, index)
        space = self.space_of(task_id)
        if space is None:
            raise PipelineError(f"stage task {task_id} was never offered")
        self._spaces[task_id] = space
        self.abandoned.discard(task_id)
        board = StageBoard(self.mailbox, space,
                           lambda stage: self.board_of(encode_task_id(job_id, round_index, group[stage])),
                           abandoned=lambda: task_id in self.abandoned)
        tamper = None
        if "corrupt-sent" in self.faults:
            log.warning("fault: corrupting what the stage sends", extra={"task": str(task_id)})
            tamper = corrupt_messages(int(self.faults.arg("corrupt-sent")))
        run = run_stage_task(self.reader, task_id, board, self.store, timeout_s=self.settings.stage_wait_s,
                             device=device, tamper=tamper)
        store = WithholdingStore() if "withhold" in self.faults else self.store
        cid, bundle = publish_stage(store, run, manifest)
        seconds = time.monotonic() - started
        self.metrics.steps.inc(run.steps)
        log.info("trained stage", extra={"task": str(task_id), "stage": run.stage.index, "steps": run.steps,
                                         "cid": cid, "seconds": round(seconds, 2), "started": round(at, 3),
                                         "device": device, "moved": bundle.metrics["moved"]})
        return bundle.root, cid

    def report_if_stalled(self, task) -> None:
        """A stage still running near its deadline is blocked on another stage (or slow):
        say so on chain once (JobMarket.reportStalled). At the deadline the chain honours the
        report when the group shows a stage this one could be waiting on (unheld, drawn
        later, or silent: that one pays), and charges the running timeout otherwise, as it
        would without a report; so reporting never costs more than staying quiet."""
        if task.flags & FLAG_STALLED or not self.reader.is_stage_task(task.task_id):
            return
        margin = max(2, self.reader.job(task.job_id).compute_window // 5)
        if self.block >= task.deadline - margin:
            self.send("reportStalled", self.market.functions.reportStalled(task.task_id))
            log.warning("stage blocked near its deadline: reported", extra={"task": str(task.task_id)})

    def space_of(self, task_id: int) -> str | None:
        """The mailbox space of the current attempt at stage task ``task_id`` (None: never offered)."""
        job_id, round_index, index = decode_task_id(task_id)
        offered = self.reader.offered_block(task_id)
        stages = self.reader.manifest(job_id).pipeline.stages
        return None if offered is None else stage_space(job_id, round_index, index // stages, offered)

    def board_of(self, task_id: int) -> tuple[str, str] | None:
        """Where the current attempt at stage task ``task_id`` posts: its worker's mailbox URL
        (from the profile it published; looked up again after a second, so a redrawn stage
        is found at its new worker) and the attempt's space. None while nobody holds it."""
        cached = self._boards.get(task_id)
        if cached is not None and time.monotonic() - cached[0] < 1.0:
            return cached[1]
        task = self.reader.task(task_id)
        where = None
        if int(task.worker, 16) != 0 and task.status in STAGE_LIVE:
            identity = self.contracts.registry.functions.identityOf(task.worker).call()
            url, space = self.published_mailbox(identity[6], bytes(identity[5])), self.space_of(task_id)
            where = (url, space) if url and space else None
        self._boards[task_id] = (time.monotonic(), where)
        return where

    def drop_space(self, task_id: int) -> None:
        """Forget the records a task of this worker kept (the task or this attempt at it is
        over for it): a stage task's mailbox space, the offer its training started for."""
        self._early.pop(task_id, None)
        space = self._spaces.pop(task_id, None)
        if space is not None and self.mailbox is not None:
            self.mailbox.drop(space)

    def compute(self, task_id: int, device: str) -> ComputedResult:
        """The task's result on ``device``: honest, or the named cheat of a faulty worker
        (training tasks only)."""
        cheat = self.faults.cheat
        job_id, _, index = decode_task_id(task_id)
        if cheat is None or index == self.reader.job(job_id).shards:
            return compute_task(self.reader, task_id, device=device, devices=self.settings.devices)
        log.warning("fault: computing a %s result", cheat, extra={"task": str(task_id)})
        result = faulty_result(self.reader, task_id, cheat, self.faults.arg(cheat), device=device)
        return ComputedResult(task_id, result.merkle_root, training=result)
