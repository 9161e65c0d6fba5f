"""The worker daemon: drive each task drawn to this worker from offer to payment.

``step`` reads the task from the chain and does the one thing its state asks for:

* Offered  → accept, if the job fits this machine (device class, memory), after a warm-up
  step of a model that compiles kernels (truetrain.daemon.warmup);
* Running  → compute the result (train a shard, or aggregate the round) and publish it in
  the background lane (truetrain.daemon.lane; the loop keeps defending games meanwhile),
  persist root, CID and a fresh salt, then commit; a restart finds them in the book and
  commits without training again;
* Committed → reveal, once the audit draw (settled from a block after the commitment) drew
  no audit, or its auditor has committed; a drawn audit's auditor is drawn first
  (``settleAudit``);
* later states → nothing to do; Finalized closes the entry as done, a task that moved to
  another worker (this one timed out, or lost a dispute) as lost.

Disputes: an audit mismatch on one of its tasks makes it open the game
(``openAuditDispute``, unless someone did); every game where it is the worker is driven by
:class:`~truetrain.dispute.GameDriver` with the checkpoint hashes of its *published* result
bundle (a worker whose data is not retrievable cannot defend itself).
"""

from __future__ import annotations

import logging
import time

from truetrain.daemon.base import Daemon
from truetrain.daemon.book import Entry
from truetrain.daemon.devices import DevicePool
from truetrain.daemon.warmup import WarmUps
from truetrain.market import (ROLE_WORKER, TaskStatus, compute_task, decode_task_id, new_salt, pending_audit_draw,
                              publish_result, result_commitment)
from truetrain.market.compute import ComputedResult
from truetrain.market.faulty import WithholdingStore, faulty_result
from truetrain.training.memory import offer_refusal

log = logging.getLogger("worker")

WORK, DEFEND, OPEN_GAME = "work", "defend", "open-game"
WAITING = {TaskStatus.REVEALED, TaskStatus.CHALLENGE_WINDOW, TaskStatus.DISPUTED}


class WorkerDaemon(Daemon):
    role = "worker"
    role_bits = ROLE_WORKER
    #: A game has a clock; a task's work trains (slow).
    kinds = (DEFEND, OPEN_GAME, WORK)
    slow_kinds = frozenset({WORK})
    declares_network = True

    def __init__(self, settings):
        super().__init__(settings)
        #: The device of each of the up to max_concurrent tasks training at once.
        self.devices = DevicePool(self.device, self.lane_threads())
        self.warmups = WarmUps(self, self.devices.acquire)

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
        outcome = self.disputes.step(entry.task_id, lambda: self.published_trace(self.game_view(entry.task_id).task_id))
        if outcome is not None:
            self.book.close_entry(entry.task_id, DEFEND, "done", outcome)
            self.metrics.disputes.labels(outcome).inc()
            log.log(logging.INFO if outcome == "won" else logging.WARNING, "dispute %s", outcome,
                    extra={"game": entry.task_id})

    def lane_threads(self) -> int:
        """As many tasks at once as this worker declares it runs (the contracts assign no more)."""
        return self.settings.max_concurrent

    def refusal(self, job_id: int) -> str | None:
        """Why this worker declines the job's tasks (its device or memory), or None."""
        return offer_refusal(self.reader.job(job_id), self.reader.manifest(job_id), self.profile.device_class,
                             self.profile.memory_mib)

    def work(self, entry: Entry) -> None:
        task = self.reader.task(entry.task_id)
        ident = {"task": str(entry.task_id)}
        if task.status == TaskStatus.FINALIZED and task.is_worker(self.address):
            self.book.close_entry(entry.task_id, WORK, "done")
            log.info("task finalized: paid", extra=ident)
            return
        if not task.is_worker(self.address) or task.status in (TaskStatus.PENDING, TaskStatus.CLOSED):
            self.book.close_entry(entry.task_id, WORK, "lost", f"task is {task.status.name} with {task.worker}")
            log.warning("task no longer ours", extra={**ident, "status": task.status.name})
            return
        market = self.market.functions
        if task.status == TaskStatus.OFFERED:
            refusal = self.refusal(task.job_id)
            if refusal is not None:
                self.book.close_entry(entry.task_id, WORK, "lost", refusal)
                log.warning("declined offer: %s", refusal, extra=ident)
                return
            self.warmups.ensure(task.job_id)  # before the compute window's clock starts
            self.send("acceptTask", market.acceptTask(entry.task_id))
        elif task.status == TaskStatus.RUNNING:
            entry = self.ensure_result(entry)
            commitment = result_commitment(entry.root, entry.cid, entry.salt, self.address)
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
        started, at = time.monotonic(), time.time()
        self.faults.before_compute()
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
                                            "loss": round(result.training.metrics["final_train_loss"], 4)})
        return result.root, cid

    def compute(self, task_id: int, device: str) -> ComputedResult:
        """The task's result on ``device``: honest, or the named cheat of a faulty worker
        (training tasks only)."""
        cheat = self.faults.cheat
        job_id, _, index = decode_task_id(task_id)
        if cheat is None or index == self.reader.job(job_id).shards:
            return compute_task(self.reader, task_id, device=device)
        log.warning("fault: computing a %s result", cheat, extra={"task": str(task_id)})
        result = faulty_result(self.reader, task_id, cheat, self.faults.arg(cheat), device=device)
        return ComputedResult(task_id, result.merkle_root, training=result)
