"""Participants: every registered identity with its stake, hardware, network figures,
reputation, earnings, slashes and liveness, as JSON-ready dicts (wei as decimal strings)."""

from __future__ import annotations

from collections import defaultdict

from web3 import Web3

from truetrain.hardware import DEVICE_CLASS_NAMES
from truetrain.market import ROLE_SUBMITTER, ROLE_VERIFIER, ROLE_WORKER

from .source import wei


def roles_of(bits: int) -> list[str]:
    return [name for bit, name in ((ROLE_WORKER, "worker"), (ROLE_VERIFIER, "verifier"),
                                   (ROLE_SUBMITTER, "submitter")) if bits & bit]


def addresses(src) -> list[str]:
    """Registered identities, in the order they registered."""
    seen: dict[str, None] = {}
    for log in src.logs("registry", "IdentityRegistered"):
        seen.setdefault(log["args"]["account"], None)
    return list(seen)


class Ledger:
    """What every account earned and lost, from one pass over the logs of each kind."""

    def __init__(self, src):
        self.rewards, self.fees, self.tasks, self.audits = (defaultdict(int) for _ in range(4))
        for log in src.logs("market", "TaskFinalized"):
            a = log["args"]
            self.rewards[a["worker"]] += a["reward"]
            self.tasks[a["worker"]] += 1
            if a["auditFee"]:
                self.fees[a["auditor"]] += a["auditFee"]
                self.audits[a["auditor"]] += 1
        self.credited = defaultdict(int)
        for log in src.logs("stake", "Credited"):
            self.credited[log["args"]["account"]] += log["args"]["amount"]
        self.slashes = defaultdict(list)
        for log in src.logs("stake", "StakeSlashed"):
            a = log["args"]
            self.slashes[a["account"]].append({"block": log["blockNumber"], "kind": "slashed", "amount": wei(a["slashed"]),
                                               "winner": a["winner"], "burned": wei(a["burned"])})
        for log in src.logs("stake", "StakePenalized"):
            a = log["args"]
            self.slashes[a["account"]].append({"block": log["blockNumber"], "kind": "penalized", "amount": wei(a["taken"]),
                                               "winner": a["beneficiary"], "burned": "0"})


def hardware(src, identity: dict) -> dict | None:
    """The hardware profile JSON the identity published, checked against its on-chain hash."""
    if not identity["profileCid"]:
        return None
    profile = src.fetch_json(identity["profileCid"], bytes.fromhex(identity["profileHash"][2:]))
    if profile is None:
        return None
    keep = ("device_name", "cpu_count", "memory_mib", "throughput_gflops", "gemm_route", "gpus")
    return {k: profile[k] for k in keep if k in profile}


def worker_row(src, address: str, ledger: Ledger, block: int, window: int) -> dict:
    identity = src.call("registry", "identityOf", address)
    figures, last_timeout = src.call("registry", "networkOf", address)
    stake = src.call("stake", "stakeOf", address)
    member = src.call("pool", "memberOf", address)
    cap, history = identity["capability"], identity["history"]
    last_seen = identity["lastSeenBlock"]
    return {
        "address": address, "roles": roles_of(identity["roles"]), "reputation": identity["reputation"],
        "registered_at": identity["registeredAtBlock"], "last_seen": last_seen,
        "live": last_seen > 0 and block - last_seen <= window, "in_pool": member["joined"],
        "active_tasks": member["active"],
        "stake": {"bonded": wei(stake["active"]), "locked": wei(stake["locked"]), "unbonding": wei(stake["unbonding"]),
                  "unbonding_ready_at": stake["unbondingReadyAtBlock"] or None},
        "capability": {"device": DEVICE_CLASS_NAMES.get(cap["deviceClass"], str(cap["deviceClass"])),
                       "memory_mib": cap["memoryMiB"], "throughput": cap["throughput"], "region": cap["region"],
                       "max_concurrent": cap["maxConcurrent"]},
        "network": ({"fetch_kibps": figures["fetchKiBps"], "rpc_rtt_ms": figures["rpcRttMs"],
                     "measured_at": figures["measuredAt"]} if figures["measuredAt"] else None),
        "last_timeout_block": last_timeout or None,
        "profile_cid": identity["profileCid"], "hardware": hardware(src, identity),
        "history": {"tasks_done": history["tasksDone"], "tasks_failed": history["tasksFailed"],
                    "tasks_timed_out": history["tasksTimedOut"], "disputes_won": history["disputesWon"],
                    "disputes_lost": history["disputesLost"], "amount_slashed": wei(history["amountSlashed"]),
                    "compute": history["computeContributed"]},
        "earnings": {"rewards": wei(ledger.rewards[address]), "tasks_paid": ledger.tasks[address],
                     "audit_fees": wei(ledger.fees[address]), "audits_paid": ledger.audits[address],
                     "stake_credits": wei(ledger.credited[address]),
                     "total": wei(ledger.rewards[address] + ledger.fees[address] + ledger.credited[address])},
        "slashes": ledger.slashes[address],
    }


def worker_list(src) -> tuple[list[dict], dict]:
    block, window = src.block(), src["pool"].functions.livenessWindow().call()
    ledger = Ledger(src)
    return [worker_row(src, a, ledger, block, window) for a in addresses(src)], {"liveness_window": window}


def parse_address(text: str) -> str:
    """A checksummed address from ``text`` (ValueError when it is not one)."""
    if not Web3.is_address(text):
        raise ValueError(f"not an Ethereum address: {text[:64]!r}")
    return Web3.to_checksum_address(text)


def worker_detail(src, address: str) -> dict | None:
    """One identity's page data (None when it never registered)."""
    if not src["registry"].functions.isRegistered(address).call():
        return None
    block, window = src.block(), src["pool"].functions.livenessWindow().call()
    row = worker_row(src, address, Ledger(src), block, window)
    tasks = [{"task": str(e["args"]["taskId"]), "job": e["args"]["taskId"] >> 64, "block": e["blockNumber"],
              "reward": wei(e["args"]["reward"])}
             for e in src.logs("market", "TaskFinalized", worker=address)]
    games = [e["args"]["gameId"] for e in src.logs("game", "DisputeOpened")
             if address in (e["args"]["challenger"], e["args"]["worker"])]
    return {**row, "liveness_window": window, "finalized_tasks": tasks, "games": games}
