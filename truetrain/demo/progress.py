"""The demo's live view: the job's market events since the last look, as one line each."""

from __future__ import annotations

import time

from truetrain.cli_options import format_tokens
from truetrain.market import JobStatus, JobView, decode_task_id

EVENTS = ("TaskDrawn", "ResultCommitted", "AuditorDrawn", "AuditWaived", "ResultRevealed", "AuditRevealed",
          "TaskFinalized", "TaskTimedOut", "TaskRequeued", "TaskDisputed", "AggregationReset", "RoundAdvanced",
          "JobCompleted")


class Progress:
    def __init__(self, contracts, job_id: int, names: dict[str, str], started: float):
        self.market = contracts.market
        self.w3 = contracts.client.w3
        self.job_id = job_id
        self.names = names
        self.started = started
        self.next_block = self.w3.eth.block_number
        job = JobView.read(self.market, job_id)
        self.shards, self.stages = job.shards, job.stages

    def job_status(self) -> JobStatus:
        return JobStatus(self.market.functions.jobOf(self.job_id).call()[1])

    def name(self, address: str) -> str:
        return self.names.get(address, address[:10])

    def what(self, task_id: int) -> str:
        _, round_index, index = decode_task_id(task_id)
        if index == self.shards:
            kind = "aggregation"
        elif self.stages > 1:
            kind = f"shard {index // self.stages} stage {index % self.stages}"
        else:
            kind = f"shard {index}"
        return f"round {round_index + 1} {kind:11}"

    def poll(self) -> None:
        head = self.w3.eth.block_number
        if head < self.next_block:
            return
        found = []
        for event in EVENTS:
            for log in getattr(self.market.events, event)().get_logs(from_block=self.next_block, to_block=head):
                found.append(log)
        self.next_block = head + 1
        for log in sorted(found, key=lambda e: (e["blockNumber"], e["logIndex"])):
            line = self.describe(log["event"], log["args"])
            if line:
                print(f"  {time.monotonic() - self.started:6.1f}s  {line}", flush=True)

    def describe(self, event: str, a) -> str | None:
        if "jobId" in a and a["jobId"] != self.job_id:
            return None
        if "taskId" in a and a["taskId"] >> 64 != self.job_id:
            return None
        if event == "TaskDrawn":
            return f"{self.what(a['taskId'])} offered to {self.name(a['worker'])}"
        if event == "ResultCommitted":
            return f"{self.what(a['taskId'])} committed by {self.name(a['worker'])} (root hidden)"
        if event == "AuditorDrawn":
            return f"{self.what(a['taskId'])} audit drawn: {self.name(a['auditor'])} replays it"
        if event == "ResultRevealed":
            return f"{self.what(a['taskId'])} revealed root 0x{bytes(a['root']).hex()[:12]}…"
        if event == "AuditRevealed":
            return f"{self.what(a['taskId'])} audit revealed root 0x{bytes(a['root']).hex()[:12]}…"
        if event == "TaskFinalized":
            fee = f", audit fee {format_tokens(a['auditFee'])} to {self.name(a['auditor'])}" if a["auditFee"] else ""
            return f"{self.what(a['taskId'])} finalized: {format_tokens(a['reward'])} TRAIN to {self.name(a['worker'])}{fee}"
        if event == "TaskTimedOut":
            return f"{self.what(a['taskId'])} timed out: {self.name(a['account'])} loses {format_tokens(a['penalty'])} TRAIN"
        if event == "TaskRequeued":
            return f"{self.what(a['taskId'])} back in the queue"
        if event == "AggregationReset":
            return f"{self.what(a['taskId'])} reset: a shard result it read was discarded"
        if event == "TaskDisputed":
            return f"{self.what(a['taskId'])} DISPUTED: audit root differs"
        if event == "RoundAdvanced":
            bar = "#" * a["round"] + "-" * (self.rounds() - a["round"])
            return f"[{bar}] round {a['round']} done: global checkpoint {a['checkpointCid']}"
        if event == "JobCompleted":
            return f"job {self.job_id} completed"
        return None

    def rounds(self) -> int:
        return self.market.functions.jobOf(self.job_id).call()[3]
