"""Jobs and tasks as read from JobMarket, decoded into named, typed records."""

from __future__ import annotations

from dataclasses import dataclass

from .codes import FLAG_AUDIT_COMMITTED, FLAG_AUDIT_REVEALED, JobStatus, TaskStatus, decode_task_id

ZERO_ADDRESS = "0x" + "00" * 20


def _fields(market, function: str) -> list[str]:
    abi = next(f for f in market.abi if f.get("name") == function)
    return [c["name"] for c in abi["outputs"][0]["components"]]


@dataclass(frozen=True)
class JobView:
    """``JobMarket.jobOf`` with its struct's field names (snake case where it helps)."""

    job_id: int
    submitter: str
    status: JobStatus
    shards: int
    rounds: int
    reward_per_task: int
    audit_fee: int
    expiry_block: int
    worker_collateral: int
    accept_window: int
    compute_window: int
    reveal_window: int
    challenge_window: int
    audit_rate_bps: int
    device_class: int
    memory_mib: int
    current_round: int
    next_index: int
    finalized_in_round: int
    pending_count: int
    escrow: int
    surplus: int
    manifest_hash: bytes
    checkpoint_hash: bytes
    checkpoint_cid: str
    checkpoint_leaves: int
    #: Network terms on its workers (0 = none).
    min_fetch_kibps: int = 0
    max_rpc_rtt_ms: int = 0
    #: Stages each shard's model is split into (1: not pipelined; ``shards`` counts stage tasks).
    stages: int = 1
    #: Shard tasks of the current round whose current attempt revealed its result (the
    #: round's aggregation task is drawn once all have).
    revealed_in_round: int = 0

    @classmethod
    def read(cls, market, job_id: int) -> JobView:
        raw = dict(zip(_fields(market, "jobOf"), market.functions.jobOf(job_id).call()))
        return cls(job_id, raw["submitter"], JobStatus(raw["status"]), raw["shards"], raw["rounds"],
                   raw["rewardPerTask"], raw["auditFee"], raw["expiryBlock"], raw["workerCollateral"],
                   raw["acceptWindow"], raw["computeWindow"], raw["revealWindow"], raw["challengeWindow"],
                   raw["auditRateBps"], raw["deviceClass"], raw["memoryMiB"], raw["currentRound"],
                   raw["nextIndex"], raw["finalizedInRound"], raw["pendingCount"], raw["escrow"],
                   raw["surplus"], bytes(raw["manifestHash"]), bytes(raw["checkpointHash"]),
                   raw["checkpointCid"], raw["checkpointLeaves"], raw["minFetchKiBps"], raw["maxRpcRttMs"],
                   raw["stages"], raw["revealedInRound"])

    @property
    def exists(self) -> bool:
        return self.status != JobStatus.NONE

    @property
    def tasks_per_round(self) -> int:
        return self.shards + 1

    @property
    def task_count(self) -> int:
        return self.tasks_per_round * self.rounds

    def escrow_formula(self) -> int:
        """What the job escrowed at creation: (shards + 1) × rounds × (reward + audit fee)."""
        return self.task_count * (self.reward_per_task + self.audit_fee)


@dataclass(frozen=True)
class TaskView:
    """``JobMarket.taskOf`` plus the id's parts."""

    task_id: int
    worker: str
    status: TaskStatus
    deadline: int
    flags: int
    auditor: str
    result: bytes
    audit: bytes

    @classmethod
    def read(cls, market, task_id: int) -> TaskView:
        raw = dict(zip(_fields(market, "taskOf"), market.functions.taskOf(task_id).call()))
        return cls(task_id, raw["worker"], TaskStatus(raw["status"]), raw["deadline"], raw["flags"],
                   raw["auditor"], bytes(raw["result"]), bytes(raw["audit"]))

    @property
    def job_id(self) -> int:
        return decode_task_id(self.task_id)[0]

    @property
    def round(self) -> int:
        return decode_task_id(self.task_id)[1]

    @property
    def index(self) -> int:
        return decode_task_id(self.task_id)[2]

    @property
    def audited(self) -> bool:
        return self.auditor.lower() != ZERO_ADDRESS

    @property
    def audit_committed(self) -> bool:
        return bool(self.flags & FLAG_AUDIT_COMMITTED)

    @property
    def audit_revealed(self) -> bool:
        return bool(self.flags & FLAG_AUDIT_REVEALED)

    def is_worker(self, address: str) -> bool:
        return self.worker.lower() == address.lower()

    def is_auditor(self, address: str) -> bool:
        return self.auditor.lower() == address.lower()
