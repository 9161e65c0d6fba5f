"""The worker daemon: drive each task drawn to this worker from offer to payment.

``step`` reads the task from the chain and does the one thing its state asks for:

* Offered  → accept, if the job fits this machine (device class, memory);
* Running  → compute the result (train a shard, or aggregate the round), publish it,
  persist root, CID and a fresh salt, then commit; a restart finds them in the book and
  commits without training again;
* Committed → reveal, once an auditor (if one was drawn) has committed;
* later states → nothing to do; Finalized closes the entry as done, a task that moved to
  another worker (this one timed out) as lost.
"""

from __future__ import annotations

import logging
import time

from truetrain.daemon.base import Daemon
from truetrain.daemon.book import Entry
from truetrain.hardware import detect
from truetrain.market import (ROLE_WORKER, TaskStatus, compute_task, decode_task_id, new_salt, publish_result,
                              result_commitment)

log = logging.getLogger("worker")

WORK = "work"
WAITING = {TaskStatus.REVEALED, TaskStatus.CHALLENGE_WINDOW, TaskStatus.DISPUTED}


class WorkerDaemon(Daemon):
    role = "worker"
    role_bits = ROLE_WORKER
    kinds = (WORK,)

    def start(self) -> None:
        self.profile = detect()
        super().start()

    def on_event(self, event) -> None:
        if event.event == "TaskDrawn" and event.args["worker"].lower() == self.address.lower():
            if self.book.open(event.args["taskId"], WORK):
                log.info("task offered", extra={"task": str(event.args["taskId"]), "job": event.args["jobId"],
                                                "round": event.args["round"], "index": event.args["index"]})

    def fits(self, job) -> bool:
        return job.device_class <= self.profile.device_class and job.memory_mib <= self.profile.memory_mib

    def step(self, entry: Entry) -> None:
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
            job = self.reader.job(task.job_id)
            if not self.fits(job):
                self.book.close_entry(entry.task_id, WORK, "lost", "job does not fit this machine")
                log.warning("declined offer: job needs device class %d and %d MiB", job.device_class, job.memory_mib,
                            extra=ident)
                return
            self.send("acceptTask", market.acceptTask(entry.task_id))
        elif task.status == TaskStatus.RUNNING:
            entry = self.ensure_result(entry)
            commitment = result_commitment(entry.root, entry.cid, entry.salt, self.address)
            # Committing may draw an auditor (prevrandao): a random path.
            self.send("commitResult", market.commitResult(entry.task_id, commitment), random_path=True)
        elif task.status == TaskStatus.COMMITTED:
            if task.audited and not task.audit_committed:
                return  # the auditor commits first
            if entry.salt is None:
                self.book.close_entry(entry.task_id, WORK, "failed", "committed, but the salt was lost")
                log.error("cannot reveal: no salt in the book", extra=ident)
                return
            self.send("revealResult", market.revealResult(entry.task_id, entry.root, entry.cid, entry.salt))

    def ensure_result(self, entry: Entry) -> Entry:
        """The task's result from the book, or computed, published and written to the book now."""
        if entry.root is not None and entry.salt is not None:
            return entry
        started = time.monotonic()
        result = compute_task(self.reader, entry.task_id, device=self.device)
        seconds = time.monotonic() - started
        if result.is_aggregation:
            cid = self.store.add_bytes(result.aggregated.to_bytes()).cid
            log.info("aggregated round", extra={"task": str(entry.task_id), "cid": cid, "seconds": round(seconds, 2)})
        else:
            manifest = self.reader.manifest(decode_task_id(entry.task_id)[0])
            cid, _ = publish_result(self.store, entry.task_id, result.training, manifest.checkpoint_interval)
            self.metrics.steps.inc(result.steps)
            self.metrics.steps_per_second.set(result.steps / seconds if seconds > 0 else 0)
            log.info("trained task", extra={"task": str(entry.task_id), "steps": result.steps, "cid": cid,
                                            "seconds": round(seconds, 2),
                                            "loss": round(result.training.metrics["final_train_loss"], 4)})
        self.book.record_result(entry.task_id, WORK, result.root, cid, new_salt())
        return self.book.get(entry.task_id, WORK)
