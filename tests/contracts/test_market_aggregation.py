"""The round's aggregation task: drawn as soon as every shard task of its round has revealed
its result (it computes while their challenge windows run), paid only once every one is
finalized, and sent back undrawn, unpaid and unpenalised when a revealed shard result it read
is discarded (AggregationReset). The deployer is wired as a dispute game here: it opens and
resolves disputes directly (the real game's stakes are tests/contracts/test_dispute_*.py)."""

import brownie
from brownie import accounts, chain

from tests.contracts.market_setup import *  # noqa: F401,F403

AGG_ROOT = "0x" + "cc" * 32
OTHER = "0x" + "99" * 32
FLAG_GROUP_RESET, FLAG_RELEASED = 64, 128
ZERO_ADDRESS = "0x" + "00" * 20


def _running(job_market, job_id, sender):
    """Draw the job's next task and accept it as the worker drawn; (id, worker)."""
    tx = draw_task(job_market, job_id, {"from": sender})
    tid, worker = tx.return_value, accounts.at(tx.events["TaskDrawn"]["worker"], force=True)
    job_market.acceptTask(tid, {"from": worker})
    return tid, worker


def _reveal(job_market, tid, worker, root=ROOT):
    job_market.commitResult(tid, commitment(tid, root, CID, SALT, worker), {"from": worker})
    return job_market.revealResult(tid, root, CID, SALT, {"from": worker})


def _revealed(job_market, job_id, sender, root=ROOT):
    """Draw the job's next task and take it to its reveal as the worker drawn; (id, worker, reveal tx)."""
    tid, worker = _running(job_market, job_id, sender)
    return tid, worker, _reveal(job_market, tid, worker, root)


def _job(job_market, submitter, **terms):
    job_id, _ = new_job(job_market, submitter, **{"shards": 2, "rounds": 1, **terms})
    return job_id


def _held(pool, stake_manager, account):
    """(pool slots held, collateral locked) of ``account``."""
    return pool.memberOf(account).dict()["active"], stake_manager.stakeOf(account)[1]


def _conserved(job_market, token):
    assert token.balanceOf(job_market) == job_market.totalEscrow() + job_market.totalCredits()


def test_aggregation_isDrawnOnceEveryShardRevealed_andPaidOnceEveryShardIsFinalized(job_market, token, submitter, deployer, w1, four, market_isolation):
    job_id = _job(job_market, submitter, rounds=2)
    s0, _, _ = _revealed(job_market, job_id, w1)
    s1, w = _running(job_market, job_id, w1)
    assert job_market.jobOf(job_id).dict()["revealedInRound"] == 1
    with brownie.reverts(f"JobNothingToDraw: {job_id}"):  # one shard is not revealed yet
        draw_task(job_market, job_id, {"from": w1})
    tx = _reveal(job_market, s1, w)
    # The last reveal unlocks the aggregation: its offers come from a ticket asked for now.
    assert tx.events["OffersRequested"]["ticket"] == job_market.offerTicketOf(job_id)
    job = job_market.jobOf(job_id).dict()
    assert (job["revealedInRound"], job["finalizedInRound"]) == (2, 0)
    job_market.openChallenge(s0, deployer, {"from": deployer})  # s0 stays unsettled
    agg, aw, _ = _revealed(job_market, job_id, w1, AGG_ROOT)
    assert agg == job_market.taskId(job_id, 0, 2)
    chain.mine(21)
    job_market.finalize(s1, {"from": w1})
    with brownie.reverts(f"TaskAggregationInputsUnsettled: {agg}, 1, 2"):
        job_market.finalize(agg, {"from": w1})
    assert job_market.finalizeMany.call([agg], {"from": w1}) == 0  # skipped in a batch
    job_market.resolveDispute(s0, True, {"from": deployer})  # s0 stood: its window resumes
    chain.mine(21)
    # shards before their aggregation in one batch: all three are paid, the round advances
    tx = job_market.finalizeMany([s0, agg], {"from": w1})
    assert [e["taskId"] for e in tx.events["TaskFinalized"]] == [s0, agg]
    assert tx.events["RoundAdvanced"]["checkpointHash"] == AGG_ROOT
    job = job_market.jobOf(job_id).dict()
    assert (job["currentRound"], job["nextIndex"], job["revealedInRound"], job["finalizedInRound"]) == (1, 0, 0, 0)
    _conserved(job_market, token)


def test_shardLostAfterTheAggregationWasDrawn_resetsItUnpaid_andItIsRedrawnOnTheNewResult(job_market, token, pool, stake_manager, submitter, deployer, w1, four, market_isolation):
    job_id = _job(job_market, submitter)
    s0, cheat, _ = _revealed(job_market, job_id, w1)
    s1, _, _ = _revealed(job_market, job_id, w1)
    tx = draw_task(job_market, job_id, {"from": w1})
    agg, aw = tx.return_value, accounts.at(tx.events["TaskDrawn"]["worker"], force=True)
    job_market.acceptTask(agg, {"from": aw})
    job_market.commitResult(agg, commitment(agg, AGG_ROOT, "bafyagg", SALT, aw), {"from": aw})
    before = _held(pool, stake_manager, aw)
    job_market.openChallenge(s0, deployer, {"from": deployer})
    tx = job_market.resolveDispute(s0, False, {"from": deployer})
    assert [(e["taskId"], e["causeTaskId"]) for e in tx.events["AggregationReset"]] == [(agg, s0)]
    assert {e["taskId"] for e in tx.events["TaskRequeued"]} == {s0, agg}
    task = job_market.taskOf(agg).dict()
    assert (task["status"], task["worker"], task["result"]) == (TS.NONE, ZERO_ADDRESS, "0x" + "00" * 32)
    # its worker got its whole collateral and its pool slot back (it was not at fault)
    assert _held(pool, stake_manager, aw) == (before[0] - 1, before[1] - 20 * E)
    job = job_market.jobOf(job_id).dict()
    assert (job["revealedInRound"], job["nextIndex"], job["pendingCount"]) == (1, 2, 1)
    with brownie.reverts(f"TaskNotCommitted: {agg}"):  # its commitment is gone
        job_market.revealResult(agg, AGG_ROOT, "bafyagg", SALT, {"from": aw})
    # s0 is redrawn (never for the worker that lost it), then the aggregation on its new result
    redo, worker, tx = _revealed(job_market, job_id, w1)
    assert redo == s0 and worker != cheat and "OffersRequested" in tx.events
    again, _, _ = _revealed(job_market, job_id, w1, AGG_ROOT)
    assert again == agg
    chain.mine(21)
    tx = job_market.finalizeMany([s0, s1, agg], {"from": w1})
    assert len(tx.events["TaskFinalized"]) == 3 and "JobCompleted" in tx.events
    assert job_market.jobOf(job_id).dict()["escrow"] == 0
    _conserved(job_market, token)


def test_aggregationSentBack_isUndrawnNotQueued_andItsRedrawExcludesItsWorker(job_market, submitter, w1, four, market_isolation):
    job_id = _job(job_market, submitter)
    _revealed(job_market, job_id, w1)
    _revealed(job_market, job_id, w1)
    tx = draw_task(job_market, job_id, {"from": w1})
    agg, late = tx.return_value, tx.events["TaskDrawn"]["worker"]
    mine_past(job_market.taskOf(agg)[2])
    tx = job_market.timeoutTask(agg, {"from": w1})
    assert tx.events["TaskRequeued"]["taskId"] == agg and "AggregationReset" not in tx.events
    task = job_market.taskOf(agg).dict()
    assert (task["status"], task["worker"]) == (TS.NONE, late)  # kept, to be excluded
    job = job_market.jobOf(job_id).dict()
    assert (job["nextIndex"], job["pendingCount"]) == (2, 0)
    # drawable at once, but not from the hash of a ticket asked for before now
    assert job_market.offerTicketOf(job_id) == 0
    tx = draw_task(job_market, job_id, {"from": w1})
    assert tx.return_value == agg and tx.events["TaskDrawn"]["worker"] != late


def test_aggregationInItsOwnDispute_whenAShardIsDiscarded_goesBackUnpaidEvenIfItWins(job_market, pool, stake_manager, submitter, deployer, w1, four, market_isolation):
    job_id = _job(job_market, submitter)
    s0, _, _ = _revealed(job_market, job_id, w1)
    _revealed(job_market, job_id, w1)
    agg, aw, _ = _revealed(job_market, job_id, w1, AGG_ROOT)
    job_market.openChallenge(agg, deployer, {"from": deployer})
    job_market.openChallenge(s0, deployer, {"from": deployer})
    tx = job_market.resolveDispute(s0, False, {"from": deployer})
    assert "AggregationReset" not in tx.events  # left to its own game, flagged
    assert job_market.taskOf(agg).dict()["flags"] & FLAG_GROUP_RESET
    before = _held(pool, stake_manager, aw)
    tx = job_market.resolveDispute(agg, True, {"from": deployer})
    assert [(e["taskId"], e["causeTaskId"]) for e in tx.events["AggregationReset"]] == [(agg, agg)]
    assert "TaskFinalized" not in tx.events and job_market.credits(aw) == 0
    assert job_market.taskOf(agg).dict()["status"] == TS.NONE
    # its slot was freed at its reveal: its whole collateral comes back
    assert _held(pool, stake_manager, aw) == (before[0], before[1] - 20 * E)


def _audited_agg(job_market, job_id, w1, v1, auditor_root):
    """The aggregation drawn, committed, audited by v1 with ``auditor_root`` and revealed; (id, worker)."""
    tx = draw_task(job_market, job_id, {"from": w1})
    agg, aw = tx.return_value, accounts.at(tx.events["TaskDrawn"]["worker"], force=True)
    job_market.acceptTask(agg, {"from": aw})
    job_market.commitResult(agg, commitment(agg, AGG_ROOT, "bafyagg", SALT, aw), {"from": aw})
    assert settle_audit(job_market, agg) == v1
    job_market.commitAudit(agg, audit_commitment(agg, auditor_root, SALT, v1), {"from": v1})
    job_market.revealAudit(agg, auditor_root, SALT, {"from": v1})
    job_market.revealResult(agg, AGG_ROOT, "bafyagg", SALT, {"from": aw})
    return agg, aw


def _audited_shard(job_market, job_id, w1, v1):
    tx = draw_task(job_market, job_id, {"from": w1})
    tid, worker = tx.return_value, accounts.at(tx.events["TaskDrawn"]["worker"], force=True)
    job_market.acceptTask(tid, {"from": worker})
    job_market.commitResult(tid, commitment(tid, ROOT, CID, SALT, worker), {"from": worker})
    assert settle_audit(job_market, tid) == v1
    job_market.commitAudit(tid, audit_commitment(tid, ROOT, SALT, v1), {"from": v1})
    job_market.revealAudit(tid, ROOT, SALT, {"from": v1})
    job_market.revealResult(tid, ROOT, CID, SALT, {"from": worker})
    return tid


def test_aggregationWinningItsAuditGame_beforeItsShardsAreFinal_waitsAndIsPaidOnce(job_market, token, pool, stake_manager, submitter, deployer, w1, v1, four, market_isolation):
    job_id = _job(job_market, submitter, shards=1, auditRateBps=10_000)
    shard = _audited_shard(job_market, job_id, w1, v1)
    agg, aw = _audited_agg(job_market, job_id, w1, v1, OTHER)
    assert job_market.taskOf(agg).dict()["status"] == TS.DISPUTED
    slots = pool.memberOf(aw).dict()["active"]  # its slot was released when the game began
    tx = job_market.resolveDispute(agg, True, {"from": deployer})
    # the shard's window still runs: the aggregation waits in a window already over
    assert tx.events["ChallengeWindowOpened"]["deadline"] == tx.block_number - 1
    task = job_market.taskOf(agg).dict()
    assert (task["status"], task["deadline"]) == (TS.CHALLENGE, tx.block_number - 1)
    assert task["flags"] & FLAG_RELEASED and "TaskFinalized" not in tx.events
    with brownie.reverts(f"TaskDeadlinePassed: {agg}, {tx.block_number - 1}"):  # nobody can challenge it
        job_market.openChallenge(agg, deployer, {"from": deployer})
    with brownie.reverts(f"TaskAggregationInputsUnsettled: {agg}, 0, 1"):
        job_market.finalize(agg, {"from": w1})
    chain.mine(21)
    job_market.finalize(shard, {"from": w1})
    tx = job_market.finalize(agg, {"from": w1})
    ev = tx.events["TaskFinalized"]
    assert (ev["worker"], ev["reward"], ev["auditor"], ev["auditFee"]) == (aw, 10 * E, ZERO_ADDRESS, 0)
    assert "JobCompleted" in tx.events
    assert pool.memberOf(aw).dict()["active"] == slots  # released once, when its game began
    _conserved(job_market, token)


def test_stoppedJob_shardLostAfterTheAggregationWasDrawn_closesAndRefundsTheAggregation(job_market, token, pool, stake_manager, submitter, deployer, w1, four, market_isolation):
    job_id = _job(job_market, submitter)
    s0, _, _ = _revealed(job_market, job_id, w1)
    s1, _, _ = _revealed(job_market, job_id, w1)
    agg, aw, _ = _revealed(job_market, job_id, w1, AGG_ROOT)
    job_market.cancelJob(job_id, {"from": submitter})  # every task was drawn: nothing refunded yet
    before = _held(pool, stake_manager, aw)
    job_market.openChallenge(s0, deployer, {"from": deployer})
    tx = job_market.resolveDispute(s0, False, {"from": deployer})
    assert {e["taskId"]: e["refund"] for e in tx.events["TaskClosed"]} == {s0: 12 * E, agg: 12 * E}
    assert [(e["taskId"], e["causeTaskId"]) for e in tx.events["AggregationReset"]] == [(agg, s0)]
    assert job_market.taskOf(agg).dict()["status"] == TS.CLOSED
    assert _held(pool, stake_manager, aw) == (before[0], before[1] - 20 * E)  # (slot freed at its reveal)
    chain.mine(21)
    job_market.finalize(s1, {"from": w1})  # the shard that stood is still paid
    assert job_market.jobOf(job_id).dict()["escrow"] == 0 and job_market.totalEscrow() == 0
    assert job_market.credits(submitter) == 24 * E + 2 * E  # two task costs + s1's unused fee
    _conserved(job_market, token)


def test_createJob_moreShardsThanARoundCounts_reverts(job_market, submitter, market_isolation):
    with brownie.reverts("JobInvalidShape: 65536, 1"):
        new_job(job_market, submitter, shards=65_536, rounds=1)
