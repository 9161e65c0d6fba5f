"""Timeouts: every deadline has a permissionless call that penalises who was late and moves the task on."""

import brownie
from brownie import chain

from tests.contracts.market_setup import *  # noqa: F401,F403


def _drawn(job_market, submitter, w1, **kw):
    job_id, _ = new_job(job_market, submitter, **kw)
    tid = draw_task(job_market, job_id, {"from": w1}).return_value
    return job_id, tid


def test_timeout_beforeDeadline_reverts(job_market, submitter, w1, market_isolation):
    _, tid = _drawn(job_market, submitter, w1)
    with brownie.reverts(f"TaskDeadlineNotPassed: {tid}, {job_market.taskOf(tid)[2]}"):
        job_market.timeoutTask(tid, {"from": submitter})


def test_timeout_ofUndrawnTask_reverts(job_market, submitter, w1, market_isolation):
    job_id, _ = new_job(job_market, submitter)
    tid = job_market.taskId(job_id, 0, 0)
    with brownie.reverts(f"TaskNotTimeoutable: {tid}, 0"):
        job_market.timeoutTask(tid, {"from": submitter})


def test_accept_afterWindow_reverts(job_market, submitter, w1, market_isolation):
    _, tid = _drawn(job_market, submitter, w1)
    deadline = job_market.taskOf(tid)[2]
    chain.mine(6)
    with brownie.reverts(f"TaskDeadlinePassed: {tid}, {deadline}"):
        job_market.acceptTask(tid, {"from": w1})


def test_accept_byOtherAccount_reverts(job_market, submitter, w1, w2, market_isolation):
    _, tid = _drawn(job_market, submitter, w1)
    with brownie.reverts(f"TaskNotWorker: {tid}, {w2.address.lower()}"):
        job_market.acceptTask(tid, {"from": w2})
    job_market.acceptTask(tid, {"from": w1})
    with brownie.reverts(f"TaskNotOffered: {tid}"):
        job_market.acceptTask(tid, {"from": w1})


def test_acceptTimeout_redrawsToAnotherWorker_itsPenaltyBurned(job_market, registry, stake_manager, pool, token, submitter,
                                                              w1, w2, market_isolation):
    job_id, tid = _drawn(job_market, submitter, w1)
    refresh_after_hold(pool)  # (a join while offers are held would wait for w2's refresh)
    pool.joinPool({"from": w2})
    chain.mine(6)
    burned = token.totalBurned()
    tx = job_market.timeoutTask(tid, {"from": submitter})
    assert tx.events["TaskTimedOut"]["account"] == w1 and tx.events["TaskTimedOut"]["phase"] == TS.OFFERED
    # the submitter could have caused it (inputs withheld): the penalty pays nobody
    assert token.totalBurned() - burned == tx.events["TaskTimedOut"]["penalty"] == 20 * E // 100
    assert stake_manager.credits(submitter) == 0 and "StakePenalized" not in tx.events
    assert "TaskRequeued" in tx.events  # offered again from the next offer ticket
    assert draw_task(job_market, job_id, {"from": submitter}).events["TaskDrawn"]["worker"] == w2  # the late worker is excluded
    assert stake_manager.stakeOf(w1)[1] == 0 and stake_manager.stakeOf(w2)[1] == 20 * E
    assert registry.identityOf(w1).dict()["history"]["tasksTimedOut"] == 1


def test_commitTimeout_burnsTheWorkersPenalty_andRequeues(job_market, stake_manager, token, submitter, w1, market_isolation):
    job_id, tid = _drawn(job_market, submitter, w1)
    job_market.acceptTask(tid, {"from": w1})
    chain.mine(21)
    with brownie.reverts(f"TaskDeadlinePassed: {tid}, {job_market.taskOf(tid)[2]}"):
        job_market.commitResult(tid, ROOT, {"from": w1})
    burned = token.totalBurned()
    tx = job_market.timeoutTask(tid, {"from": submitter})
    assert tx.events["TaskTimedOut"]["penalty"] == 2 * E  # 10 % of the collateral
    assert token.totalBurned() - burned == 2 * E and stake_manager.credits(submitter) == 0  # burned
    assert stake_manager.stakeOf(w1)[1] == 0
    assert "TaskRequeued" in tx.events and job_market.jobOf(job_id).dict()["pendingCount"] == 1


def test_revealTimeout_slashesTheWholeCollateral(job_market, stake_manager, submitter, w1, market_isolation):
    _, tid = _drawn(job_market, submitter, w1)
    job_market.acceptTask(tid, {"from": w1})
    job_market.commitResult(tid, commitment(tid, ROOT, CID, SALT, w1), {"from": w1})
    with brownie.reverts(f"TaskCommitmentMismatch: {tid}"):
        job_market.revealResult(tid, ROOT, "other", SALT, {"from": w1})
    chain.mine(11)
    tx = job_market.timeoutTask(tid, {"from": submitter})
    assert tx.events["TaskTimedOut"]["phase"] == TS.COMMITTED and tx.events["TaskTimedOut"]["account"] == w1
    assert tx.events["TaskTimedOut"]["penalty"] == 20 * E  # silence after a commitment: as losing
    assert job_market.taskOf(tid)[1] == TS.PENDING


def test_auditCommitTimeout_burnsTheAuditorsPenalty_andDrawsAnother(job_market, stake_manager, pool, registry, token, submitter,
                                                                    w1, v1, v2, market_isolation):
    _, tid = _drawn(job_market, submitter, w1, auditRateBps=10_000)
    job_market.acceptTask(tid, {"from": w1})
    job_market.commitResult(tid, commitment(tid, ROOT, CID, SALT, w1), {"from": w1})
    assert settle_audit(job_market, tid) == v1
    pool.leavePool({"from": v1})
    joined = pool.joinPool({"from": v2})
    assert joined.events["VerifierWeightDeferred"]["account"] == v2  # the draw's weights are held
    refresh_after_hold(pool, v2)
    mine_past(job_market.taskOf(tid)[2])  # the auditor's deadline
    burned = token.totalBurned()
    tx = job_market.timeoutTask(tid, {"from": submitter})
    assert token.totalBurned() - burned == AUDITOR_PENALTY
    assert tx.events["TaskTimedOut"]["account"] == v1 and tx.events["TaskTimedOut"]["penalty"] == AUDITOR_PENALTY
    assert tx.events["AuditRequested"]["ticket"] == ticket_for(tx.block_number)
    assert settle_audit(job_market, tid) == v2
    assert stake_manager.stakeOf(v1)[1] == 0 and stake_manager.credits(submitter) == 0
    assert registry.identityOf(v1).dict()["history"]["tasksTimedOut"] == 1
    pool.leavePool({"from": v2})
    chain.mine(21)
    job_market.timeoutTask(tid, {"from": submitter})
    mine_past(job_market.taskOf(tid)[2] - 10)
    tx = job_market.settleAudit(tid, {"from": submitter})
    assert "AuditWaived" in tx.events
    with brownie.reverts(f"TaskAuditNotDue: {tid}"):
        job_market.settleAudit(tid, {"from": submitter})
    job_market.revealResult(tid, ROOT, CID, SALT, {"from": w1})
    chain.mine(21)
    job_market.finalize(tid, {"from": w1})
    job_market.refundSurplus(tid >> 64, {"from": w1})
    assert job_market.credits(submitter) == 2 * E  # the unused audit fee


def test_auditRevealTimeout_penalisesAuditor_andResultStands(job_market, stake_manager, submitter, w1, v1, market_isolation):
    _, tid = _drawn(job_market, submitter, w1, auditRateBps=10_000)
    job_market.acceptTask(tid, {"from": w1})
    job_market.commitResult(tid, commitment(tid, ROOT, CID, SALT, w1), {"from": w1})
    settle_audit(job_market, tid)
    job_market.commitAudit(tid, audit_commitment(tid, ROOT, SALT, v1), {"from": v1})
    job_market.revealResult(tid, ROOT, CID, SALT, {"from": w1})
    chain.mine(11)
    tx = job_market.timeoutTask(tid, {"from": submitter})
    assert tx.events["TaskTimedOut"]["account"] == v1 and "ChallengeWindowOpened" in tx.events
    assert tx.events["TaskTimedOut"]["penalty"] == AUDITOR_COLLATERAL  # silent after its commitment
    assert stake_manager.stakeOf(v1)[1] == 0
    with brownie.reverts(f"TaskAuditNotRevealable: {tid}"):
        job_market.revealAudit(tid, ROOT, SALT, {"from": v1})


def test_commitAndReveal_wrongStateOrCaller_revert(job_market, submitter, w1, w2, market_isolation):
    _, tid = _drawn(job_market, submitter, w1)
    with brownie.reverts(f"TaskNotRunning: {tid}"):
        job_market.commitResult(tid, ROOT, {"from": w1})
    with brownie.reverts(f"TaskNotCommitted: {tid}"):
        job_market.revealResult(tid, ROOT, CID, SALT, {"from": w1})
    with brownie.reverts(f"TaskNotAwaitingAudit: {tid}"):
        job_market.commitAudit(tid, ROOT, {"from": w1})
    job_market.acceptTask(tid, {"from": w1})
    with brownie.reverts(f"TaskNotWorker: {tid}, {w2.address.lower()}"):
        job_market.commitResult(tid, ROOT, {"from": w2})


def test_auditCommit_afterDeadline_reverts(job_market, submitter, w1, v1, market_isolation):
    _, tid = _drawn(job_market, submitter, w1, auditRateBps=10_000)
    job_market.acceptTask(tid, {"from": w1})
    job_market.commitResult(tid, commitment(tid, ROOT, CID, SALT, w1), {"from": w1})
    settle_audit(job_market, tid)
    chain.mine(21)
    with brownie.reverts(f"TaskDeadlinePassed: {tid}, {job_market.taskOf(tid)[2]}"):
        job_market.commitAudit(tid, ROOT, {"from": v1})
