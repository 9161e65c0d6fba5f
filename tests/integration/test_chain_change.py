"""A daemon whose node turns into another chain says so once and waits for its chain.

One worker daemon (with the keeper duty) on a devnet whose Anvil keeps its chain in a file.
Anvil is stopped and started again on the same port three times: (1) as chain 31338, (2) as
the original chain again, restored from its file, (3) as a fresh chain 31337 without the
contracts whose genesis block equals the original's (fixed genesis timestamp), so only the
missing code tells it apart. Each change must give one log line saying how the node
differs, no traceback, and no further line while the daemon waits; the restored chain must
be taken up again from the persisted cursor (no rewind) and its new job worked on.
"""

from __future__ import annotations

import json
import time

import pytest
import requests

from tests.integration.market_net import TOKEN, MarketNet
from truetrain.chain.devnet import free_port
from truetrain.market.jobs import JobTerms

WORKER = 2
QUIET_S = 10.0  # how long a waiting daemon is watched for further lines
CHANGED = "chain changed: "
BACK = "chain is back: "
WAITING = ("; waiting for the original chain (looking every 5 s; to work on the chain the node has now, "
           "stop this daemon and start it again)")
TERMS = JobTerms(reward_per_task=10 * TOKEN, audit_fee=2 * TOKEN, worker_collateral=20 * TOKEN,
                 accept_window=60, compute_window=70, reveal_window=120, challenge_window=70, audit_rate_bps=0)


def genesis(url: str) -> str:
    reply = requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_getBlockByNumber",
                                     "params": ["0x0", False]}, timeout=5)
    return reply.json()["result"]["hash"]


def gauge(port: int) -> float:
    """The daemon's truetrain_chain_changed gauge, read from its Prometheus endpoint."""
    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return float(next(line.split()[1] for line in text.splitlines() if line.startswith("truetrain_chain_changed ")))


def logged_after(daemon, start: int, text: str, timeout: float) -> bool:
    """Wait until ``text`` is in what ``daemon`` logged after character ``start``."""
    deadline = time.monotonic() + timeout
    while text not in daemon.log_text()[start:]:
        if time.monotonic() > deadline or not daemon.alive():
            return False
        time.sleep(0.1)
    return True


def entries(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


class Phase:
    """What the daemon logged from the node's change until it had waited ``QUIET_S`` after
    saying so (``said``: that line's message; ``then``: the lines after it)."""

    def __init__(self, daemon, start: int, marker: str):
        assert logged_after(daemon, start, marker, timeout=90), daemon.log_text()[start:][-3000:]
        lines = entries(daemon.log_text()[start:])
        said = [i for i, e in enumerate(lines) if e["msg"].startswith(marker)]
        self.before, self.said = lines[:said[0]], [lines[i]["msg"] for i in said]
        self.level = lines[said[0]]["level"]
        time.sleep(QUIET_S)
        self.then = entries(daemon.log_text()[start:])[said[0] + 1:]
        self.alive = daemon.alive()


@pytest.fixture(scope="module")
def changes(tmp_path_factory, TrainToken):  # TrainToken: brownie has compiled build/
    home = tmp_path_factory.mktemp("chain-change")
    with MarketNet(home, anvil_state=home / "chain.json", genesis_timestamp=int(time.time())) as net:
        original = genesis(net.rpc)
        metrics = free_port()
        worker = net.start("worker", WORKER, extra=["--keeper", "--metrics-port", str(metrics)])
        time.sleep(2)  # a few blocks: the follower's cursor stands on a block of this chain
        seen = {"original": original, "url": net.rpc}

        start = len(worker.log_text())
        net.restart_anvil(fresh=True, chain_id=31338)
        seen["other"] = genesis(net.rpc)
        seen["other_id"] = Phase(worker, start, CHANGED)
        seen["gauge_waiting"] = gauge(metrics)

        start = len(worker.log_text())
        net.restart_anvil()  # the original chain again, from its file
        seen["restored"] = genesis(net.rpc)
        assert logged_after(worker, start, BACK, timeout=30), worker.log_text()[start:]
        seen["gauge_back"] = gauge(metrics)
        job_id, _, _ = net.submit(shards=1, rounds=1, steps=4, terms=TERMS)
        # Its task accepted, trained, committed and revealed: only its challenge window is left,
        # so nothing runs in the worker's lane when the chain changes again.
        assert logged_after(worker, start, "sent revealResult", timeout=120), worker.log_text()[start:]
        seen["resumed"] = entries(worker.log_text()[start:])

        start = len(worker.log_text())
        net.restart_anvil(fresh=True)  # chain 31337 again, same genesis block, no contracts
        seen["same_genesis"] = genesis(net.rpc)
        seen["no_code"] = Phase(worker, start, CHANGED)

        started = time.monotonic()
        seen["exit"] = worker.terminate(timeout=30)  # SIGTERM while it waits
        seen["exit_s"] = time.monotonic() - started
        seen["stderr"] = (home / "logs" / f"worker-{WORKER}.stderr").read_text()
        seen["book"] = net.contracts.deployment.contracts["book"]
        yield seen


def test_daemon_nodeTurnedIntoAnotherChainId_saysSoInOneLineAndWaitsQuietly(changes):
    phase = changes["other_id"]
    assert phase.said == [f"{CHANGED}expected chain 31337 genesis {changes['original']}, but the node at "
                          f"{changes['url']} now reports chain 31338 genesis {changes['other']}{WAITING}"]
    assert phase.level == "error"
    assert phase.then == [], phase.then  # nothing more in QUIET_S seconds: no flood
    assert phase.alive and changes["gauge_waiting"] == 1
    # Until the new node answered, the old one was only unreachable: a few warnings, no traceback.
    assert len(phase.before) <= 6 and all("exc" not in e and e["level"] == "warning" for e in phase.before), phase.before


def test_daemon_originalChainRestored_resumesFromItsCursorAndWorks(changes):
    assert changes["restored"] == changes["original"]
    assert changes["gauge_back"] == 0
    resumed = changes["resumed"]
    back = [e["msg"] for e in resumed if e["msg"].startswith(BACK)]
    assert back == [f"{BACK}the node is chain 31337 genesis {changes['original']} again with the deployment's code; "
                    "resuming"]
    assert not [e for e in resumed if "rewinding" in e["msg"]]  # the cursor stayed on the original chain's block
    sent = [e["msg"] for e in resumed if e["msg"].startswith("sent ")]
    assert {"sent acceptTask", "sent commitResult", "sent revealResult"} <= set(sent), sent
    assert all("exc" not in e for e in resumed)


def test_daemon_sameGenesisWithoutTheContracts_saysNoCodeAndWaitsQuietly(changes):
    assert changes["same_genesis"] == changes["original"]  # only the code tells the chains apart
    phase = changes["no_code"]
    book = changes["book"]  # the first of the deployment's contracts by key
    assert phase.said == [f"{CHANGED}the node at {changes['url']} (chain 31337 genesis {changes['original']}) has "
                          f"no code at {book.address} (book: JobBook), where the deployment recorded code "
                          f"{book.codehash}{WAITING}"]
    assert phase.then == [], phase.then
    assert all("exc" not in e for e in phase.before), phase.before


def test_daemon_waitingForItsChain_stopsOnSigterm_andNeverPrintedATraceback(changes):
    assert changes["exit"] == 0
    assert changes["exit_s"] < 10
    assert "Traceback" not in changes["stderr"]
