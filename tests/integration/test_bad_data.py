"""A submitter's bad data (issue 30), two ways at once on one devnet: one job's shard names a
CID that no IPFS node has (an unpinned shard), another job's shard is served corrupt by a
real faulty proxy (``CorruptingIpfsProxy``, named as such: it flips one byte of what ``cat``
returns for that CID) in front of the node every daemon uses. Real worker daemons fetch a
task's inputs before they accept it, fail (not found in time; ``ContentMismatch``), and
decline the offer (``declineTask``); when three distinct workers have declined a task, its
job ends (``JobInputsUnavailable``). No worker pays more than its bound (one accept penalty
per repeat offer of that task; its first decline is repaid), the submitter is paid nothing
out of it, and tokens are conserved."""

from __future__ import annotations

import base64
import hashlib
from collections import Counter

import pytest

from tests.integration.corrupting_proxy import CorruptingIpfsProxy
from tests.integration.market_net import SUBMITTER, TOKEN, MarketNet
from truetrain.chain.client import dev_account
from truetrain.market import JobStatus
from truetrain.market.jobs import JobTerms
from truetrain.training import build_manifest, publish_dataset

TERMS = JobTerms(reward_per_task=10 * TOKEN, audit_fee=2 * TOKEN, worker_collateral=20 * TOKEN,
                 accept_window=120, compute_window=60, reveal_window=120, challenge_window=60, audit_rate_bps=0)
WORKERS, KEEPER = (2, 3, 4), 5
PENALTY = TERMS.worker_collateral // 100  # the accept penalty (acceptPenaltyBps 100)
# The accept window (120 blocks, 60 s at a block per 0.5 s) outlasts a worker's fetch of a CID
# nobody serves, which gives up after the storage client's timeout (30 s).


def _unserved_cid(data: bytes) -> str:
    """A CIDv1 (raw codec, sha2-256) of ``data``, which no node was ever given."""
    multihash = bytes([0x12, 0x20]) + hashlib.sha256(data).digest()
    return "b" + base64.b32encode(bytes([0x01, 0x55]) + multihash).decode().lower().rstrip("=")


def _digits(name: str, data: dict):
    return build_manifest(name=name, seed=3, numeric_mode="repro", model={"kind": "mlp", "widths": [64, 128, 10]},
                          optimizer={"kind": "sgd", "lr": 0.1, "momentum": 0.9},
                          batch_size=32, steps_per_task=10, checkpoint_interval=5, rounds=1, **data)


@pytest.fixture(scope="module")
def bad_jobs(tmp_path_factory, TrainToken):  # TrainToken: brownie has compiled build/
    """Both jobs submitted back to back, each run until it ends: {kind: (job id, escrow)}."""
    with MarketNet(tmp_path_factory.mktemp("bad-data")) as net, \
            CorruptingIpfsProxy(net.nodes[0].api_port) as proxy:
        net.start("verifier", KEEPER, extra=["--keeper"], ipfs=proxy.api_addr)
        for account in WORKERS:
            net.start("worker", account, ipfs=proxy.api_addr)

        def unpinned(store):
            data = publish_dataset(store, "digits", num_shards=2, seed=3)
            data["shards"][1] = {**data["shards"][1], "cid": _unserved_cid(b"a shard nobody serves")}
            return _digits("digits-unpinned", data)

        def corrupted(store):
            data = publish_dataset(store, "digits", num_shards=2, seed=4)
            proxy.targets.add(data["shards"][1]["cid"])
            return _digits("digits-corrupted", data)

        jobs = {}
        for kind, build in (("unpinned", unpinned), ("corrupted", corrupted)):
            # unbound: the binding is computed from the shards, and this submitter's are not served
            job_id, _, escrow = net.submit(shards=2, rounds=1, steps=10, terms=TERMS, build=build, bind=False)
            jobs[kind] = (job_id, escrow)
        for job_id, _ in jobs.values():
            net.wait_for("JobInputsUnavailable", lambda: net.events("JobInputsUnavailable", jobId=job_id), timeout=300)
        assert proxy.corrupted >= 3  # each decliner of the corrupted shard was served it altered
        yield net, jobs


@pytest.fixture(params=["unpinned", "corrupted"])
def bad_job(request, bad_jobs):
    net, jobs = bad_jobs
    return (net, *jobs[request.param])


def test_badShard_isDeclinedByThreeWorkers_andTheJobEnds(bad_job):
    net, job_id, _ = bad_job
    ended = net.events("JobInputsUnavailable", jobId=job_id)[0]["args"]
    bad = net.contracts.market.functions.taskId(job_id, 0, 1).call()
    assert ended["taskId"] == bad
    assert net.reader_view(job_id) == JobStatus.CANCELLED
    declined = [e["args"] for e in net.events("TaskDeclined", taskId=bad)]
    assert len({d["worker"] for d in declined}) == 3 and all(d["penalty"] == PENALTY for d in declined)
    assert not net.events("TaskAccepted", taskId=bad)  # nobody was bound to inputs it could not get
    assert not net.events("TaskTimedOut", taskId=bad)  # each declined inside its accept window
    for daemon in net.daemons:
        assert "Traceback" not in daemon.log_text(), daemon.log_text()[-3000:]


def test_noWorkerPaysMoreThanItsBound_andTheSubmitterGainsNothing(bad_job):
    net, job_id, escrow = bad_job
    bad = net.contracts.market.functions.taskId(job_id, 0, 1).call()
    declines = Counter(e["args"]["worker"] for e in net.events("TaskDeclined", taskId=bad))
    repaid = {e["args"]["worker"]: e["args"]["amount"] for e in net.events("DeclineRepaid", taskId=bad)}
    assert set(repaid) == set(declines) and set(repaid.values()) == {PENALTY}
    for worker, count in declines.items():
        assert count * PENALTY - repaid[worker] <= (count - 1) * PENALTY  # its first decline repaid
    # What the submitter got back: the escrow less what the finished task was paid and less the
    # decliners' repayment; its stake credits (where penalties used to go) stay empty.
    paid = sum(e["args"]["reward"] + e["args"]["auditFee"] for e in net.events("TaskFinalized")
               if e["args"]["taskId"] >> 64 == job_id)
    refunded = sum(e["args"]["amount"] for e in net.events("Refunded", jobId=job_id))
    in_flight = escrow - paid - refunded - 3 * PENALTY  # the shard task still running when it ended
    assert in_flight in (0, TERMS.reward_per_task + TERMS.audit_fee)
    assert refunded < escrow - paid
    assert net.contracts.stake.functions.credits(dev_account(SUBMITTER).address).call() == 0


def test_badDataJobs_conserveTokens(bad_jobs):
    net, _ = bad_jobs
    token, stake, market = net.contracts.token, net.contracts.stake, net.contracts.market
    holders = [dev_account(i).address for i in range(10)] + [stake.address, market.address]
    at = {"block_identifier": net.contracts.client.w3.eth.block_number}
    held = sum(token.functions.balanceOf(a).call(**at) for a in holders)
    assert token.functions.totalMinted().call(**at) == held + token.functions.totalBurned().call(**at)
    assert token.functions.balanceOf(market.address).call(**at) == (
        market.functions.totalEscrow().call(**at) + market.functions.totalCredits().call(**at))
