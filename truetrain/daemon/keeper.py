"""The keeper duty: the permissionless calls that keep jobs moving.

Nobody in particular is paid to draw a job's next task, to time out a late worker or to
finalize a task whose challenge window is over, so any daemon may do it (``keeper = true``).
The keeper learns every task's current deadline from events (``due`` = deadline + 1 in its
book; for an audit draw, the block after its ticket, when it settles a drawn audit by drawing
the auditor) and looks at a task again only once that block is reached; it reads the task from the
chain before it acts, and a call that gas estimation refuses sends nothing.
"""

from __future__ import annotations

import logging

from truetrain.errors import ContractRevert
from truetrain.market import TaskStatus, pending_audit_draw

log = logging.getLogger("truetrain.keeper")

KIND = "keep"
#: Events that carry a task's new phase deadline, and the argument holding it.
DEADLINE_ARGS = {
    "TaskDrawn": "acceptDeadline", "TaskAccepted": "commitDeadline", "ResultCommitted": "revealDeadline",
    "AuditorDrawn": "auditDeadline", "AuditCommitted": "revealDeadline", "AuditWaived": "revealDeadline",
    "ChallengeWindowOpened": "deadline", "AuditRequested": "ticket",
}
ENDED = {"TaskFinalized", "TaskClosed", "TaskRequeued"}
JOB_ENDED = {"JobCompleted", "JobCancelled", "JobExpired", "JobInputsUnavailable"}
#: Refusals of drawTasks that mean "nothing to do for this job now".
NOTHING_TO_DRAW = {"JobNothingToDraw", "JobNoEligibleWorker", "JobOffersNotReady"}
TIMEOUTABLE = {TaskStatus.OFFERED, TaskStatus.RUNNING, TaskStatus.COMMITTED, TaskStatus.REVEALED}
DRAWS_PER_TICK = 8
MAX_BATCH = 32
#: Blocks a keeper leaves a new job undrawn while it has not bound its program: its submitter
#: sends the binding as soon as the creation is mined, and a draw that came first would leave
#: the job's disputes to a committee (DisputeGame.bindProgram is refused once task 0 is drawn).
#: A job that binds nothing (stock, split, CNN) is drawn when the grace is over.
BIND_GRACE_BLOCKS = 8


class Keeper:
    def __init__(self, daemon):
        self.daemon = daemon
        #: new jobs still in their binding grace: job id -> the block they were created in
        self._created: dict[int, int] = {}

    @property
    def book(self):
        return self.daemon.book

    def on_event(self, event) -> None:
        args = event.args
        if event.event == "JobCreated":
            self.book.set_job(args["jobId"], True)
            self._created[args["jobId"]] = event.block_number
        elif event.event in JOB_ENDED:
            self.book.set_job(args["jobId"], False)
        elif event.event in DEADLINE_ARGS:
            due = int(args[DEADLINE_ARGS[event.event]]) + 1
            self.book.open(args["taskId"], KIND, due=due)
            self.book.set_due(args["taskId"], KIND, due)
        elif event.event in ENDED:
            self.book.close_entry(args["taskId"], KIND, "done")

    def tick(self) -> None:
        for job_id in self.book.active_jobs():
            self.draw(job_id)
        block = self.daemon.block
        finalizable = []
        for entry in self.book.open_entries(KIND, due_by=block):
            task = self.daemon.reader.task(entry.task_id)
            if task.status in (TaskStatus.FINALIZED, TaskStatus.CLOSED, TaskStatus.PENDING, TaskStatus.NONE):
                self.book.close_entry(entry.task_id, KIND, "done")
            elif block <= task.deadline:
                draw = pending_audit_draw(self.daemon.client.w3, task, self.daemon.reader.job(task.job_id))
                if draw is not None and draw.ready and draw.audited:
                    # An audit was drawn from the ticket's hash: draw its auditor.
                    self.act("settleAudit", self.daemon.market.functions.settleAudit(entry.task_id), entry.task_id)
                else:
                    self.book.set_due(entry.task_id, KIND, task.deadline + 1)
            elif task.status == TaskStatus.CHALLENGE_WINDOW:
                finalizable.append(entry.task_id)
            elif task.status in TIMEOUTABLE:
                self.act("timeoutTask", self.daemon.market.functions.timeoutTask(entry.task_id), entry.task_id)
            else:  # Disputed: the dispute game moves it on
                self.book.set_due(entry.task_id, KIND, block + 10)
        # In id order: a round's shard tasks before its aggregation task, which is paid only
        # once they all are.
        finalizable.sort()
        for start in range(0, len(finalizable), MAX_BATCH):
            batch = finalizable[start:start + MAX_BATCH]
            call = self.daemon.market.functions.finalize(batch[0]) if len(batch) == 1 else \
                self.daemon.market.functions.finalizeMany(batch)
            self.act("finalize" if len(batch) == 1 else "finalizeMany", call, batch[0])

    def act(self, name: str, call, task_id: int) -> None:
        try:
            # A timeout may redraw the task, an audit settle draws an auditor: random paths.
            self.daemon.send(name, call, random_path=name in ("timeoutTask", "settleAudit"))
        except ContractRevert as exc:  # another keeper was first, or the state moved on
            log.info("%s of task %s refused: %s", name, task_id, exc.error)
            self.book.set_due(task_id, KIND, self.daemon.block + 1)

    def _binding(self, job_id: int) -> bool:
        """Whether job ``job_id`` is new and its program may still be bound: wait for it."""
        created = self._created.get(job_id)
        if created is None:
            return False
        if self.daemon.block < created + BIND_GRACE_BLOCKS and \
                not any(bytes(self.daemon.game.functions.programOf(job_id).call()[0])):
            return True
        del self._created[job_id]
        return False

    def draw(self, job_id: int) -> None:
        """Offer up to ``DRAWS_PER_TICK`` of the job's next tasks in one transaction.

        Offers are drawn from the future: a ``drawTasks`` when the job has no live offer
        ticket asks for one and draws nothing; one after the ticket's block draws from its
        hash (and asks for the next ticket when tasks are left). So the keeper waits while
        the ticket's block is not yet mined. ``drawTasks`` stops at the first task it cannot
        draw and keeps what it drew, and reverts (nothing to do for this job now) only when
        it drew none."""
        if self._binding(job_id):
            return
        market = self.daemon.market
        ticket = market.functions.offerTicketOf(job_id).call()
        if ticket != 0 and self.daemon.block <= ticket:
            return
        call = market.functions.drawTasks(job_id, DRAWS_PER_TICK)
        try:
            self.daemon.send("drawTasks", call, random_path=True)
        except ContractRevert as exc:
            if exc.error == "JobPastExpiry":
                self.act("expireJob", market.functions.expireJob(job_id), 0)
            elif exc.error == "JobNotActive":
                self.book.set_job(job_id, False)
            elif exc.error not in NOTHING_TO_DRAW:
                log.warning("drawTasks for job %s refused: %s", job_id, exc)
