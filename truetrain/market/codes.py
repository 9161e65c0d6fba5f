"""The market's enums and id arithmetic, mirrored from the contracts' interfaces."""

from __future__ import annotations

from enum import IntEnum

#: IdentityRegistry role bits.
ROLE_WORKER, ROLE_VERIFIER, ROLE_SUBMITTER = 1, 2, 4


class JobStatus(IntEnum):
    NONE = 0
    ACTIVE = 1
    COMPLETED = 2
    CANCELLED = 3
    EXPIRED = 4


class TaskStatus(IntEnum):
    NONE = 0
    PENDING = 1
    OFFERED = 2
    RUNNING = 3
    COMMITTED = 4
    REVEALED = 5
    CHALLENGE_WINDOW = 6
    DISPUTED = 7
    FINALIZED = 8
    CLOSED = 9


#: Task.flags bits (TaskFlow): the auditor committed, revealed; the task was challenged; its
#: audit draw was settled; an audit was drawn (another auditor is due after a timeout).
FLAG_AUDIT_COMMITTED, FLAG_AUDIT_REVEALED, FLAG_CHALLENGED, FLAG_AUDIT_SETTLED, FLAG_AUDIT_DUE = 1, 2, 4, 8, 16
#: Task.flags bit (TaskFlow): the worker of a running stage reported it blocked (reportStalled).
FLAG_STALLED = 128


def encode_task_id(job_id: int, round_index: int, index: int) -> int:
    """TaskIds.encode: ``jobId << 64 | round << 32 | index``."""
    return (job_id << 64) | (round_index << 32) | index


def decode_task_id(task_id: int) -> tuple[int, int, int]:
    """(job id, round, index) of a task id."""
    return task_id >> 64, (task_id >> 32) & 0xFFFFFFFF, task_id & 0xFFFFFFFF
