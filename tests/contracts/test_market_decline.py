"""declineTask: an offered worker that cannot fetch a task's inputs says so before it is bound to
them. It pays what ignoring the offer would (the accept penalty), burned: a submitter never
profits from its own bad data; the task goes to another worker; when MAX_DECLINES distinct
workers declined it, the job ends and its decliners are paid back out of the refund."""

import brownie
from brownie import accounts, chain

from tests.contracts.market_setup import *  # noqa: F401,F403

MAX_DECLINES = 3
ACCEPT_PENALTY = 20 * E * ACCEPT_PENALTY_BPS // 10_000  # of the default 20-token collateral
COST = 10 * E + 2 * E  # reward + audit fee per task
JOB_CANCELLED = 3


def _offered(job_market, submitter, sender, **kw):
    """A one-shard job (2 rounds) whose task 0 is offered: a declined task is the only one
    left to draw, so the next ticket redraws it."""
    job_id, _ = new_job(job_market, submitter, shards=1, **kw)
    tx = draw_task(job_market, job_id, {"from": sender})
    return job_id, tx.return_value, accounts.at(tx.events["TaskDrawn"]["worker"], force=True)


def _redraw(job_market, job_id, tid, sender):
    """Draw the declined task again (it waits for the next offer ticket); returns its worker."""
    tx = draw_task(job_market, job_id, {"from": sender})
    assert tx.return_value == tid
    return accounts.at(tx.events["TaskDrawn"]["worker"], force=True)


def _conserved(job_market, token):
    assert token.balanceOf(job_market) == job_market.totalEscrow() + job_market.totalCredits()


def test_decline_revertsByItsExactError(job_market, submitter, w1, w2, market_isolation):
    job_id, tid, _ = _offered(job_market, submitter, w1)
    with brownie.reverts(f"TaskNotWorker: {tid}, {w2.address.lower()}"):
        job_market.declineTask(tid, {"from": w2})
    deadline = job_market.taskOf(tid)[2]
    chain.mine(6)
    with brownie.reverts(f"TaskDeadlinePassed: {tid}, {deadline}"):
        job_market.declineTask(tid, {"from": w1})
    undrawn = job_market.taskId(job_id, 0, 1)
    with brownie.reverts(f"TaskNotOffered: {undrawn}"):
        job_market.declineTask(undrawn, {"from": w1})


def test_decline_ofARunningTask_orOnAStoppedJob_reverts(job_market, submitter, w1, market_isolation):
    job_id, tid, _ = _offered(job_market, submitter, w1)
    job_market.cancelJob(job_id, {"from": submitter})
    # a stopped job's offer is closed free (closeTask): declining it would only cost
    with brownie.reverts(f"JobNotActive: {job_id}, {JOB_CANCELLED}"):
        job_market.declineTask(tid, {"from": w1})
    job_id, tid, _ = _offered(job_market, submitter, w1)
    job_market.acceptTask(tid, {"from": w1})
    with brownie.reverts(f"TaskNotOffered: {tid}"):
        job_market.declineTask(tid, {"from": w1})


def test_decline_burnsTheAcceptPenalty_releasesTheRest_andRedrawsWithoutTheDecliner(
        job_market, stake_manager, registry, pool, token, submitter, w1, w2, market_isolation):
    refresh_after_hold(pool)  # (a join while offers are held would wait for w2's refresh)
    pool.joinPool({"from": w2})
    job_id, tid, worker = _offered(job_market, submitter, submitter)
    other = w2 if worker == w1 else w1
    burned = token.totalBurned()
    tx = job_market.declineTask(tid, {"from": worker})
    assert dict(tx.events["TaskDeclined"]) == {"taskId": tid, "worker": worker, "penalty": ACCEPT_PENALTY}
    assert token.totalBurned() - burned == ACCEPT_PENALTY  # nobody is paid for it
    assert stake_manager.credits(submitter) == 0 and job_market.credits(submitter) == 0
    assert stake_manager.stakeOf(worker).dict()["active"] == STAKE_AMOUNT - ACCEPT_PENALTY
    assert stake_manager.stakeOf(worker)[1] == 0  # the rest of its collateral is free again
    assert registry.identityOf(worker).dict()["history"]["tasksTimedOut"] == 0  # it was not late
    assert "TaskRequeued" in tx.events and job_market.taskOf(tid)[1] == TS.PENDING
    assert _redraw(job_market, job_id, tid, submitter) == other  # the decliner is excluded
    _conserved(job_market, token)


def test_repeatDecline_bySameWorker_costsAgain_butCountsOnce(job_market, token, pool, submitter, w1, w2, market_isolation):
    refresh_after_hold(pool)
    pool.joinPool({"from": w2})
    job_id, tid, first = _offered(job_market, submitter, submitter)
    burned = token.totalBurned()
    job_market.declineTask(tid, {"from": first})
    second = _redraw(job_market, job_id, tid, submitter)
    assert second != first
    job_market.declineTask(tid, {"from": second})
    assert _redraw(job_market, job_id, tid, submitter) == first  # only `second` is excluded now
    tx = job_market.declineTask(tid, {"from": first})
    # two distinct decliners: the job goes on, the task is offered again
    assert "JobInputsUnavailable" not in tx.events and "TaskRequeued" in tx.events
    assert job_market.jobOf(job_id).dict()["status"] == 1
    assert token.totalBurned() - burned == 3 * ACCEPT_PENALTY
    _conserved(job_market, token)


def test_thirdDistinctDecline_endsTheJob_repaysEachDecliner_refundsTheRest(
        job_market, stake_manager, token, submitter, four, market_isolation):
    job_id, tid, worker = _offered(job_market, submitter, submitter)
    decliners, declines = [], 0
    burned = token.totalBurned()
    while True:
        tx = job_market.declineTask(tid, {"from": worker})
        declines += 1
        if worker not in decliners:
            decliners.append(worker)
        if "JobInputsUnavailable" in tx.events:
            break
        assert len(decliners) < MAX_DECLINES
        worker = _redraw(job_market, job_id, tid, submitter)
    assert len(decliners) == MAX_DECLINES
    assert token.totalBurned() - burned == declines * ACCEPT_PENALTY  # every decline burned
    # what leaves escrow: the 3 never-drawn tasks and this one (1 shard + 1, × 2 rounds)
    refund = 4 * COST - MAX_DECLINES * ACCEPT_PENALTY
    assert [(e["worker"], e["amount"]) for e in tx.events["DeclineRepaid"]] == [(w, ACCEPT_PENALTY) for w in decliners]
    assert dict(tx.events["JobInputsUnavailable"]) == {"jobId": job_id, "taskId": tid, "refund": refund}
    assert dict(tx.events["TaskClosed"]) == {"taskId": tid, "refund": COST}
    assert tx.events["Refunded"]["amount"] == refund and "TaskRequeued" not in tx.events
    for w in decliners:
        assert job_market.credits(w) == ACCEPT_PENALTY
    assert job_market.credits(submitter) == refund and stake_manager.credits(submitter) == 0
    job = job_market.jobOf(job_id).dict()
    assert job["status"] == JOB_CANCELLED and job["escrow"] == 0
    assert job_market.taskOf(tid)[1] == TS.CLOSED and job_market.totalEscrow() == 0
    with brownie.reverts(f"TaskNotOffered: {tid}"):
        job_market.declineTask(tid, {"from": worker})
    _conserved(job_market, token)
