"""A task's audit draw as the contracts settle it: from the hash of a block after the worker's
commitment (FutureRandomness), so every role can tell from the chain alone whether a
commitment will be audited, once that block exists, and nobody could tell before.
"""

from __future__ import annotations

from dataclasses import dataclass

from eth_abi import encode

from truetrain.hashing import keccak256

from .codes import FLAG_AUDIT_DUE, FLAG_AUDIT_SETTLED, TaskStatus
from .randomness import lapsed
from .views import JobView, TaskView

BPS = 10_000


@dataclass(frozen=True)
class AuditDraw:
    """The draw of one unsettled commitment: its ticket block, whether that block's hash can
    be read now, and (once it can) whether it drew an audit (a lapsed draw counts as drawn:
    ``settleAudit`` then asks for its auditor from a new ticket)."""

    ticket: int
    ready: bool
    audited: bool


def pending_audit_draw(w3, task: TaskView, job: JobView) -> AuditDraw | None:
    """The task's audit draw still to settle, or None when there is none (not Committed, no
    audit rate, already settled, or an auditor is already drawn)."""
    due = bool(task.flags & FLAG_AUDIT_DUE)
    if task.status != TaskStatus.COMMITTED or task.audited or task.flags & FLAG_AUDIT_SETTLED:
        return None
    if job.audit_rate_bps == 0 and not due:
        return None
    ticket = task.deadline - job.reveal_window
    block = w3.eth.block_number
    if block <= ticket:
        return AuditDraw(ticket, False, False)
    if lapsed(ticket, block):  # nobody settled it in its epoch: it counts as drawn, re-requested
        return AuditDraw(ticket, True, True)
    block_hash = bytes(w3.eth.get_block(ticket)["hash"])
    random = keccak256(encode(["bytes32", "bytes32"], [block_hash, task.task_id.to_bytes(32, "big")]))
    return AuditDraw(ticket, True, due or int.from_bytes(random, "big") % BPS < job.audit_rate_bps)
