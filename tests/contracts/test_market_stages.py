"""Jobs split by layers (JobParams.stages): validation, the stage draw (no worker holds two
stages of one group) and the group's aligned deadlines (the stages wait on each other)."""

import brownie
from brownie import accounts, chain

from tests.contracts.market_setup import *  # noqa: F401,F403


ZERO = "0x" + "00" * 20


def _task(job_market, tid) -> dict:
    return job_market.taskOf(tid).dict()


def _drawn_workers(tx) -> dict[int, str]:
    return {e["taskId"]: e["worker"] for e in tx.events["TaskDrawn"]} if "TaskDrawn" in tx.events else {}


def _draw_all(job_market, submitter, job_id, count) -> tuple[dict[int, str], list]:
    """Draw ``count`` tasks. A stage draw is rejection sampling from the offer ticket: it may
    find no worker holding no other stage within its attempts, and ``draw_stages`` then draws
    from the next ticket; a call that draws some of them is called again for the rest (at
    most 5)."""
    workers, txs = {}, []
    for _ in range(5):
        txs.append(draw_stages(job_market, job_id, count - len(workers), {"from": submitter}))
        workers |= _drawn_workers(txs[-1])
        if len(workers) == count:
            return workers, txs
    raise AssertionError(f"only {len(workers)} of {count} tasks drawn")


def test_stages_areStored_andInvalidCountsRevert(job_market, submitter, market_isolation):
    assert job_market.MAX_STAGES() == 8
    split, _ = new_job(job_market, submitter, shards=6, stages=3)
    plain, _ = new_job(job_market, submitter)
    assert (job_market.jobOf(split).dict()["stages"], job_market.jobOf(plain).dict()["stages"]) == (3, 1)
    count = job_market.jobCount()
    with brownie.reverts("JobInvalidStages: 0, 2"):
        new_job(job_market, submitter, stages=0)
    with brownie.reverts("JobInvalidStages: 2, 3"):
        new_job(job_market, submitter, shards=3, stages=2)
    with brownie.reverts("JobInvalidStages: 9, 9"):
        new_job(job_market, submitter, shards=9, stages=9)
    assert job_market.jobCount() == count  # nothing was created


def test_stageDraw_neverGivesOneWorkerTwoStagesOfAGroup(job_market, submitter, four, market_isolation):
    """Two groups of three stages over four workers with two slots each: whatever the draw,
    the three stages of a group sit with three different workers."""
    job_id, _ = new_job(job_market, submitter, shards=6, stages=3)
    workers, _ = _draw_all(job_market, submitter, job_id, 6)
    for first in (0, 3):
        group = [workers[job_market.taskId(job_id, 0, first + k)] for k in range(3)]
        assert len(set(group)) == 3, group


def test_stageDraw_withOneWorker_leavesTheNextStageUndrawn(job_market, pool, submitter, four, market_isolation):
    """One worker (two slots) in the pool: stage 0 is offered to it, stage 1 never is."""
    w1, *others = four
    for a in others:
        pool.leavePool({"from": a})
    job_id, _ = new_job(job_market, submitter, shards=2, stages=2)
    first = draw_task(job_market, job_id, {"from": submitter})
    assert first.events["TaskDrawn"]["worker"] == w1
    tid = job_market.taskId(job_id, 0, 1)
    with brownie.reverts(f"JobNoEligibleWorker: {job_id}, {tid}"):
        draw_task(job_market, job_id, {"from": submitter})
    assert _task(job_market, tid)["status"] == TS.NONE
    # a job that is not split gives the worker both shards
    plain, _ = new_job(job_market, submitter, shards=2)
    assert draw_tasks(job_market, plain, 1, {"from": submitter}).events["TaskDrawn"]["worker"] == w1


def test_acceptingALaterStage_extendsTheRunningStage(job_market, submitter, four, market_isolation):
    job_id, _ = new_job(job_market, submitter, shards=2, stages=2, computeWindow=20)
    workers, _ = _draw_all(job_market, submitter, job_id, 2)
    t0, t1 = job_market.taskId(job_id, 0, 0), job_market.taskId(job_id, 0, 1)
    job_market.acceptTask(t0, {"from": workers[t0]})
    early = _task(job_market, t0)["deadline"]
    chain.mine(3)
    tx = job_market.acceptTask(t1, {"from": workers[t1]})
    late = tx.events["TaskAccepted"]["commitDeadline"]
    assert late == tx.block_number + 20 and late > early
    assert [dict(e) for e in tx.events["StageDeadlineExtended"]] == [{"taskId": t0, "commitDeadline": late}]
    assert _task(job_market, t0)["deadline"] == late


def test_acceptingTheEarlierStage_extendsNothing_andPlainJobsNever(job_market, submitter, four, market_isolation):
    job_id, _ = new_job(job_market, submitter, shards=2, stages=2)
    workers, _ = _draw_all(job_market, submitter, job_id, 2)
    t0, t1 = job_market.taskId(job_id, 0, 0), job_market.taskId(job_id, 0, 1)
    assert "StageDeadlineExtended" not in job_market.acceptTask(t0, {"from": workers[t0]}).events  # t1 only offered
    plain, _ = new_job(job_market, submitter, shards=2)
    drawn, _ = _draw_all(job_market, submitter, plain, 2)
    for tid, worker in drawn.items():
        assert "StageDeadlineExtended" not in job_market.acceptTask(tid, {"from": worker}).events


def test_silentStage_isRedrawnToANewWorker_andTheWaitingStageKeepsItsTask(job_market, stake_manager, submitter, four,
                                                                          market_isolation):
    """Stage 1's worker never accepts: it times out and pays the accept penalty; the stage is
    offered to a worker holding no other stage (not the silent one), and stage 0, running and
    waiting on it, gets a compute window from the new offer's accept deadline."""
    job_id, _ = new_job(job_market, submitter, shards=2, stages=2, acceptWindow=5, computeWindow=20)
    workers, _ = _draw_all(job_market, submitter, job_id, 2)
    t0, t1 = job_market.taskId(job_id, 0, 0), job_market.taskId(job_id, 0, 1)
    job_market.acceptTask(t0, {"from": workers[t0]})
    chain.mine(6)
    silent = workers[t1]
    free_before = stake_manager.freeStake(silent)
    tx = job_market.timeoutTask(t1, {"from": submitter})
    assert (tx.events["TaskTimedOut"]["account"], tx.events["TaskTimedOut"]["phase"]) == (silent, TS.OFFERED)
    if "TaskDrawn" not in tx.events:  # the redraw's attempts all met stage 0's worker: drawn again
        assert tx.events["TaskRequeued"]["taskId"] == t1
        tx = _draw_all(job_market, submitter, job_id, 1)[1][-1]
    redrawn = tx.events["TaskDrawn"]["worker"]
    assert redrawn not in (silent, workers[t0])
    offer_deadline = tx.events["TaskDrawn"]["acceptDeadline"]
    assert tx.events["StageDeadlineExtended"]["taskId"] == t0
    assert _task(job_market, t0)["deadline"] == offer_deadline + 20
    assert _task(job_market, t0)["status"] == TS.RUNNING and _task(job_market, t0)["worker"] == workers[t0]
    # the silent worker's penalty is 1 % of the collateral; its lock is released
    assert stake_manager.freeStake(silent) == free_before + 20 * E - 20 * E // 100


def test_splitJob_withAuditRate_reverts(job_market, submitter, market_isolation):
    with brownie.reverts("JobInvalidAuditRate: 5000"):
        new_job(job_market, submitter, shards=2, stages=2, auditRateBps=5_000)
    job_id, _ = new_job(job_market, submitter, shards=2, stages=1, auditRateBps=5_000)  # a plain job may
    assert job_market.jobOf(job_id).dict()["auditRateBps"] == 5_000


# ------------------------------------------------------------------ a group stands or falls together


def _group_in_windows(job_market, submitter, four, **kw):
    """A job of one group of 3 stages, each accepted, committed and revealed: (job, task ids, workers)."""
    job_id, _ = new_job(job_market, submitter, shards=3, stages=3, rounds=1, acceptWindow=30, **kw)
    workers, _ = _draw_all(job_market, submitter, job_id, 3)
    tids = [job_market.taskId(job_id, 0, k) for k in range(3)]
    for tid in tids:
        job_market.acceptTask(tid, {"from": workers[tid]})
    for tid in tids:
        worker = accounts.at(workers[tid], force=True)
        job_market.commitResult(tid, commitment(tid, ROOT, CID, SALT, worker), {"from": worker})
        job_market.revealResult(tid, ROOT, CID, SALT, {"from": worker})
    return job_id, tids, [workers[t] for t in tids]


def test_stage_isPaidOnlyWithItsGroup_allTogether(job_market, submitter, four, market_isolation):
    job_id, tids, workers = _group_in_windows(job_market, submitter, four)
    chain.mine(job_market.jobOf(job_id).dict()["challengeWindow"] + 1)
    tx = job_market.finalizeMany(tids, {"from": submitter})  # every stage past its window: all paid
    assert tx.return_value == 3
    assert [_task(job_market, t)["status"] for t in tids] == [TS.FINALIZED] * 3
    assert job_market.jobOf(job_id).dict()["finalizedInRound"] == 3


def test_stageInWindow_blocksItsSiblingsPayment(job_market, submitter, four, deployer, market_isolation):
    job_id, tids, workers = _group_in_windows(job_market, submitter, four)
    window = job_market.jobOf(job_id).dict()["challengeWindow"]
    job_market.openChallenge(tids[1], deployer, {"from": deployer})  # stage 1 disputed
    chain.mine(window + 1)
    with brownie.reverts(f"TaskStageGroupUnsettled: {tids[0]}, {tids[1]}"):
        job_market.finalize(tids[0], {"from": submitter})
    tx = job_market.finalizeMany([tids[0], tids[2]], {"from": submitter})
    assert tx.return_value == 0 and "TaskFinalized" not in tx.events
    assert [_task(job_market, t)["status"] for t in tids] == [TS.CHALLENGE, TS.DISPUTED, TS.CHALLENGE]


def test_stageLosingItsDispute_sendsItsGroupBackUnpenalised(job_market, stake_manager, submitter, four, deployer,
                                                            market_isolation):
    job_id, tids, workers = _group_in_windows(job_market, submitter, four)
    locked = {w: stake_manager.stakeOf(w)[1] for w in workers}
    job_market.openChallenge(tids[1], deployer, {"from": deployer})
    tx = job_market.resolveDispute(tids[1], False, {"from": deployer})  # stage 1 lost
    assert [(e["taskId"], e["causeTaskId"]) for e in tx.events["StageReset"]] == [(tids[0], tids[1]), (tids[2], tids[1])]
    assert [_task(job_market, t)["status"] for t in tids] == [TS.PENDING] * 3
    assert job_market.jobOf(job_id).dict()["pendingCount"] == 3
    # the reset stages' workers got their whole collateral back and were not paid
    for k in (0, 2):
        assert stake_manager.stakeOf(workers[k])[1] == locked[workers[k]] - 20 * E
    assert "TaskFinalized" not in tx.events and "TaskTimedOut" not in tx.events
    # the group is drawn again: the lost stage never to the worker that lost it, the reset
    # ones to anybody (they were not at fault), three workers as always
    redrawn, _ = _draw_all(job_market, submitter, job_id, 3)
    assert redrawn[tids[1]] != workers[1] and len(set(redrawn.values())) == 3


def _running_pair(job_market, submitter, **kw):
    job_id, _ = new_job(job_market, submitter, shards=2, stages=2, rounds=1, acceptWindow=5, computeWindow=20, **kw)
    workers, _ = _draw_all(job_market, submitter, job_id, 2)
    t0, t1 = job_market.taskId(job_id, 0, 0), job_market.taskId(job_id, 0, 1)
    for t in (t0, t1):
        job_market.acceptTask(t, {"from": workers[t]})
    return job_id, t0, t1, workers


def _past_deadlines(job_market, *tids):
    mine_past(max(_task(job_market, t)["deadline"] for t in tids))


def test_silentStage_paysItsTimeout_andTheStageThatReportedBeingBlockedGoesBackFree(
        job_market, stake_manager, registry, submitter, four, market_isolation):
    """Stage 1 goes silent mid-pipeline; stage 0, blocked on it, says so before its deadline.
    Whatever order the keeper times them out in, the silent one pays 10 % and the reporter
    nothing, and the group runs again."""
    job_id, t0, t1, workers = _running_pair(job_market, submitter)
    tx = job_market.reportStalled(t0, {"from": workers[t0]})
    assert dict(tx.events["StageStalled"]) == {"taskId": t0, "worker": workers[t0]}
    _past_deadlines(job_market, t0, t1)
    tx = job_market.timeoutTask(t0, {"from": submitter})  # the reporter first: free, the silent one left
    assert "TaskTimedOut" not in tx.events
    assert [(e["taskId"], e["causeTaskId"]) for e in tx.events["StageReset"]] == [(t0, t0)]
    assert _task(job_market, t1)["status"] == TS.RUNNING
    assert stake_manager.stakeOf(workers[t0])[0] == STAKE_AMOUNT
    assert registry.identityOf(workers[t0]).dict()["history"]["tasksTimedOut"] == 0
    tx = job_market.timeoutTask(t1, {"from": submitter})
    assert (tx.events["TaskTimedOut"]["account"], tx.events["TaskTimedOut"]["phase"],
            tx.events["TaskTimedOut"]["penalty"]) == (workers[t1], TS.RUNNING, 2 * E)
    assert registry.identityOf(workers[t1]).dict()["history"]["tasksTimedOut"] == 1


def test_silentStageTimedOutFirst_resetsTheStageThatReported(job_market, stake_manager, submitter, four,
                                                             market_isolation):
    job_id, t0, t1, workers = _running_pair(job_market, submitter)
    job_market.reportStalled(t0, {"from": workers[t0]})
    _past_deadlines(job_market, t0, t1)
    tx = job_market.timeoutTask(t1, {"from": submitter})  # the silent stage first
    assert (tx.events["TaskTimedOut"]["account"], tx.events["TaskTimedOut"]["penalty"]) == (workers[t1], 2 * E)
    assert [(e["taskId"], e["causeTaskId"]) for e in tx.events["StageReset"]] == [(t0, t1)]
    assert _task(job_market, t0)["status"] in (TS.PENDING, TS.OFFERED)
    assert stake_manager.stakeOf(workers[t0])[0] == STAKE_AMOUNT


def test_runningStagesThatBothSaidNothing_bothPay(job_market, stake_manager, submitter, four, market_isolation):
    """Nobody reported: the chain cannot tell who blocked whom, and a stage that does not say
    it is blocked is treated as the silent one. The first timeout leaves the other running
    stage (past its deadline, silent too) to its own timeout."""
    job_id, t0, t1, workers = _running_pair(job_market, submitter)
    _past_deadlines(job_market, t0, t1)
    tx = job_market.timeoutTask(t1, {"from": submitter})
    assert "StageReset" not in tx.events and _task(job_market, t0)["status"] == TS.RUNNING
    tx = job_market.timeoutTask(t0, {"from": submitter})
    assert (tx.events["TaskTimedOut"]["account"], tx.events["TaskTimedOut"]["penalty"]) == (workers[t0], 2 * E)


def test_reportStalled_revertsUnlessTheRunningStagesOwnWorkerBeforeItsDeadline(job_market, submitter, four,
                                                                               market_isolation):
    job_id, t0, t1, workers = _running_pair(job_market, submitter)
    other = next(w for w in four if w not in (workers[t0], workers[t1]))
    with brownie.reverts(f"TaskNotWorker: {t0}, {other.address.lower()}"):
        job_market.reportStalled(t0, {"from": other})
    job_market.reportStalled(t0, {"from": workers[t0]})
    with brownie.reverts(f"TaskNotStage: {t0}"):  # once per attempt
        job_market.reportStalled(t0, {"from": workers[t0]})
    deadline = _task(job_market, t1)["deadline"]
    chain.mine(deadline - chain.height + 1)
    with brownie.reverts(f"TaskDeadlinePassed: {t1}, {deadline}"):
        job_market.reportStalled(t1, {"from": workers[t1]})
    plain, _ = new_job(job_market, submitter, shards=1)
    tid = draw_task(job_market, plain, {"from": submitter}).return_value
    worker = job_market.taskOf(tid)[0]
    with brownie.reverts(f"TaskNotRunning: {tid}"):
        job_market.reportStalled(tid, {"from": worker})
    job_market.acceptTask(tid, {"from": worker})
    with brownie.reverts(f"TaskNotStage: {tid}"):  # not a split job
        job_market.reportStalled(tid, {"from": worker})


def test_disputedStage_ofAResetGroup_isSentBackEvenIfItWins(job_market, submitter, four, deployer, market_isolation):
    job_id, tids, workers = _group_in_windows(job_market, submitter, four)
    job_market.openChallenge(tids[0], deployer, {"from": deployer})
    job_market.openChallenge(tids[2], deployer, {"from": deployer})
    job_market.resolveDispute(tids[2], False, {"from": deployer})  # stage 2 lost: stage 1 reset, stage 0 flagged
    assert _task(job_market, tids[1])["status"] == TS.PENDING
    tx = job_market.resolveDispute(tids[0], True, {"from": deployer})  # stage 0 won, but its group is gone
    assert [(e["taskId"], e["causeTaskId"]) for e in tx.events["StageReset"]] == [(tids[0], tids[0])]
    assert _task(job_market, tids[0])["status"] == TS.PENDING and "TaskFinalized" not in tx.events
    assert job_market.jobOf(job_id).dict()["pendingCount"] == 3


def test_runningStageWaitingOnAStageNobodyHolds_goesBackUnpenalisedIfItSaidSo(job_market, pool, stake_manager,
                                                                               registry, submitter, four,
                                                                               market_isolation):
    """One worker in the pool: stage 0 runs, stage 1 can never be drawn. Its worker reports
    it is blocked; when its deadline passes it goes back without penalty. Without the report
    it would pay like any silent stage (the chain cannot tell blocked from gone)."""
    w1, *others = four
    for a in others:
        pool.leavePool({"from": a})
    job_id, _ = new_job(job_market, submitter, shards=2, stages=2, rounds=1, computeWindow=20)
    t0 = job_market.taskId(job_id, 0, 0)
    draw_task(job_market, job_id, {"from": submitter})
    job_market.acceptTask(t0, {"from": w1})
    job_market.reportStalled(t0, {"from": w1})
    _past_deadlines(job_market, t0)
    tx = job_market.timeoutTask(t0, {"from": submitter})
    assert "TaskTimedOut" not in tx.events
    assert [(e["taskId"], e["causeTaskId"]) for e in tx.events["StageReset"]] == [(t0, t0)]
    assert [e["amount"] for e in tx.events["CollateralUnlocked"]] == [20 * E]  # all of it came back
    assert stake_manager.stakeOf(w1)[0] == STAKE_AMOUNT
    assert registry.identityOf(w1).dict()["history"]["tasksTimedOut"] == 0
    # not at fault, so not excluded (no worker kept to exclude): the stage waits for the next
    # offer ticket, and w1 may take it again
    assert (_task(job_market, t0)["status"], _task(job_market, t0)["worker"]) == (TS.PENDING, ZERO)
