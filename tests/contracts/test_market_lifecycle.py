"""One task's life and whole jobs: draw → accept → commit → reveal → finalize, rounds, aggregation."""

import brownie
from brownie import accounts, chain

from tests.contracts.market_setup import *  # noqa: F401,F403


def test_createJob_pullsEscrowAndEmitsCounts(job_market, token, submitter, market_isolation):
    before = token.balanceOf(submitter)
    job_id, tx = new_job(job_market, submitter, shards=3, rounds=2)
    escrow = 4 * 2 * 12 * E
    assert token.balanceOf(submitter) == before - escrow
    assert job_market.totalEscrow() == escrow
    ev = tx.events["JobCreated"]
    assert (ev["jobId"], ev["shards"], ev["rounds"], ev["taskCount"], ev["escrow"]) == (job_id, 3, 2, 8, escrow)
    job = job_market.jobOf(job_id).dict()
    assert job["status"] == 1 and job["escrow"] == escrow and job["checkpointCid"] == "bafyinit"


def test_oneTask_fullLife_paysWorkerAndRefundsUnusedAuditFee(job_market, token, registry, stake_manager, pool, submitter, w1, market_isolation):
    job_id, _ = new_job(job_market, submitter)
    tx = draw_task(job_market, job_id, {"from": w1})
    tid = tx.return_value
    assert tid == job_market.taskId(job_id, 0, 0) == (job_id << 64)
    assert tx.events["TaskDrawn"]["worker"] == w1
    assert stake_manager.stakeOf(w1)[1] == 20 * E  # collateral locked at draw
    assert job_market.taskOf(tid)[1] == TS.OFFERED
    tx = job_market.acceptTask(tid, {"from": w1})
    assert "TaskAccepted" in tx.events and job_market.taskOf(tid)[1] == TS.RUNNING
    c = commitment(tid, ROOT, CID, SALT, w1)
    tx = job_market.commitResult(tid, c, {"from": w1})
    assert tx.events["ResultCommitted"]["commitment"] == c and job_market.taskOf(tid)[1] == TS.COMMITTED
    tx = job_market.revealResult(tid, ROOT, CID, SALT, {"from": w1})
    assert tx.events["ResultRevealed"]["resultCid"] == CID
    assert "ChallengeWindowOpened" in tx.events and job_market.taskOf(tid)[1] == TS.CHALLENGE
    with brownie.reverts(f"TaskChallengeWindowOpen: {tid}, {tx.events['ChallengeWindowOpened']['deadline']}"):
        job_market.finalize(tid, {"from": w1})
    chain.mine(21)
    tx = job_market.finalize(tid, {"from": w1})
    assert tx.events["TaskFinalized"]["reward"] == 10 * E
    assert job_market.credits(w1) == 10 * E
    # the unused audit fee is the job's surplus until refunded
    assert job_market.jobOf(job_id).dict()["surplus"] == 2 * E
    tx = job_market.refundSurplus(job_id, {"from": w1})
    assert tx.events["Refunded"]["amount"] == 2 * E and job_market.credits(submitter) == 2 * E
    with brownie.reverts("JobNotFound: 77"):
        job_market.refundSurplus(77, {"from": w1})
    assert stake_manager.stakeOf(w1)[1] == 0
    assert registry.identityOf(w1).dict()["history"]["tasksDone"] == 1
    assert registry.identityOf(w1).dict()["history"]["computeContributed"] == 100
    with brownie.reverts(f"TaskNotInChallengeWindow: {tid}"):
        job_market.finalize(tid, {"from": w1})  # never paid twice
    before = token.balanceOf(w1)
    tx = job_market.withdraw({"from": w1})
    assert tx.events["Withdrawn"]["amount"] == 10 * E and token.balanceOf(w1) == before + 10 * E
    with brownie.reverts(f"MarketNothingToWithdraw: {w1.address.lower()}"):
        job_market.withdraw({"from": w1})


def test_commitment_isBoundToItsTask_oneCommitmentCannotBeRevealedOnTwo(job_market, submitter, w1, market_isolation):
    """Issue 27, finding 7: a worker holding two tasks commits, on the second, the very
    commitment it made for the first (work done once, claimed twice): its reveal there is
    refused, and the first task reveals as usual."""
    job_id, _ = new_job(job_market, submitter, shards=2, rounds=1)
    first = draw_task(job_market, job_id, {"from": w1}).return_value
    second = draw_task(job_market, job_id, {"from": w1}).return_value
    for tid in (first, second):
        job_market.acceptTask(tid, {"from": w1})
        job_market.commitResult(tid, commitment(first, ROOT, CID, SALT, w1), {"from": w1})
    with brownie.reverts(f"TaskCommitmentMismatch: {second}"):
        job_market.revealResult(second, ROOT, CID, SALT, {"from": w1})
    assert job_market.taskOf(second)[1] == TS.COMMITTED
    job_market.revealResult(first, ROOT, CID, SALT, {"from": w1})
    assert job_market.taskOf(first)[1] == TS.CHALLENGE


def test_wholeJob_roundsAdvanceFromAggregatedCheckpoint_andComplete(job_market, token, submitter, w1, market_isolation):
    job_id, _ = new_job(job_market, submitter, shards=2, rounds=2)
    run_task(job_market, job_id, w1)
    # the aggregation task waits for every shard task of the round
    t1 = draw_task(job_market, job_id, {"from": w1}).return_value
    with brownie.reverts(f"JobNothingToDraw: {job_id}"):
        draw_task(job_market, job_id, {"from": w1})
    job_market.acceptTask(t1, {"from": w1})
    job_market.commitResult(t1, commitment(t1, ROOT, CID, SALT, w1), {"from": w1})
    job_market.revealResult(t1, ROOT, CID, SALT, {"from": w1})
    chain.mine(21)
    job_market.finalize(t1, {"from": w1})
    agg_root = "0x" + "cc" * 32
    agg = draw_task(job_market, job_id, {"from": w1}).return_value
    assert agg == job_market.taskId(job_id, 0, 2)
    job_market.acceptTask(agg, {"from": w1})
    job_market.commitResult(agg, commitment(agg, agg_root, "bafyround1", SALT, w1), {"from": w1})
    job_market.revealResult(agg, agg_root, "bafyround1", SALT, {"from": w1})
    chain.mine(21)
    tx = job_market.finalize(agg, {"from": w1})
    ev = tx.events["RoundAdvanced"]
    assert (ev["round"], ev["checkpointCid"], ev["checkpointHash"]) == (1, "bafyround1", agg_root)
    job = job_market.jobOf(job_id).dict()
    assert (job["currentRound"], job["checkpointCid"], job["checkpointHash"]) == (1, "bafyround1", agg_root)
    for _ in range(2):
        run_task(job_market, job_id, w1)
    t = run_task(job_market, job_id, w1)
    assert t == job_market.taskId(job_id, 1, 2)
    job = job_market.jobOf(job_id).dict()
    assert job["status"] == 2 and job["escrow"] == 0
    assert job_market.totalEscrow() == 0
    assert token.balanceOf(job_market) == job_market.totalCredits() == 6 * 12 * E
    with brownie.reverts(f"JobNotActive: {job_id}, 2"):
        draw_task(job_market, job_id, {"from": w1})


def test_tasksOf_and_jobsOf_paginate(job_market, submitter, w1, market_isolation):
    job_id, _ = new_job(job_market, submitter, shards=3)
    job2, _ = new_job(job_market, submitter)
    assert list(job_market.jobsOf(submitter, 0, 10)) == [job_id, job2]
    assert list(job_market.jobsOf(submitter, 1, 1)) == [job2]
    assert list(job_market.jobsOf(submitter, 5, 1)) == []
    assert list(job_market.tasksOf(job_id, 0, 10)) == []
    draw_task(job_market, job_id, {"from": w1})
    draw_task(job_market, job_id, {"from": w1})
    assert list(job_market.tasksOf(job_id, 0, 10)) == [job_market.taskId(job_id, 0, 0), job_market.taskId(job_id, 0, 1)]
    assert list(job_market.tasksOf(job_id, 1, 1)) == [job_market.taskId(job_id, 0, 1)]


def test_finalizeMany_finalizesReadyTasks_andSkipsOthers(job_market, submitter, w1, w2, pool, market_isolation):
    pool.joinPool({"from": w2})
    job_id, _ = new_job(job_market, submitter, shards=3)
    ids = [run_task(job_market, job_id, w1, finalize=False) for _ in range(2)]
    chain.mine(21)
    tx = job_market.finalizeMany(ids + [12345], {"from": w1})
    assert tx.return_value == 2 and len(tx.events["TaskFinalized"]) == 2
    with brownie.reverts(f"MarketBatchTooLarge: 33, 32"):
        job_market.finalizeMany([1] * 33, {"from": w1})


def test_finalizeMany_settlesEachMemberOnce_asSingleFinalizesWould(job_market, registry, stake_manager, pool, submitter, w1, w2, market_isolation):
    """Two tasks of w1 and two of w2 (both at their limit of 2) in one batch: every task is
    paid, and each worker gets one history record (tasksDone and reputation as two single
    records would leave them) and one collateral unlock (its pool slots were freed at its
    reveals)."""
    pool.joinPool({"from": w2})
    job_id, _ = new_job(job_market, submitter, shards=8, acceptWindow=50, computeWindow=50, challengeWindow=50)
    rep = {w.address: registry.reputationOf(w) for w in (w1, w2)}
    ids = [draw_task(job_market, job_id, {"from": submitter}).return_value for _ in range(4)]
    owner = {tid: job_market.taskOf(tid)[0] for tid in ids}
    assert sorted(owner.values()) == sorted([w1.address, w1.address, w2.address, w2.address])
    for tid in ids:
        worker = accounts.at(owner[tid], force=True)
        job_market.acceptTask(tid, {"from": worker})
        job_market.commitResult(tid, commitment(tid, ROOT, CID, SALT, worker), {"from": worker})
        job_market.revealResult(tid, ROOT, CID, SALT, {"from": worker})
    assert pool.memberOf(w1)[1] == pool.memberOf(w2)[1] == 0  # slots freed at the reveals
    assert stake_manager.stakeOf(w1)[1] == stake_manager.stakeOf(w2)[1] == 2 * 20 * E
    chain.mine(51)
    tx = job_market.finalizeMany(ids, {"from": submitter})
    assert tx.return_value == 4 and len(tx.events["TaskFinalized"]) == 4
    assert "MemberReleased" not in tx.events
    assert [e["amount"] for e in tx.events["CollateralUnlocked"]] == [2 * 20 * E] * 2
    assert len(tx.events["TaskCompletionRecorded"]) == 2
    for w in (w1.address, w2.address):
        model = rep[w]
        for _ in range(2):
            model += (10_000 - model) // 20
        assert registry.reputationOf(w) == model and registry.identityOf(w)[8][0] == 2
        assert pool.memberOf(w)[1] == 0 and stake_manager.stakeOf(w)[1] == 0
        assert job_market.credits(w) == 2 * 10 * E
    assert all(job_market.taskOf(t)[1] == TS.FINALIZED for t in ids)


def test_drawTasks_drawsUpToCount_keepsWhatItDrew_andRevertsWhenNone(job_market, submitter, w1, market_isolation):
    one, _ = new_job(job_market, submitter, shards=1)
    with brownie.reverts("MarketBatchTooLarge: 33, 32"):
        draw_tasks(job_market, one, 33, {"from": submitter})
    assert draw_tasks(job_market, one, 0, {"from": submitter}).return_value == 0
    assert draw_tasks(job_market, one, 3, {"from": submitter}).return_value == 1  # its one shard task
    with brownie.reverts(f"JobNothingToDraw: {one}"):  # the aggregation task waits for the shard task
        draw_tasks(job_market, one, 1, {"from": submitter})
    # w1 (the only worker in the pool) takes 2 tasks at once and holds one: the second draw
    # of the batch finds nobody, and the batch keeps the one it drew
    job_id, _ = new_job(job_market, submitter, shards=5)
    tx = draw_tasks(job_market, job_id, 5, {"from": submitter})
    assert tx.return_value == 1 and tx.events["TaskDrawn"]["worker"] == w1 and tx.events["TaskDrawn"]["index"] == 0
    assert job_market.jobOf(job_id).dict()["nextIndex"] == 1
    with brownie.reverts(f"JobNoEligibleWorker: {job_id}, {job_market.taskId(job_id, 0, 1)}"):
        draw_tasks(job_market, job_id, 3, {"from": submitter})
    job_market.cancelJob(job_id, {"from": submitter})
    with brownie.reverts(f"JobNotActive: {job_id}, 3"):
        draw_tasks(job_market, job_id, 1, {"from": submitter})


def test_offers_areDrawnFromATicketAskedBefore(job_market, pool, submitter, w1, market_isolation):
    """Issue 27, finding 7a: a job's first offers are drawn from a ticket its creation asks
    for; the ticket's hash settles them from its next block; the ticket stays for the tasks
    left (a caller drawing fewer cannot get them a new hash) until nothing is left."""
    job_id, tx = new_job(job_market, submitter, shards=2, rounds=1)
    ticket = ticket_for(tx.block_number)
    assert tx.events["OffersRequested"]["jobId"] == job_id and tx.events["OffersRequested"]["ticket"] == ticket
    assert tx.events["OffersHeld"]["ticket"] == ticket and job_market.offerTicketOf(job_id) == ticket
    while chain.height < ticket:
        with brownie.reverts(f"JobOffersNotReady: {job_id}, {ticket}"):
            job_market.drawTask(job_id, {"from": submitter})
        chain.mine()
    tx = job_market.drawTasks(job_id, 0, {"from": submitter})  # drawing none keeps the ticket
    assert tx.return_value == 0 and "OffersRequested" not in tx.events and job_market.offerTicketOf(job_id) == ticket
    tx = job_market.drawTask(job_id, {"from": submitter})
    assert tx.events["TaskDrawn"]["index"] == 0 and "OffersRequested" not in tx.events
    assert job_market.offerTicketOf(job_id) == ticket  # the other task is drawn from it too
    tx = job_market.drawTask(job_id, {"from": submitter})
    assert tx.events["TaskDrawn"]["index"] == 1 and job_market.offerTicketOf(job_id) == 0  # nothing left
    with brownie.reverts(f"JobNothingToDraw: {job_id}"):
        job_market.drawTask(job_id, {"from": submitter})


def test_offers_aLapsedTicketIsAskedAgain_andNewTasksGetATicketOfTheirOwn(job_market, submitter, w1, market_isolation):
    """A ticket nobody drew from inside its epoch is asked for again by the next draw (which
    draws nothing); tasks that become drawable later (the aggregation task once the round's
    shards are revealed, the next round's) get a ticket asked for when they do."""
    job_id, _ = new_job(job_market, submitter, shards=1, rounds=2)
    first = job_market.offerTicketOf(job_id)
    chain.mine(last_block(first) + 1 - chain.height)  # nobody drew inside the ticket's epoch
    tx = job_market.drawTask(job_id, {"from": submitter})
    assert tx.return_value == 0 and tx.events["OffersRequested"]["ticket"] == ticket_for(tx.block_number) > first
    mine_past(job_market.offerTicketOf(job_id))
    assert job_market.drawTask(job_id, {"from": submitter}).events["TaskDrawn"]["worker"] == w1
    assert job_market.offerTicketOf(job_id) == 0  # nothing left to draw: the ticket is done
    shard = job_market.taskId(job_id, 0, 0)
    job_market.acceptTask(shard, {"from": w1})
    job_market.commitResult(shard, commitment(shard, ROOT, CID, SALT, w1), {"from": w1})
    tx = job_market.revealResult(shard, ROOT, CID, SALT, {"from": w1})  # unlocks the aggregation task
    assert tx.events["OffersRequested"]["ticket"] == ticket_for(tx.block_number) == job_market.offerTicketOf(job_id)
    agg = run_task(job_market, job_id, w1, finalize=False)
    assert agg == job_market.taskId(job_id, 0, 1)
    chain.mine(21)
    tx = job_market.finalize(shard, {"from": w1})  # the last shard finalized asks for nothing
    assert "OffersRequested" not in tx.events
    tx = job_market.finalize(agg, {"from": w1})  # the next round's tasks
    assert "RoundAdvanced" in tx.events and tx.events["OffersRequested"]["ticket"] == ticket_for(tx.block_number)


def test_offers_aTaskSentBackAfterItsTicket_waitsForTheNext(job_market, pool, submitter, w1, w2, market_isolation):
    """A task sent back once its ticket's hash is public is not drawn from that hash (its
    worker, knowing it, could otherwise time out to send it where it wants), and does not get
    the job's other tasks a new hash either: they are drawn from the ticket, then the draw
    asks for the next ticket, and the task is drawn from that one."""
    pool.joinPool({"from": w2})
    job_id, _ = new_job(job_market, submitter, shards=2, rounds=1)
    first = draw_task(job_market, job_id, {"from": submitter}).return_value
    failed = job_market.taskOf(first)[0]
    ticket = job_market.offerTicketOf(job_id)
    chain.mine(job_market.jobOf(job_id).dict()["acceptWindow"] + 1)
    tx = job_market.timeoutTask(first, {"from": submitter})  # its worker never accepted
    assert "TaskRequeued" in tx.events and tx.block_number > ticket and not chain.height > last_block(ticket)
    assert job_market.taskOf(first)[1] == TS.PENDING and job_market.taskOf(first)[2] == tx.block_number
    tx = job_market.drawTasks(job_id, 2, {"from": submitter})
    assert tx.return_value == 1 and tx.events["TaskDrawn"]["index"] == 1  # from the ticket
    nxt = tx.events["OffersRequested"]["ticket"]
    assert nxt > ticket and job_market.offerTicketOf(job_id) == nxt
    mine_past(nxt)
    drawn = job_market.drawTask(job_id, {"from": submitter}).events["TaskDrawn"]
    assert drawn["taskId"] == first and drawn["worker"] != failed
