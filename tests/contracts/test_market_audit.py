"""Audits: the draw settled from a block after the commit, the auditor commits before the worker
reveals, match → paid, mismatch → Disputed; the market side of resolving a dispute."""

import brownie
from brownie import chain

from tests.contracts.market_setup import *  # noqa: F401,F403

OTHER = "0x" + "99" * 32


def _committed(job_market, submitter, w1):
    job_id, _ = new_job(job_market, submitter, auditRateBps=10_000)
    tid = draw_task(job_market, job_id, {"from": w1}).return_value
    job_market.acceptTask(tid, {"from": w1})
    tx = job_market.commitResult(tid, commitment(tid, ROOT, CID, SALT, w1), {"from": w1})
    assert tx.events["AuditRequested"]["ticket"] == ticket_for(tx.block_number)
    mine_past(ticket_for(tx.block_number))
    return job_id, tid, job_market.settleAudit(tid, {"from": submitter})


def test_commit_withAuditRate_requestsTheDraw_settleDrawsAuditorAndLocksItsCollateral(job_market, stake_manager, submitter, w1, v1, market_isolation):
    job_id, _ = new_job(job_market, submitter, auditRateBps=10_000)
    early = draw_task(job_market, job_id, {"from": w1}).return_value
    job_market.acceptTask(early, {"from": w1})
    tx = job_market.commitResult(early, commitment(early, ROOT, CID, SALT, w1), {"from": w1})
    assert "AuditorDrawn" not in tx.events and job_market.taskOf(early)[4] == "0x" + "00" * 20
    with brownie.reverts(f"RandomnessUnavailable: {ticket_for(tx.block_number)}"):
        job_market.settleAudit(early, {"from": submitter})
    _, tid, tx = _committed(job_market, submitter, w1)
    assert tx.events["AuditorDrawn"]["auditor"] == v1
    assert job_market.taskOf(tid)[4] == v1
    assert stake_manager.stakeOf(v1)[1] == AUDITOR_COLLATERAL


def test_reveal_beforeAuditCommit_reverts(job_market, submitter, w1, v1, market_isolation):
    _, tid, _ = _committed(job_market, submitter, w1)
    with brownie.reverts(f"TaskAuditNotCommitted: {tid}"):
        job_market.revealResult(tid, ROOT, CID, SALT, {"from": w1})


def test_audit_matching_paysAuditorTheFee(job_market, stake_manager, submitter, w1, v1, market_isolation):
    _, tid, _ = _committed(job_market, submitter, w1)
    with brownie.reverts(f"TaskNotAuditor: {tid}, {w1.address.lower()}"):
        job_market.commitAudit(tid, audit_commitment(tid, ROOT, SALT, v1), {"from": w1})
    tx = job_market.commitAudit(tid, audit_commitment(tid, ROOT, SALT, v1), {"from": v1})
    assert "AuditCommitted" in tx.events
    with brownie.reverts(f"TaskNotAwaitingAudit: {tid}"):
        job_market.commitAudit(tid, audit_commitment(tid, ROOT, SALT, v1), {"from": v1})
    job_market.revealResult(tid, ROOT, CID, SALT, {"from": w1})
    assert job_market.taskOf(tid)[1] == TS.REVEALED
    with brownie.reverts(f"TaskCommitmentMismatch: {tid}"):
        job_market.revealAudit(tid, OTHER, SALT, {"from": v1})
    tx = job_market.revealAudit(tid, ROOT, SALT, {"from": v1})
    assert "AuditRevealed" in tx.events and "ChallengeWindowOpened" in tx.events
    with brownie.reverts(f"TaskAuditNotRevealable: {tid}"):
        job_market.revealAudit(tid, ROOT, SALT, {"from": v1})
    chain.mine(21)
    tx = job_market.finalize(tid, {"from": v1})
    assert tx.events["TaskFinalized"]["auditor"] == v1 and tx.events["TaskFinalized"]["auditFee"] == 2 * E
    assert job_market.credits(v1) == 2 * E and job_market.credits(submitter) == 0
    assert stake_manager.stakeOf(v1)[1] == 0


def test_auditRevealFirst_thenWorkerReveal_compares(job_market, submitter, w1, v1, market_isolation):
    _, tid, _ = _committed(job_market, submitter, w1)
    job_market.commitAudit(tid, audit_commitment(tid, ROOT, SALT, v1), {"from": v1})
    job_market.revealAudit(tid, ROOT, SALT, {"from": v1})
    tx = job_market.revealResult(tid, ROOT, CID, SALT, {"from": w1})
    assert "ChallengeWindowOpened" in tx.events


def test_audit_mismatch_movesTaskToDisputed_withFundsLocked(job_market, stake_manager, submitter, w1, v1, market_isolation):
    job_id, tid, _ = _committed(job_market, submitter, w1)
    job_market.commitAudit(tid, audit_commitment(tid, OTHER, SALT, v1), {"from": v1})
    job_market.revealResult(tid, ROOT, CID, SALT, {"from": w1})
    tx = job_market.revealAudit(tid, OTHER, SALT, {"from": v1})
    ev = tx.events["TaskDisputed"]
    assert (ev["root"], ev["auditRoot"]) == (ROOT, OTHER)
    assert job_market.taskOf(tid)[1] == TS.DISPUTED
    assert stake_manager.stakeOf(w1)[1] == 20 * E and stake_manager.stakeOf(v1)[1] == AUDITOR_COLLATERAL
    assert job_market.jobOf(job_id).dict()["escrow"] == 6 * 12 * E
    with brownie.reverts(f"TaskNotInChallengeWindow: {tid}"):
        job_market.finalize(tid, {"from": w1})


def _mismatched(job_market, submitter, w1, v1):
    job_id, tid, _ = _committed(job_market, submitter, w1)
    job_market.commitAudit(tid, audit_commitment(tid, OTHER, SALT, v1), {"from": v1})
    job_market.revealResult(tid, ROOT, CID, SALT, {"from": w1})
    job_market.revealAudit(tid, OTHER, SALT, {"from": v1})
    return job_id, tid


def test_resolveDispute_workerWon_paysWorkerWithoutAuditFee(job_market, stake_manager, submitter, deployer, w1, v1, market_isolation):
    # The DisputeGame settles stakes itself (tests/contracts/test_dispute_*.py); the market only moves the task.
    _, tid = _mismatched(job_market, submitter, w1, v1)
    with brownie.reverts(f"MarketNotDisputeGame: {w1.address.lower()}"):
        job_market.resolveDispute(tid, True, {"from": w1})
    tx = job_market.resolveDispute(tid, True, {"from": deployer})
    assert tx.events["DisputeResolved"]["workerWon"] is True
    assert job_market.taskOf(tid)[1] == TS.FINALIZED
    assert job_market.credits(w1) == 10 * E and job_market.jobOf(tid >> 64).dict()["surplus"] == 2 * E
    with brownie.reverts(f"TaskNotDisputed: {tid}"):
        job_market.resolveDispute(tid, True, {"from": deployer})


def test_resolveDispute_workerLost_requeuesForAnotherWorker(job_market, pool, submitter, deployer, w1, w2, v1, market_isolation):
    job_id, tid = _mismatched(job_market, submitter, w1, v1)
    tx = job_market.resolveDispute(tid, False, {"from": deployer})
    # the only worker is excluded from the redraw, so the task waits on the pending stack
    assert "TaskRequeued" in tx.events and job_market.taskOf(tid)[1] == TS.PENDING
    assert job_market.jobOf(job_id).dict()["pendingCount"] == 1
    # the job's other shard task goes first (from the ticket the requeue found), then the
    # requeued one, from the next ticket: w1 is excluded and nobody else is in the pool
    other = draw_task(job_market, job_id, {"from": w1}).events["TaskDrawn"]
    assert other["worker"] == w1 and other["taskId"] != tid
    with brownie.reverts(f"JobNoEligibleWorker: {job_id}, {tid}"):
        draw_task(job_market, job_id, {"from": w1})
    refresh_after_hold(pool)  # (a join while offers are held would wait for w2's refresh)
    pool.joinPool({"from": w2})
    tx = draw_task(job_market, job_id, {"from": w1})  # redrawn first, for another worker
    assert tx.return_value == tid and tx.events["TaskDrawn"]["worker"] == w2


def test_noEligibleAuditor_waivesAudit(job_market, pool, submitter, w1, v1, market_isolation):
    pool.leavePool({"from": v1})
    _, tid, tx = _committed(job_market, submitter, w1)
    assert "AuditWaived" in tx.events and job_market.taskOf(tid)[4] == "0x" + "00" * 20
    with brownie.reverts(f"TaskAuditNotDue: {tid}"):
        job_market.settleAudit(tid, {"from": submitter})
    job_market.revealResult(tid, ROOT, CID, SALT, {"from": w1})


def test_lapsedAuditDraw_countsAsDrawn_andAsksForItsAuditorFromANewTicket(job_market, submitter, w1, v1, market_isolation):
    """Nobody settled the draw inside its ticket's epoch: waiting must not help the worker, so
    the draw counts as drawn (whatever the hash said) and its auditor comes from a new ticket;
    the reveal is refused meanwhile."""
    job_id, _ = new_job(job_market, submitter, auditRateBps=1, revealWindow=200)
    tid = draw_task(job_market, job_id, {"from": w1}).return_value
    job_market.acceptTask(tid, {"from": w1})
    ticket = job_market.commitResult(tid, commitment(tid, ROOT, CID, SALT, w1), {"from": w1}).events["AuditRequested"]["ticket"]
    mine_past(last_block(ticket))
    assert chain.height + 1 <= ticket + 200  # still before the reveal deadline
    with brownie.reverts(f"RandomnessUnavailable: {ticket}"):
        job_market.revealResult(tid, ROOT, CID, SALT, {"from": w1})
    tx = job_market.settleAudit(tid, {"from": submitter})
    again = tx.events["AuditRequested"]["ticket"]
    assert again == ticket_for(tx.block_number) and "AuditorDrawn" not in tx.events
    assert job_market.taskOf(tid)[3] & 16 and job_market.taskOf(tid)[2] == again + 200  # FLAG_AUDIT_DUE
    mine_past(again)
    assert job_market.settleAudit(tid, {"from": submitter}).events["AuditorDrawn"]["auditor"] == v1
