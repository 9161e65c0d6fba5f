"""A worker that declares ``max_concurrent`` 2 trains two tasks at once: the contracts offer
it both shards of a job, its lane runs them side by side on the CPU (the cores split
between them), and both are paid. The worker is a named slow machine
(``slow-compute:3``: each computation waits 3 s first), so the overlap does not hang on
how fast two small trainings finish."""

from __future__ import annotations

import json
import os

import pytest

from tests.integration.market_net import TOKEN, MarketNet
from truetrain.chain.client import dev_account
from truetrain.market import JobStatus, encode_task_id
from truetrain.market.jobs import JobTerms

TERMS = JobTerms(reward_per_task=10 * TOKEN, audit_fee=2 * TOKEN, worker_collateral=20 * TOKEN,
                 accept_window=20, compute_window=60, reveal_window=40, challenge_window=60, audit_rate_bps=0)
WORKER = 3


@pytest.fixture(scope="module")
def two_at_once(tmp_path_factory, TrainToken):  # TrainToken: brownie has compiled build/
    with MarketNet(tmp_path_factory.mktemp("concurrency")) as net:
        worker = net.start("worker", WORKER, extra=["--max-concurrent", "2", "--keeper"],
                           env={"TRUETRAIN_FAULT": "slow-compute:3"})
        job_id, _, _ = net.submit(shards=2, rounds=1, steps=40, interval=20, terms=TERMS)
        status = net.wait_job(job_id)
        yield net, job_id, status, worker


def test_both_shards_train_at_once_on_one_worker_and_are_paid(two_at_once):
    net, job_id, status, worker = two_at_once
    assert status == JobStatus.COMPLETED
    finalized = {e["args"]["taskId"]: e["args"]["worker"] for e in net.events("TaskFinalized")}
    address = dev_account(WORKER).address
    assert [finalized[encode_task_id(job_id, 0, i)] for i in range(3)] == [address] * 3
    lines = [json.loads(line) for line in worker.log_text().splitlines() if line.startswith("{")]
    threads = max(1, (os.cpu_count() or 1) // 2)
    assert any(line["msg"] == f"cpu: up to 2 tasks at once, {threads} threads each" for line in lines)
    trained = sorted((line["started"], line["started"] + line["seconds"]) for line in lines
                     if line["msg"] == "trained task")
    assert len(trained) == 2
    (start_a, end_a), (start_b, _) = trained
    assert start_b < end_a  # the second began before the first ended: side by side
    assert all(line.get("device") == "cpu" for line in lines if line["msg"] == "trained task")
    # At start the worker measured its network figures and declared them in its identity.
    declared = [line for line in lines if line["msg"] == "declared network figures"]
    assert declared and declared[0]["reason"] == "first"
    figures, _ = net.contracts.registry.functions.networkOf(address).call()
    assert figures[0] > 0 and figures[1] >= 1 and figures[2] >= declared[0]["measured_at"]
