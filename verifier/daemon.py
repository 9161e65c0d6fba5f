"""The verifier daemon: audit the tasks drawn to it, and replay a sample of the others.

Audit (``AuditorDrawn`` names this verifier) — ``step`` reads the task from the chain:

* Committed, audit not committed → replay the task from its committed inputs (the same
  verified manifest, shard and start checkpoint the worker used, or the round's results
  for an aggregation task), persist root and salt, commit ``h(root, salt, auditor)``;
* Revealed (the worker revealed after our commit) → reveal our root; the market compares;
* later states → done: ChallengeWindow/Finalized mean the roots matched, Disputed not.

Sample (``ChallengeWindowOpened`` for a task not audited by this verifier, picked with
probability ``sample_rate`` by a hash of task id and address, so a restart picks the same
ones): replay the task and compare with the revealed root while the window is open. A
mismatch is logged and counted (the challenge itself is the dispute game's part).
"""

from __future__ import annotations

import logging

from truetrain.daemon.base import Daemon
from truetrain.daemon.book import Entry
from truetrain.hashing import keccak256
from truetrain.market import ROLE_VERIFIER, TaskStatus, audit_commitment, compute_task, new_salt

log = logging.getLogger("verifier")

AUDIT, SAMPLE = "audit", "sample"
SETTLED = {TaskStatus.CHALLENGE_WINDOW: "match", TaskStatus.FINALIZED: "match", TaskStatus.DISPUTED: "mismatch"}


class VerifierDaemon(Daemon):
    role = "verifier"
    role_bits = ROLE_VERIFIER
    kinds = (AUDIT, SAMPLE)

    def on_event(self, event) -> None:
        args = event.args
        if event.event == "AuditorDrawn" and args["auditor"].lower() == self.address.lower():
            if self.book.open(args["taskId"], AUDIT):
                log.info("audit drawn", extra={"task": str(args["taskId"]), "deadline": args["auditDeadline"]})
        elif event.event == "ChallengeWindowOpened" and self.sampled(args["taskId"]):
            self.book.open(args["taskId"], SAMPLE)

    def sampled(self, task_id: int) -> bool:
        rate = self.settings.sample_rate
        if rate <= 0:
            return False
        draw = int.from_bytes(keccak256(task_id.to_bytes(32, "big") + bytes.fromhex(self.address[2:]))[:8], "big")
        return draw < rate * 2**64

    def step(self, entry: Entry) -> None:
        if entry.kind == AUDIT:
            self.audit(entry)
        else:
            self.sample(entry)

    def audit(self, entry: Entry) -> None:
        task = self.reader.task(entry.task_id)
        ident = {"task": str(entry.task_id)}
        if not task.is_auditor(self.address):
            self.book.close_entry(entry.task_id, AUDIT, "lost", f"task is {task.status.name}, auditor {task.auditor}")
            return
        if task.status in SETTLED:
            outcome = SETTLED[task.status]
            self.metrics.audits.labels(AUDIT, outcome).inc()
            self.book.close_entry(entry.task_id, AUDIT, "done", outcome)
            log.info("audit settled: %s", outcome, extra=ident)
            return
        market = self.market.functions
        if task.status == TaskStatus.COMMITTED and not task.audit_committed:
            if entry.root is None or entry.salt is None:
                root = compute_task(self.reader, entry.task_id, device=self.device).root
                self.book.record_result(entry.task_id, AUDIT, root, None, new_salt())
                entry = self.book.get(entry.task_id, AUDIT)
            self.send("commitAudit", market.commitAudit(entry.task_id, audit_commitment(entry.root, entry.salt, self.address)))
        elif task.status == TaskStatus.REVEALED and task.audit_committed and not task.audit_revealed:
            self.send("revealAudit", market.revealAudit(entry.task_id, entry.root, entry.salt))

    def sample(self, entry: Entry) -> None:
        task = self.reader.task(entry.task_id)
        if task.is_auditor(self.address) or task.is_worker(self.address):
            self.book.close_entry(entry.task_id, SAMPLE, "done", "own task")
            return
        if task.status != TaskStatus.CHALLENGE_WINDOW:
            self.book.close_entry(entry.task_id, SAMPLE, "done", f"window closed ({task.status.name})")
            return
        root = compute_task(self.reader, entry.task_id, device=self.device).root
        outcome = "match" if root == task.result else "mismatch"
        self.metrics.audits.labels(SAMPLE, outcome).inc()
        self.book.record_result(entry.task_id, SAMPLE, root, None, b"")
        self.book.close_entry(entry.task_id, SAMPLE, "done", outcome)
        level = logging.INFO if outcome == "match" else logging.WARNING
        log.log(level, "sampled replay: %s", outcome, extra={"task": str(entry.task_id), "root": "0x" + root.hex(),
                                                             "revealed": "0x" + task.result.hex()})
