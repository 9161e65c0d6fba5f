"""Jobs and their tasks as plain, JSON-ready dicts (token amounts in wei, as decimal strings).

Everything comes from JobMarket's views and logs and, for names, losses and held-out
metrics, from the content the chain names on IPFS, checked against its recorded hash.
"""

from __future__ import annotations

from collections import defaultdict

from truetrain.demo.report import token_flows
from truetrain.errors import TruetrainError
from truetrain.market import JobStatus, TaskStatus, TaskView, encode_task_id
from truetrain.market.codes import FLAG_CHALLENGED
from truetrain.market.views import ZERO_ADDRESS

from .source import wei

#: Largest global checkpoint the explorer evaluates or serves for download.
MAX_CHECKPOINT = 256 * 1024 * 1024


def manifest_of(src, job_id: int):
    """The job's manifest (checked against its on-chain hash), or None when unavailable."""
    try:
        return src.reader.manifest(job_id)
    except TruetrainError:
        return None


def job_count(src) -> int:
    return src["market"].functions.jobCount().call()


def job_row(src, job_id: int) -> dict:
    job = src.reader.job(job_id)
    manifest = manifest_of(src, job_id)
    return {"id": job_id, "name": manifest.name if manifest else None, "status": job.status.name.lower(),
            "rounds": job.rounds, "rounds_done": job.current_round, "shards": job.shards // job.stages,
            "stages": job.stages,
            "escrow_left": wei(job.escrow), "submitter": job.submitter,
            "reward_per_task": wei(job.reward_per_task), "audit_fee": wei(job.audit_fee)}


def job_list(src) -> list[dict]:
    return [job_row(src, job_id) for job_id in range(job_count(src), 0, -1)]


def _task_logs(src, event: str, job_id: int, contract: str = "market") -> dict[int, list]:
    """``event`` logs of the job's tasks, by task id (tasks are indexed, jobs are the id's top bits)."""
    out: dict[int, list] = defaultdict(list)
    for log in src.logs(contract, event):
        if log["args"]["taskId"] >> 64 == job_id:
            out[log["args"]["taskId"]].append(log)
    return out


def tasks_of(src, job, games: dict[int, list]) -> list[dict]:
    market = src["market"]
    finalized = _task_logs(src, "TaskFinalized", job.job_id)
    timeouts = _task_logs(src, "TaskTimedOut", job.job_id)
    reveals = _task_logs(src, "ResultRevealed", job.job_id)
    rows = []
    for round_index in range(job.rounds):
        for index in range(job.tasks_per_round):
            task_id = encode_task_id(job.job_id, round_index, index)
            task = TaskView.read(market, task_id)
            paid = finalized.get(task_id, [])
            revealed = reveals.get(task_id, [])
            rows.append({
                "id": str(task_id), "round": round_index + 1, "index": index,
                "kind": "aggregation" if index == job.shards else (
                    f"shard {index // job.stages}, stage {index % job.stages}" if job.stages > 1 else f"shard {index}"),
                "status": task.status.name.lower(),
                "worker": None if task.worker == ZERO_ADDRESS else task.worker,
                # (a Pending task's `deadline` is the block it was sent back in, not a deadline)
                "deadline": (task.deadline or None) if task.status not in (TaskStatus.NONE, TaskStatus.FINALIZED,
                                                                           TaskStatus.PENDING) else None,
                "auditor": task.auditor if task.audited else None,
                "audit": ("revealed" if task.audit_revealed else "committed" if task.audit_committed
                          else "drawn" if task.audited else None),
                "challenged": bool(task.flags & FLAG_CHALLENGED) or task_id in games,
                "games": [g["args"]["gameId"] for g in games.get(task_id, [])],
                "timeouts": [{"account": t["args"]["account"], "penalty": wei(t["args"]["penalty"])}
                             for t in timeouts.get(task_id, [])],
                "result_cid": revealed[-1]["args"]["resultCid"] if revealed else None,
                "reward": wei(paid[-1]["args"]["reward"]) if paid else None,
            })
    return rows


def _bundle_loss(src, cid: str) -> float | None:
    metrics = (src.fetch_json(cid, None) or {}).get("metrics")
    loss = metrics.get("mean_train_loss") if isinstance(metrics, dict) else None
    return float(loss) if isinstance(loss, (int, float)) and not isinstance(loss, bool) else None


def _heldout(src, manifest, job_id: int, cid: str, digest: bytes) -> float | None:
    from truetrain.market.outcome import heldout_metric
    from truetrain.training import decode_checkpoint

    def compute():
        try:
            data = src.fetch_checkpoint(cid, digest, MAX_CHECKPOINT)
            return heldout_metric(manifest, decode_checkpoint(data), src.reader.test_set(job_id))
        except (TruetrainError, ValueError, RuntimeError):
            return None

    return src.cached(("heldout", digest), compute)


def round_metrics(src, job, tasks: list[dict], manifest) -> list[dict]:
    """Per round: mean of its shard tasks' mean training loss (from their result bundles, the
    ones revealed so far) and the held-out metric of the global checkpoint after it."""
    advanced = src.reader.rounds_advanced(job.job_id)
    out = []
    for round_index in range(job.rounds):
        shard_tasks = [t for t in tasks if t["round"] == round_index + 1 and t["kind"] != "aggregation"]
        losses = [loss for t in shard_tasks if t["result_cid"]
                  for loss in [_bundle_loss(src, t["result_cid"])] if loss is not None]
        after = advanced.get(round_index + 1)
        heldout = _heldout(src, manifest, job.job_id, *after) if after and manifest else None
        out.append({"round": round_index + 1, "mean_train_loss": sum(losses) / len(losses) if losses else None,
                    "heldout": heldout, "checkpoint_cid": after[0] if after else None})
    return out


def job_detail(src, job_id: int) -> dict:
    """The job page's data (:class:`~truetrain.errors.UnknownJob` when there is no such job)."""
    job = src.reader.job(job_id)
    created = src.reader.job_created(job_id)["args"]
    manifest = manifest_of(src, job_id)
    games = _task_logs(src, "DisputeOpened", job_id, contract="game")
    tasks = tasks_of(src, job, games)
    _, money = token_flows(src.contracts, job_id, {})
    refunds = [{"kind": "refund", "amount": wei(e["args"]["amount"]), "block": e["blockNumber"]}
               for e in src.logs("market", "Refunded", jobId=job_id)]
    refunds += [{"kind": "task closed", "amount": wei(e["args"]["refund"]), "block": e["blockNumber"],
                 "task": str(e["args"]["taskId"])}
                for logs in _task_logs(src, "TaskClosed", job_id).values() for e in logs]
    lm = manifest is not None and manifest.model.kind == "lm"
    return {
        **job_row(src, job_id),
        "manifest_cid": created["manifestCid"], "manifest_hash": "0x" + job.manifest_hash.hex(),
        "model": manifest.model.kind if manifest else None,
        "numeric_mode": manifest.numeric_mode if manifest else None,
        "steps_per_task": manifest.steps_per_task if manifest else None,
        "checkpoint_interval": manifest.checkpoint_interval if manifest else None,
        "heldout_metric": "bits per byte" if lm else "accuracy",
        "worker_collateral": wei(job.worker_collateral), "escrowed": wei(money["escrow"]),
        "paid_rewards": wei(sum(money["rewards"].values())), "paid_audit_fees": wei(sum(money["fees"].values())),
        "refunded": wei(money["refunded"]), "penalties": wei(money["penalties"]),
        "expiry_block": job.expiry_block,
        "checkpoint": ({"cid": job.checkpoint_cid, "hash": "0x" + job.checkpoint_hash.hex(),
                        "final": job.status == JobStatus.COMPLETED} if job.checkpoint_cid else None),
        "tasks": tasks, "per_round": round_metrics(src, job, tasks, manifest), "refunds": refunds,
    }


def checkpoint_bytes(src, job_id: int) -> tuple[str, bytes]:
    """(CID, bytes) of the job's current global checkpoint, checked against its hash."""
    job = src.reader.job(job_id)
    if not job.checkpoint_cid:
        raise LookupError(f"job {job_id} has no global checkpoint yet")
    return job.checkpoint_cid, src.fetch_checkpoint(job.checkpoint_cid, job.checkpoint_hash, MAX_CHECKPOINT)
