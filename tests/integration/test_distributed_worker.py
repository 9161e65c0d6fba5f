"""A worker that trains on 2 devices (``worker run --devices 2``: two gloo processes) and a
worker on one share a job: each trains a shard, and the job ends on the checkpoint that
one process computes alone, since the ranks all-reduce exact integer gradient sums. The
2-device worker declares its devices in the hardware profile it publishes."""

from __future__ import annotations

import json

import pytest

from tests.integration.market_net import TOKEN, MarketNet
from truetrain.chain.client import dev_account
from truetrain.market import JobStatus, encode_task_id
from truetrain.market.jobs import JobTerms
from truetrain.market.views import JobView
from truetrain.training import aggregate, checkpoint_hash, run_task

# Two ranks start two fresh interpreters (torch, gloo): 14 s on a loaded 2-core machine for
# a task one process trains in 0.2 s, so the compute window (no longer than the challenge
# window, which every task waits out) is 90 blocks, not the 60 of the one-device tests.
TERMS = JobTerms(reward_per_task=10 * TOKEN, audit_fee=2 * TOKEN, worker_collateral=20 * TOKEN,
                 accept_window=20, compute_window=90, reveal_window=40, challenge_window=90, audit_rate_bps=0)
TWO, ONE = 2, 3  # dev accounts: the 2-device worker, the 1-device worker


@pytest.fixture(scope="module")
def shared_job(tmp_path_factory, TrainToken):  # TrainToken: brownie has compiled build/
    with MarketNet(tmp_path_factory.mktemp("devices")) as net:
        two = net.start("worker", TWO, extra=["--devices", "2", "--keeper"])
        one = net.start("worker", ONE)
        job_id, manifest, _ = net.submit(shards=2, rounds=1, steps=20, interval=10, terms=TERMS)
        status = net.wait_job(job_id)
        yield net, job_id, manifest, status, two, one


def _trained(daemon) -> list[dict]:
    lines = [json.loads(line) for line in daemon.log_text().splitlines() if line.startswith("{")]
    return [line for line in lines if line["msg"] == "trained task"]


def test_workersOfOneAndTwoDevices_shareAJob_thatEndsOnTheSingleProcessCheckpoint(shared_job):
    net, job_id, manifest, status, two, one = shared_job
    assert status == JobStatus.COMPLETED, net.diagnosis(job_id)
    finalized = {e["args"]["taskId"]: e["args"]["worker"] for e in net.events("TaskFinalized")}
    shards = {finalized[encode_task_id(job_id, 0, i)] for i in range(2)}
    assert shards == {dev_account(TWO).address, dev_account(ONE).address}
    assert [line["devices"] for line in _trained(two)] == [2]
    assert [line["devices"] for line in _trained(one)] == [1]
    with net.store() as store:
        data = [store.fetch(ref.cid, ref.hash, max_size=2**24) for ref in manifest.shards]
    alone = aggregate(manifest, 0, [run_task(manifest, data[i], None, i, 0) for i in range(2)]).to_bytes()
    assert checkpoint_hash(alone) == JobView.read(net.contracts.market, job_id).checkpoint_hash


def test_twoDeviceWorker_declaresItsDevicesInItsPublishedProfile(shared_job):
    net, *_ = shared_job
    profiles = {}
    with net.store() as store:
        for account in (TWO, ONE):
            identity = net.contracts.registry.functions.identityOf(dev_account(account).address).call()
            profiles[account] = json.loads(store.fetch(identity[6], bytes(identity[5]), max_size=1 << 20))
    assert profiles[TWO]["devices"] == 2
    assert "devices" not in profiles[ONE]  # one device: the key is left out, as before
