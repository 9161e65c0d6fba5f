"""The market as the roles see it: codes, decoded views, commitments, published results,
verified task inputs and the computation of a task's result.

Worker, verifier and submitter all go through this package, so the three agree on how a
task's inputs are found and checked and on what a result looks like on IPFS.
"""

from .audit_draw import AuditDraw, pending_audit_draw
from .codes import (ROLE_SUBMITTER, ROLE_VERIFIER, ROLE_WORKER, JobStatus, TaskStatus, decode_task_id,
                    encode_task_id)
from .commitments import audit_commitment, new_salt, result_commitment
from .compute import ComputedResult, compute_task
from .reader import MarketReader
from .results import ResultBundle, publish_result
from .views import JobView, TaskView

__all__ = [
    "ROLE_SUBMITTER", "ROLE_VERIFIER", "ROLE_WORKER", "AuditDraw", "ComputedResult", "JobStatus", "JobView",
    "MarketReader", "ResultBundle", "TaskStatus", "TaskView", "audit_commitment", "compute_task",
    "decode_task_id", "encode_task_id", "new_salt", "pending_audit_draw", "publish_result",
    "result_commitment",
]
