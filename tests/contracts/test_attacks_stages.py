"""Issue 27, findings 3 and 4: split jobs (JobParams.stages) whose stages could be frozen
for ever, and stalls that cost nothing. Each finding is a test written as the attack.

Finding 3 (frozen stages): on a job that is no longer Active, a stage past its challenge
window whose group can never be complete (a stage of it never drawn, Pending, Offered or
Closed) is closed by `closeTask`: unpaid and unpenalised, its whole collateral and its pool
slot released, its cost refunded. It is not paid: a stage cannot finish without every other
stage of its attempt (they exchange activations and gradients), and every stage that ran
and failed sends its group back, so a revealed stage whose sibling never ran in its attempt
revealed a result no partner stage ever fed, which no challenge can check either.
``test_everySiblingState_whenTheJobStops_leavesNothingStranded`` walks every sibling state at
the stop and the transitions after it.

Finding 4 (free stalls): a stall report (`reportStalled`) excuses its reporter's running
timeout only when the group shows, when the reporter is judged, a stage it could really
be waiting on: a stage never drawn, Pending, Offered or Closed, one in a dispute whose
group was sent back, a running one with a later deadline (drawn or accepted after the
reporter's deadline), or a running one past its deadline that reported nothing (the
silent one, which pays its own timeout). Otherwise the reporter pays as a silent stage:
the timeout penalty, the timeout in its history, and it is not offered the stage again.
"""

import brownie
import pytest
from brownie import accounts, chain

from tests.contracts.market_setup import *  # noqa: F401,F403

COST = 12 * E  # reward 10 + audit fee 2 (job_params)
COLLATERAL = 20 * E
TIMEOUT_PENALTY = COLLATERAL * TIMEOUT_PENALTY_BPS // 10_000  # 2 TRAIN
ACCEPT_PENALTY = COLLATERAL * ACCEPT_PENALTY_BPS // 10_000


def _task(job_market, tid) -> dict:
    return job_market.taskOf(tid).dict()


def _draw_all(job_market, submitter, job_id, count) -> dict[int, str]:
    """Draw ``count`` tasks (a stage draw may miss: ``draw_stages`` draws again from the next
    ticket; one that draws some of them is called again for the rest)."""
    workers = {}
    for _ in range(5):
        tx = draw_stages(job_market, job_id, count - len(workers), {"from": submitter})
        if "TaskDrawn" in tx.events:
            workers |= {e["taskId"]: e["worker"] for e in tx.events["TaskDrawn"]}
        if len(workers) == count:
            return workers
    raise AssertionError(f"only {len(workers)} of {count} tasks drawn")


def _run_and_reveal(job_market, tid, worker):
    worker = accounts.at(worker, force=True)
    job_market.commitResult(tid, commitment(tid, ROOT, CID, SALT, worker), {"from": worker})
    job_market.revealResult(tid, ROOT, CID, SALT, {"from": worker})


def _held(stake_manager, pool, worker) -> tuple[int, int]:
    """(collateral locked, pool slots held) of ``worker``."""
    return stake_manager.stakeOf(worker).dict()["locked"], pool.memberOf(worker).dict()["active"]


def _assert_nothing_stranded(job_market, stake_manager, pool, job_id, workers):
    """Every task of the job is over (paid, closed, or refunded undrawn), the job holds no
    escrow, and no worker keeps collateral or a pool slot for it."""
    job = job_market.jobOf(job_id).dict()
    assert job["escrow"] == 0 and job_market.totalEscrow() == 0
    shards = job["shards"]
    for index in range(shards + 1):
        assert _task(job_market, job_market.taskId(job_id, 0, index))["status"] in (TS.NONE, TS.FINALIZED, TS.CLOSED)
    for w in set(workers):
        assert _held(stake_manager, pool, w) == (0, 0), w


def _stage_pair(job_market, submitter, **kw):
    """One group of two stages, both offered: (job, stage A, stage B, workers)."""
    job_id, _ = new_job(job_market, submitter, shards=2, stages=2, rounds=1, acceptWindow=5, computeWindow=20, **kw)
    workers = _draw_all(job_market, submitter, job_id, 2)
    return job_id, job_market.taskId(job_id, 0, 0), job_market.taskId(job_id, 0, 1), workers


# ------------------------------------------------------------------ finding 3: frozen stages


@pytest.mark.parametrize("sibling", ["offered-closed", "offered-timedOut", "pending", "neverDrawn-expired"])
def test_frozenStage_jobStopsWhileItsSiblingNeverRan_isClosedAfterItsWindow_freeingCollateralEscrowAndSlot(
        job_market, stake_manager, pool, token, registry, submitter, four, sibling, market_isolation):
    """The attack: stage A revealed (its sibling B never ran: only offered, sent back, or never
    drawn), the submitter cancels (or the job expires), B is closed or times out at accept.
    Before the fix A could be neither finalized, timed out nor closed: its worker's collateral,
    its pool slot and its escrow were held for ever."""
    expiry = chain.height + 60
    if sibling == "neverDrawn-expired":
        for a in four[1:]:
            pool.leavePool({"from": a})  # one worker: stage B can never be drawn
        job_id, _ = new_job(job_market, submitter, shards=2, stages=2, rounds=1, acceptWindow=5, expiryBlock=expiry)
        a = job_market.taskId(job_id, 0, 0)
        b = job_market.taskId(job_id, 0, 1)
        draw_task(job_market, job_id, {"from": submitter})
        workers = {a: four[0].address}
    else:
        job_id, a, b, workers = _stage_pair(job_market, submitter)
    wa = workers[a]
    job_market.acceptTask(a, {"from": wa})
    _run_and_reveal(job_market, a, wa)  # a result no partner stage fed
    if sibling == "pending":
        for w in four:  # nobody but the two holders left: B's redraw finds nobody
            if w not in (wa, workers[b]):
                pool.leavePool({"from": w})
        mine_past(_task(job_market, b)["deadline"])
        job_market.timeoutTask(b, {"from": submitter})
        assert _task(job_market, b)["status"] == TS.PENDING
    if sibling == "neverDrawn-expired":
        mine_past(expiry)
        job_market.expireJob(job_id, {"from": submitter})
        assert _task(job_market, b)["status"] == TS.NONE  # refunded at expiry
    else:
        job_market.cancelJob(job_id, {"from": submitter})
    if sibling == "offered-timedOut":
        mine_past(_task(job_market, b)["deadline"])
        tx = job_market.timeoutTask(b, {"from": submitter})
        assert tx.events["TaskTimedOut"]["penalty"] == ACCEPT_PENALTY and "TaskClosed" in tx.events
    elif sibling in ("offered-closed", "pending"):
        job_market.closeTask(b, {"from": submitter})
    assert _task(job_market, b)["status"] in (TS.CLOSED, TS.NONE)
    window_end = _task(job_market, a)["deadline"]
    if chain.height <= window_end:
        with brownie.reverts(f"TaskNotClosable: {a}"):  # its window first: it may be challenged
            job_market.closeTask(a, {"from": submitter})
    mine_past(window_end)
    with brownie.reverts(f"TaskStageGroupUnsettled: {a}, {b}"):  # never paid without its group
        job_market.finalize(a, {"from": wa})
    credits = job_market.credits(submitter)
    tx = job_market.closeTask(a, {"from": accounts[9]})  # anyone
    assert [(e["taskId"], e["causeTaskId"]) for e in tx.events["StageReset"]] == [(a, b)]
    assert dict(tx.events["TaskClosed"]) == {"taskId": a, "refund": COST}
    assert [e["amount"] for e in tx.events["CollateralUnlocked"]] == [COLLATERAL]
    assert "TaskFinalized" not in tx.events and "TaskTimedOut" not in tx.events
    assert job_market.credits(submitter) == credits + COST
    assert job_market.credits(wa) == 0 and stake_manager.stakeOf(wa).dict()["active"] == STAKE_AMOUNT
    assert registry.identityOf(wa).dict()["history"]["tasksTimedOut"] == 0
    # the submitter got every task's cost back: A, B and the aggregation task
    assert job_market.credits(submitter) == 3 * COST
    _assert_nothing_stranded(job_market, stake_manager, pool, job_id, [wa])


def test_closeStage_whoseGroupCanStillSettle_reverts_andOnAnActiveJob(job_market, submitter, four, market_isolation):
    job_id, a, b, workers = _stage_pair(job_market, submitter)
    for t in (a, b):
        job_market.acceptTask(t, {"from": workers[t]})
        _run_and_reveal(job_market, t, workers[t])
    mine_past(_task(job_market, a)["deadline"])
    with brownie.reverts(f"TaskNotClosable: {a}"):  # the job is Active
        job_market.closeTask(a, {"from": submitter})
    job_market.cancelJob(job_id, {"from": submitter})
    with brownie.reverts(f"TaskNotClosable: {a}"):  # both revealed: the group is paid, not closed
        job_market.closeTask(a, {"from": submitter})
    mine_past(_task(job_market, b)["deadline"])
    assert job_market.finalizeMany([a, b], {"from": submitter}).return_value == 2


def _mine_past_all(job_market, *tids):
    mine_past(max(_task(job_market, t)["deadline"] for t in tids))


# The sibling B of a revealed stage A when the submitter cancels, and what happens next.
# Each row: (B's state at the stop, the transition after it, A's outcome).
STOP_CASES = [
    ("running", "commitsAndReveals", "paid"),
    ("running", "silentTimesOut", "closed"),
    ("running", "reportsStallThenTimesOut", "closed"),
    ("committed", "reveals", "paid"),
    ("committed", "silentTimesOut", "closed"),
    ("challengeWindow", "windowEnds", "paid"),
    ("disputed", "workerWins", "paid"),
    ("disputed", "workerLoses", "closed"),
    ("disputed", "voided", "closed"),
]


@pytest.mark.parametrize("state,then,outcome", STOP_CASES, ids=[f"{s}-{t}" for s, t, _ in STOP_CASES])
def test_everySiblingState_whenTheJobStops_leavesNothingStranded(job_market, stake_manager, pool, registry, submitter,
                                                                 four, deployer, state, then, outcome,
                                                                 market_isolation):
    """Stage A revealed; the job is cancelled while B is in `state`; B then does `then`. A is
    paid with B (the group finished) or closed unpaid and unpenalised (B failed after it
    started); B's worker pays what its own failure costs; nothing stays locked or escrowed."""
    job_id, a, b, workers = _stage_pair(job_market, submitter)
    wa, wb = workers[a], workers[b]
    for t in (a, b):
        job_market.acceptTask(t, {"from": workers[t]})
    _run_and_reveal(job_market, a, wa)
    signer = accounts.at(wb, force=True)
    if state in ("committed", "challengeWindow", "disputed"):
        job_market.commitResult(b, commitment(b, ROOT, CID, SALT, signer), {"from": signer})
    if state in ("challengeWindow", "disputed"):
        job_market.revealResult(b, ROOT, CID, SALT, {"from": signer})
    if state == "disputed":
        job_market.openChallenge(b, deployer, {"from": deployer})
    if then == "reportsStallThenTimesOut":
        job_market.reportStalled(b, {"from": signer})
    job_market.cancelJob(job_id, {"from": submitter})

    if then in ("commitsAndReveals", "reveals"):
        if then == "commitsAndReveals":
            job_market.commitResult(b, commitment(b, ROOT, CID, SALT, signer), {"from": signer})
        job_market.revealResult(b, ROOT, CID, SALT, {"from": signer})
    elif then in ("silentTimesOut", "reportsStallThenTimesOut"):
        mine_past(_task(job_market, b)["deadline"])
        tx = job_market.timeoutTask(b, {"from": submitter})
        # running: the timeout penalty (A revealed: B was not blocked by it); committed: all of it
        expected = COLLATERAL if state == "committed" else TIMEOUT_PENALTY
        assert (tx.events["TaskTimedOut"]["account"], tx.events["TaskTimedOut"]["penalty"]) == (wb, expected)
        assert [(e["taskId"], e["causeTaskId"]) for e in tx.events["StageReset"]] == [(a, b)]
    elif then == "workerWins":
        job_market.resolveDispute(b, True, {"from": deployer})
    elif then == "workerLoses":
        tx = job_market.resolveDispute(b, False, {"from": deployer})
        assert [(e["taskId"], e["causeTaskId"]) for e in tx.events["StageReset"]] == [(a, b)]
    elif then == "voided":
        job_market.voidDispute(b, {"from": deployer})

    if outcome == "paid":
        _mine_past_all(job_market, a, b)
        assert job_market.finalizeMany([a, b], {"from": submitter}).return_value == 2
        assert job_market.credits(wa) == job_market.credits(wb) == 10 * E
        job_market.refundSurplus(job_id, {"from": submitter})  # the two unused audit fees
        # the aggregation task's cost (refunded at the stop) and the audit fees
        assert job_market.credits(submitter) == COST + 2 * 2 * E
    else:
        assert _task(job_market, a)["status"] == TS.CLOSED and job_market.credits(wa) == 0
        assert stake_manager.stakeOf(wa).dict()["active"] == STAKE_AMOUNT
        assert job_market.credits(submitter) == 3 * COST  # every task's cost
    if then == "workerLoses":
        # the dispute game slashes the loser's locked collateral (this stand-in game does not);
        # the market released B's pool slot and kept nothing
        assert pool.memberOf(wb).dict()["active"] == 0
        _assert_nothing_stranded(job_market, stake_manager, pool, job_id, [wa])
    else:
        _assert_nothing_stranded(job_market, stake_manager, pool, job_id, [wa, wb])


# ------------------------------------------------------------------ finding 4: free stalls


def _running_pair(job_market, submitter):
    job_id, a, b, workers = _stage_pair(job_market, submitter)
    for t in (a, b):
        job_market.acceptTask(t, {"from": workers[t]})
    return job_id, a, b, workers


def test_falseStall_reportedAtOnceThenIdle_paysTheTimeout_andIsNotOfferedTheStageAgain(
        job_market, stake_manager, registry, submitter, four, market_isolation):
    """The attack: A accepts, reports itself blocked at once and does nothing. B committed and
    revealed, so A was not blocked by B. Before the fix A's deadline cost it nothing, B went
    back unpaid and A's stage could be offered to A again."""
    job_id, a, b, workers = _running_pair(job_market, submitter)
    wa, wb = workers[a], workers[b]
    job_market.reportStalled(a, {"from": wa})
    _run_and_reveal(job_market, b, wb)
    mine_past(_task(job_market, a)["deadline"])
    tx = job_market.timeoutTask(a, {"from": submitter})
    assert (tx.events["TaskTimedOut"]["account"], tx.events["TaskTimedOut"]["phase"],
            tx.events["TaskTimedOut"]["penalty"]) == (wa, TS.RUNNING, TIMEOUT_PENALTY)
    assert registry.identityOf(wa).dict()["history"]["tasksTimedOut"] == 1
    assert stake_manager.stakeOf(wa).dict()["active"] == STAKE_AMOUNT - TIMEOUT_PENALTY
    assert stake_manager.stakeOf(wa).dict()["locked"] == 0
    # B goes back unpaid and unpenalised (its group runs again), all its collateral released
    assert [(e["taskId"], e["causeTaskId"]) for e in tx.events["StageReset"]] == [(b, a)]
    redrawn_to_wb = _task(job_market, a)["status"] == TS.OFFERED and _task(job_market, a)["worker"] == wb
    assert stake_manager.stakeOf(wb).dict()["active"] == STAKE_AMOUNT
    assert stake_manager.stakeOf(wb).dict()["locked"] == (COLLATERAL if redrawn_to_wb else 0)
    # A's stage is never offered to A again: redrawn to another worker, or waiting with A excluded
    for _ in range(4):
        task = _task(job_market, a)
        assert task["worker"] != wa or task["status"] == TS.PENDING
        if task["status"] != TS.PENDING:
            break
        draw_stages(job_market, job_id, 2, {"from": submitter})
    assert _task(job_market, a)["status"] == TS.OFFERED and _task(job_market, a)["worker"] != wa


@pytest.mark.parametrize("first", ["cheater", "honest"])
def test_cheaterReportsThenIdles_honestStageReportsToo_bothPayOneTimeout_whicheverIsTimedOutFirst(
        job_market, stake_manager, registry, submitter, four, first, market_isolation):
    """A reports at once and goes silent; B, really blocked on A, reports near its deadline
    (as the worker daemon does). The chain sees two reports and no stage either could be
    waiting on: it cannot tell them apart, so each pays one timeout penalty, whichever the
    keeper times out first (the cheater never goes free by a reset). The honest stage's loss
    is bounded by that penalty; the cheater's equals it, so stalling never pays."""
    job_id, a, b, workers = _running_pair(job_market, submitter)
    wa, wb = workers[a], workers[b]
    job_market.reportStalled(a, {"from": wa})
    mine_past(_task(job_market, b)["deadline"] - 3)
    job_market.reportStalled(b, {"from": wb})
    _mine_past_all(job_market, a, b)
    first_id, second_id = (a, b) if first == "cheater" else (b, a)
    tx = job_market.timeoutTask(first_id, {"from": submitter})
    timed_out = [(e["taskId"], e["account"], e["penalty"]) for e in tx.events["TaskTimedOut"]]
    assert sorted(timed_out) == sorted([(a, wa, TIMEOUT_PENALTY), (b, wb, TIMEOUT_PENALTY)])
    assert "StageReset" not in tx.events  # neither goes back free
    assert _task(job_market, second_id)["status"] != TS.RUNNING
    for w in (wa, wb):
        # (the first one's stage was offered again at once, maybe to the other worker)
        offered = sum(1 for t in (a, b) if _task(job_market, t)["status"] == TS.OFFERED and _task(job_market, t)["worker"] == w)
        assert stake_manager.stakeOf(w).dict()["active"] == STAKE_AMOUNT - TIMEOUT_PENALTY
        assert stake_manager.stakeOf(w).dict()["locked"] == offered * COLLATERAL
        assert registry.identityOf(w).dict()["history"]["tasksTimedOut"] == 1
    # neither is offered its own stage again: offered to another worker, or waiting with its
    # failed worker kept for the redraw to exclude
    for t, w in ((a, wa), (b, wb)):
        task = _task(job_market, t)
        assert (task["status"], task["worker"] == w) in ((TS.OFFERED, False), (TS.PENDING, True))


def test_stageBlockedOnAStageSentBackWhileItsDisputeRuns_reportsAndGoesBackFree(
        job_market, stake_manager, registry, submitter, four, deployer, market_isolation):
    """Stage 0's result is challenged; stage 2 loses its own dispute, so the group is sent
    back while stage 0's game runs. Stages 1 and 2 are drawn again and wait on a stage 0
    nobody can run until its game ends: they report it and their deadlines cost nothing."""
    job_id, _ = new_job(job_market, submitter, shards=3, stages=3, rounds=1, acceptWindow=30, computeWindow=20)
    workers = _draw_all(job_market, submitter, job_id, 3)
    tids = [job_market.taskId(job_id, 0, k) for k in range(3)]
    for t in tids:
        job_market.acceptTask(t, {"from": workers[t]})
    for t in tids:
        _run_and_reveal(job_market, t, workers[t])
    job_market.openChallenge(tids[0], deployer, {"from": deployer})
    job_market.openChallenge(tids[2], deployer, {"from": deployer})
    job_market.resolveDispute(tids[2], False, {"from": deployer})  # stage 1 reset, stage 0 flagged
    redrawn = _draw_all(job_market, submitter, job_id, 2)
    for t in tids[1:]:
        job_market.acceptTask(t, {"from": redrawn[t]})
        job_market.reportStalled(t, {"from": redrawn[t]})
    _mine_past_all(job_market, *tids[1:])
    tx = job_market.timeoutTask(tids[1], {"from": submitter})
    assert "TaskTimedOut" not in tx.events
    assert {e["taskId"] for e in tx.events["StageReset"]} == {tids[1], tids[2]}
    for t in tids[1:]:
        assert registry.identityOf(redrawn[t]).dict()["history"]["tasksTimedOut"] == 0
        assert stake_manager.stakeOf(redrawn[t]).dict()["active"] == STAKE_AMOUNT
