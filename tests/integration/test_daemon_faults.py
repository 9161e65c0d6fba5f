"""Daemons under faults, all in one job: a worker killed with ``kill -9`` mid-task (it
never comes back), a worker killed right after it accepted a task and restarted, a worker
and the verifier killed right after a commitment and restarted, and the IPFS node
restarted under them. The job must still complete, the killed worker be penalised as the
contract says, and no restarted daemon send a transaction twice.

The faulty daemons are named as such: ``TRUETRAIN_FAULT=hang-after:<function>`` makes a
daemon hang right after that transaction, so the test knows where it kills it.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from tests.integration.market_net import TOKEN, MarketNet
from truetrain.chain.client import dev_account
from truetrain.demo.processes import wait_for_log
from truetrain.market import JobStatus, TaskStatus
from truetrain.market.jobs import JobTerms

# The reveal window leaves the restarted worker its restart (seconds of imports, while the
# devnet mines every 0.5 s and on every transaction): silence after a commitment costs the
# whole collateral, so a restart that overran it would be a slash, not the fault under test.
# The compute window (an audit's too) leaves the restarted verifier time for an audit drawn
# while it hung: with 25 blocks, then with 40, a restart slowed by the other test lanes (eight
# on two cores in CI) overran it.
TERMS = JobTerms(reward_per_task=10 * TOKEN, audit_fee=2 * TOKEN, worker_collateral=20 * TOKEN,
                 accept_window=6, compute_window=60, reveal_window=120, challenge_window=60, audit_rate_bps=10_000)
KILLED, RESTARTED, HONEST, VERIFIER, REACCEPTED = 2, 3, 4, 5, 6
HANG = "fault: hanging after"
OWN_MOVES = {"acceptTask", "commitResult", "revealResult", "commitAudit", "revealAudit"}


def hang(function: str) -> dict:
    return {"TRUETRAIN_FAULT": f"hang-after:{function}"}


@pytest.fixture(scope="module")
def faulty_job(tmp_path_factory, TrainToken):  # TrainToken: brownie has compiled build/
    with MarketNet(tmp_path_factory.mktemp("faults")) as net:
        verifier = net.start("verifier", VERIFIER, extra=["--keeper"], env=hang("commitAudit"))
        killed = net.start("worker", KILLED, env=hang("acceptTask"))
        restarted = net.start("worker", RESTARTED, env=hang("commitResult"))
        reaccepted = net.start("worker", REACCEPTED, env=hang("acceptTask"))
        # Three workers with one task each at a time: each gets a shard of round 0.
        job_id, manifest, escrow = net.submit(shards=3, rounds=2, steps=20, terms=TERMS)

        # First: its compute window runs from its acceptance, and a restart takes seconds.
        assert wait_for_log(reaccepted, HANG, timeout=60), reaccepted.log_text()[-2000:]
        reaccepted.kill()  # accepted, nothing trained or committed: the task is only in its book
        net.start("worker", REACCEPTED)
        assert wait_for_log(killed, HANG, timeout=60), killed.log_text()[-2000:]
        killed.kill()  # kill -9 mid-task: accepted, training, never committed
        net.start("worker", HONEST)
        assert wait_for_log(restarted, HANG, timeout=60), restarted.log_text()[-2000:]
        restarted.kill()  # committed, not revealed: the salt is only in its book
        net.start("worker", RESTARTED)
        assert wait_for_log(verifier, HANG, timeout=60), verifier.log_text()[-2000:]
        verifier.kill()  # audit committed, not revealed
        net.start("verifier", VERIFIER, extra=["--keeper"])
        time.sleep(2)
        net.restart_node(0)  # the IPFS node goes away under every daemon and comes back
        status = net.wait_job(job_id)
        yield net, job_id, escrow, status


def test_faulty_job_still_completes_with_every_task_finalized(faulty_job):
    net, job_id, _, status = faulty_job
    assert status == JobStatus.COMPLETED
    finalized = [e for e in net.events("TaskFinalized") if e["args"]["taskId"] >> 64 == job_id]
    assert len(finalized) == (3 + 1) * 2
    assert all(net.contracts.market.functions.taskOf(e["args"]["taskId"]).call()[1] == TaskStatus.FINALIZED
               for e in finalized)


def test_worker_killed_mid_task_times_out_is_penalised_and_its_task_reassigned(faulty_job):
    net, job_id, *_ = faulty_job
    address = dev_account(KILLED).address
    timeouts = [e["args"] for e in net.events("TaskTimedOut") if e["args"]["account"] == address]
    running = [t for t in timeouts if t["phase"] == TaskStatus.RUNNING]
    assert len(running) == 1
    assert running[0]["penalty"] == 2 * TOKEN  # 10% of the 20 TRAIN collateral
    # Offers it got while dead timed out at accept: 1 % of the collateral each (the floor that
    # makes ignoring offers never free).
    assert all(t["penalty"] == TOKEN // 5 for t in timeouts if t["phase"] == TaskStatus.OFFERED)
    task = running[0]["taskId"]
    final = [e["args"] for e in net.events("TaskFinalized") if e["args"]["taskId"] == task]
    assert final and final[0]["worker"] != address
    stake = net.contracts.stake.functions
    offers_missed = sum(1 for t in timeouts if t["phase"] == TaskStatus.OFFERED)
    assert stake.stakeOf(address).call()[0] == 500 * TOKEN - 2 * TOKEN - offers_missed * TOKEN // 5
    # Every timeout's penalty is burned (a submitter that withheld the inputs could have caused
    # it): the killed worker's, and any offer made to another worker before its daemon was
    # started (whom the draws reach is not fixed here). The submitter is credited none of it.
    penalties = sum(e["args"]["penalty"] for e in net.events("TaskTimedOut") if e["args"]["taskId"] >> 64 == job_id)
    assert penalties >= 2 * TOKEN + offers_missed * TOKEN // 5
    timed_out = {e["args"]["account"] for e in net.events("TaskTimedOut") if e["args"]["taskId"] >> 64 == job_id}
    forfeited = sum(e["args"]["amount"] for e in net.contracts.stake.events.StakeForfeited().get_logs(from_block=0)
                    if e["args"]["account"] in timed_out)
    assert forfeited == penalties and stake.credits(dev_account(1).address).call() == 0


@pytest.mark.parametrize("account", [RESTARTED, VERIFIER], ids=["worker", "verifier"])
def test_daemon_restarted_after_commit_reveals_without_duplicate_transaction(faulty_job, account):
    net, job_id, *_ = faulty_job
    address = dev_account(account).address
    sent = net.transactions_from(address)
    assert all(status == 1 for *_, status in sent), sent
    # The role's own moves, once per task; keeper calls (a task offered to the dead worker
    # twice times out twice) are not duplicates.
    per_task = Counter((name, arg) for name, arg, _ in sent if name in OWN_MOVES)
    assert per_task and max(per_task.values()) == 1, per_task
    timed_out = [e for e in net.events("TaskTimedOut") if e["args"]["account"] == address]
    assert not timed_out, (f"timed out (phase, block): {[(e['args']['phase'], e['blockNumber']) for e in timed_out]}\n"
                           + net.diagnosis(job_id))
    reveal = "revealResult" if account == RESTARTED else "revealAudit"
    assert any(name == reveal for name, *_ in sent)


def test_worker_restarted_after_accept_trains_commits_once_and_is_paid(faulty_job):
    net, job_id, *_ = faulty_job
    address = dev_account(REACCEPTED).address
    first = net.events("TaskAccepted", worker=address)[0]["args"]["taskId"]  # accepted, then killed
    sent = net.transactions_from(address)
    assert all(status == 1 for *_, status in sent), sent
    per_task = Counter((name, arg) for name, arg, _ in sent if name in OWN_MOVES)
    assert max(per_task.values()) == 1, per_task
    assert [per_task[(move, first)] for move in ("acceptTask", "commitResult", "revealResult")] == [1, 1, 1]
    assert not net.events("TaskTimedOut", account=address), net.diagnosis(job_id)
    finalized = [e["args"] for e in net.events("TaskFinalized", taskId=first)]
    assert [(f["worker"], f["reward"]) for f in finalized] == [(address, TERMS.reward_per_task)]
    # Paid: every reward it earned is in its wallet (withdrawn) or still credited to it.
    earned = sum(e["args"]["reward"] for e in net.events("TaskFinalized", worker=address))
    withdrawn = sum(e["args"]["amount"] for e in net.events("Withdrawn", account=address))
    assert withdrawn + net.contracts.market.functions.credits(address).call() == earned


def test_faulty_job_conserves_tokens(faulty_job):
    net, *_ = faulty_job
    token, stake, market = net.contracts.token, net.contracts.stake, net.contracts.market
    holders = [dev_account(i).address for i in range(10)] + [stake.address, market.address]
    at = {"block_identifier": net.contracts.client.w3.eth.block_number}  # one block: daemons may still move tokens
    held = sum(token.functions.balanceOf(a).call(**at) for a in holders)
    assert token.functions.totalMinted().call(**at) == held + token.functions.totalBurned().call(**at)
