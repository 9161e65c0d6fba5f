"""Issue 12, findings 4, 5, 7, 8, 9, 10 and 11: cheating must never pay.

4. Silence after a commitment costs what losing would (worker, auditor).
5. Every state has an exit: a game with no eligible referee ends without a verdict.
7. An auditor that confirmed a wrong result is slashed when a challenge proves it wrong;
   referee penalties are burned (no party is paid from its own referees' penalties); a game
   no committee could judge rewards nobody.
8. Self-dealing buys no reputation and no draw weight.
9. Parameters that would break the guarantees are refused, each with its own error.
10. Tokens sent straight to a contract change nothing owed: accounting is internal.
11. A live token has a real initial distribution and can never mint.
"""

import brownie
import pytest
from brownie import JobMarket, TrainToken, accounts, chain

from tests.contracts.dispute_setup import *  # noqa: F401,F403
from truetrain.dispute import Vote

HONEST = trace()
CHEAT = diverged(HONEST, 3)
W, C = int(Vote.WORKER), int(Vote.CHALLENGER)
ZERO = "0x" + "00" * 20


@pytest.fixture(autouse=True)
def _crew(market_isolation, referees):
    """Crew and referees set up once per module."""


def _audited(job_market, submitter, w1, **job):
    job_id, _ = new_job(job_market, submitter, auditRateBps=10_000, **job)
    tid = draw_task(job_market, job_id, {"from": w1}).return_value
    job_market.acceptTask(tid, {"from": w1})
    job_market.commitResult(tid, commitment(tid, ROOT, CID, SALT, w1), {"from": w1})
    return job_id, tid, settle_audit(job_market, tid)


def test_silentWorker_afterAuditDrawn_losesItsWholeCollateral(job_market, stake_manager, token, submitter, w1):
    job_id, tid, auditor = _audited(job_market, submitter, w1)
    job_market.commitAudit(tid, audit_commitment(tid, ROOT, SALT, auditor), {"from": auditor})
    burned = token.totalBurned()
    chain.mine(job_market.jobOf(job_id).dict()["revealWindow"] + 1)
    tx = job_market.timeoutTask(tid, {"from": submitter})
    assert tx.events["TaskTimedOut"]["account"] == w1 and tx.events["TaskTimedOut"]["penalty"] == 20 * E
    # What losing its dispute would have cost: the collateral, 50 % to the winner (the
    # auditor that committed), the referee share and the rest burned.
    assert stake_manager.credits(auditor) == 10 * E
    assert token.totalBurned() - burned == 10 * E
    assert stake_manager.stakeOf(w1)[1] == 0 and stake_manager.stakeOf(auditor)[1] == 0
    # Back on the pending stack (no other worker is in the pool), never to be redrawn for w1.
    assert job_market.taskOf(tid)[1] == TS.PENDING and job_market.jobOf(job_id).dict()["pendingCount"] == 1


def test_silentWorker_beforeAnyAudit_alsoLosesItsWholeCollateral(job_market, stake_manager, submitter, w1):
    job_id, _ = new_job(job_market, submitter, auditRateBps=0)
    tid = draw_task(job_market, job_id, {"from": w1}).return_value
    job_market.acceptTask(tid, {"from": w1})
    job_market.commitResult(tid, commitment(tid, ROOT, CID, SALT, w1), {"from": w1})
    chain.mine(11)
    tx = job_market.timeoutTask(tid, {"from": submitter})
    assert tx.events["TaskTimedOut"]["penalty"] == 20 * E
    assert stake_manager.credits(submitter) == 10 * E  # no auditor: the submitter is the winner


def test_silentAuditor_afterCommitting_losesItsWholeCollateral(job_market, stake_manager, submitter, w1):
    job_id, tid, auditor = _audited(job_market, submitter, w1)
    job_market.commitAudit(tid, audit_commitment(tid, ROOT, SALT, auditor), {"from": auditor})
    job_market.revealResult(tid, ROOT, CID, SALT, {"from": w1})
    chain.mine(job_market.jobOf(job_id).dict()["revealWindow"] + 1)
    staked = stake_manager.stakeOf(auditor)[0]
    tx = job_market.timeoutTask(tid, {"from": submitter})
    assert tx.events["TaskTimedOut"]["account"] == auditor
    assert tx.events["TaskTimedOut"]["penalty"] == AUDITOR_COLLATERAL
    assert staked - stake_manager.stakeOf(auditor)[0] == AUDITOR_COLLATERAL
    assert job_market.taskOf(tid)[1] == TS.CHALLENGE and job_market.taskOf(tid)[4] == ZERO


def test_auditorMissingItsCommit_isRedrawnFromTheFuture(job_market, stake_manager, submitter, w1):
    job_id, tid, auditor = _audited(job_market, submitter, w1)
    chain.mine(job_market.jobOf(job_id).dict()["computeWindow"] + 1)  # the compute window (the auditor's commit deadline) passes
    tx = job_market.timeoutTask(tid, {"from": submitter})
    assert tx.events["TaskTimedOut"]["penalty"] == AUDITOR_PENALTY
    ticket = tx.events["AuditRequested"]["ticket"]
    assert ticket == ticket_for(tx.block_number)
    with brownie.reverts(f"TaskAuditPending: {tid}"):
        mine_past(ticket)
        job_market.revealResult(tid, ROOT, CID, SALT, {"from": w1})
    assert settle_audit(job_market, tid) is not None  # another auditor, from the new ticket


def test_noEligibleReferee_gameEndsWithoutVerdict_nobodyPaidOrSlashed(game, job_market, stake_manager, pool,
                                                                      submitter, w1, challenger, referees, v1):
    _, tid = revealed_task(job_market, submitter, w1, CHEAT)
    gid, _ = challenge_task(game, tid, challenger, HONEST)
    play(game, gid, CHEAT, HONEST)
    for r in referees + [v1]:
        pool.leavePool({"from": r})
    staked = {a: stake_manager.stakeOf(a)[0] for a in (w1, challenger)}
    for attempt in range(game.MAX_REDRAWS() + 1):
        tx = draw_referees(game, gid, submitter)
        assert tx.events["CommitteeFailed"]["committee"] == attempt + 1
    assert view(game, gid).status == GS.VOIDED
    assert "DisputeVoided" in tx.events and tx.events["DisputeVoided"]["taskId"] == tid
    assert {a: stake_manager.stakeOf(a)[0] for a in (w1, challenger)} == staked
    assert stake_manager.stakeOf(w1)[1] == 0 and stake_manager.stakeOf(challenger)[1] == 0
    assert stake_manager.credits(w1) == 0 and stake_manager.credits(challenger) == 0
    assert job_market.taskOf(tid)[1] == TS.PENDING and job_market.credits(w1) == 0


def test_refereeDrawLapsed_countsAsAFailedCommittee(game, job_market, submitter, w1, challenger):
    _, tid = revealed_task(job_market, submitter, w1, CHEAT)
    gid, _ = challenge_task(game, tid, challenger, HONEST)
    play(game, gid, CHEAT, HONEST)
    ticket = view(game, gid).deadline
    with brownie.reverts(f"DisputeDeadlineNotPassed: {gid}, {last_block(ticket)}"):
        game.timeout(gid, {"from": submitter})
    chain.mine(ticket + 257 - chain.height)
    tx = game.timeout(gid, {"from": submitter})
    assert tx.events["CommitteeFailed"]["committee"] == 1
    assert tx.events["RefereesRequested"]["ticket"] == ticket_for(tx.block_number)


def test_colludingAuditor_matchingAWrongRoot_losesItsCollateralToTheChallenger(game, job_market, stake_manager,
                                                                              registry, submitter, w1, challenger):
    _, tid, auditor = colluded_task(job_market, submitter, w1, CHEAT, challengeWindow=60)
    assert job_market.taskOf(tid)[1] == TS.CHALLENGE
    gid, _ = challenge_task(game, tid, challenger, HONEST)
    play(game, gid, CHEAT, HONEST)
    draw_referees(game, gid, submitter)
    staked = stake_manager.stakeOf(auditor)[0]
    seated = vote_all(game, gid, {r: C for r in (s[0] for s in game.committeeOf(gid))})
    tx = game.resolve(gid, {"from": submitter})
    assert tx.events["AuditorSlashed"]["auditor"] == auditor
    assert tx.events["AuditorSlashed"]["slashed"] == AUDITOR_COLLATERAL
    assert staked - stake_manager.stakeOf(auditor)[0] == AUDITOR_COLLATERAL
    assert stake_manager.stakeOf(auditor)[1] == 0
    # The challenger gets half of both: 10 (worker) + 25 (auditor).
    assert stake_manager.credits(challenger) == 10 * E + AUDITOR_COLLATERAL // 2
    assert registry.identityOf(auditor)[8][4] == 1  # disputesLost
    assert len(seated) == 3


def test_refereePenalties_areBurned_notPaidToAParty(game, job_market, stake_manager, token, submitter, w1, challenger):
    _, tid = revealed_task(job_market, submitter, w1, CHEAT)
    gid, _ = challenge_task(game, tid, challenger, HONEST)
    play(game, gid, CHEAT, HONEST)
    draw_referees(game, gid, submitter)
    seated = [s[0] for s in game.committeeOf(gid)]
    # every referee silent: the whole committee failed
    chain.mine(COMMIT_WINDOW + 1)
    game.timeout(gid, {"from": submitter})
    chain.mine(REVEAL_WINDOW + 1)
    burned = token.totalBurned()
    tx = game.resolve(gid, {"from": submitter})
    assert len(tx.events["RefereePenalized"]) == len(seated)
    assert token.totalBurned() - burned == REFEREE_PENALTY * len(seated)
    assert stake_manager.credits(w1) == 0 and stake_manager.credits(challenger) == 0


def test_selfDealing_leavesReputationAndDrawWeightUnchanged(job_market, registry, pool, token, stake_manager,
                                                           deployer, w1):
    registry.setRoles(ROLE_WORKER | ROLE_SUBMITTER, {"from": w1})
    token.mint(w1, 1_000 * E, {"from": deployer})
    token.approve(job_market, 2**256 - 1, {"from": w1})
    pool.refresh(w1, {"from": w1})
    reputation, weight = registry.reputationOf(w1), pool.weightOf(w1, False)
    job_id, _ = new_job(job_market, w1, shards=1, rounds=1)
    for _ in range(2):  # its shard task and the round's aggregation, both drawn to itself
        run_task(job_market, job_id, w1)
    assert job_market.jobOf(job_id)[1] == 2  # Completed, paid by itself to itself
    assert registry.reputationOf(w1) == reputation
    assert registry.identityOf(w1)[8][0] == 0  # tasksDone
    assert pool.weightOf(w1, False) == weight


def test_parameters_thatBreakTheGuarantees_areRefused(job_market, token, submitter):
    before = token.balanceOf(submitter)
    with brownie.reverts("JobWindowTooShort: 5"):
        new_job(job_market, submitter, acceptWindow=1)  # a 1-block window: nobody can answer in time
    with brownie.reverts("JobWindowTooShort: 5"):
        new_job(job_market, submitter, revealWindow=4)
    with brownie.reverts("JobRevealWindowTooLong: 201, 200"):
        new_job(job_market, submitter, revealWindow=201)  # the audit ticket's hash would expire first
    with brownie.reverts("JobChallengeWindowTooShort: 19, 20"):
        new_job(job_market, submitter, challengeWindow=19)  # no third party could re-run it in time
    with brownie.reverts(f"JobCollateralTooLow: 0, {20 * E}"):  # below MIN_COLLATERAL (20 TRAIN)
        new_job(job_market, submitter, workerCollateral=0)
    with brownie.reverts(f"JobCollateralTooLow: {29 * E}, {30 * E}"):  # below the reward
        new_job(job_market, submitter, rewardPerTask=30 * E, workerCollateral=29 * E)
    with brownie.reverts("MarketCidTooLong: 129, 128"):
        new_job(job_market, submitter, manifestCid="b" * 129)
    with brownie.reverts("MarketCidTooLong: 24000, 128"):
        new_job(job_market, submitter, initialCheckpointCid="b" * 24_000)
    assert token.balanceOf(submitter) == before and job_market.jobCount() == 0


def test_revealedCidPastTheCap_isRefused(job_market, submitter, w1):
    job_id, _ = new_job(job_market, submitter)
    tid = draw_task(job_market, job_id, {"from": w1}).return_value
    job_market.acceptTask(tid, {"from": w1})
    long_cid = "b" * 24_000
    job_market.commitResult(tid, commitment(tid, ROOT, long_cid, SALT, w1), {"from": w1})
    with brownie.reverts("MarketCidTooLong: 24000, 128"):
        job_market.revealResult(tid, ROOT, long_cid, SALT, {"from": w1})


def test_marketConfig_freeTimeouts_refused(token, registry, stake_manager, pool, deployer):
    with brownie.reverts("MarketPenaltyTooLow: 0, 1000, 100"):  # declining an offer would be free
        JobMarket.deploy(token, registry, stake_manager, pool, (TIMEOUT_PENALTY_BPS, 0, AUDITOR_COLLATERAL,
                                                                AUDITOR_PENALTY), {"from": deployer})
    with brownie.reverts("MarketPenaltyTooLow: 100, 50, 100"):  # a missed commit cheaper than a missed accept
        JobMarket.deploy(token, registry, stake_manager, pool, (50, 100, AUDITOR_COLLATERAL, AUDITOR_PENALTY),
                         {"from": deployer})
    with brownie.reverts("MarketPenaltyTooLow: 0, 0, 1"):  # an auditor's missed commit would be free
        JobMarket.deploy(token, registry, stake_manager, pool, (TIMEOUT_PENALTY_BPS, 100, AUDITOR_COLLATERAL, 0),
                         {"from": deployer})


def test_gameConfig_phasesTooShortOrFreeSilence_refused(DisputeGame, job_market, pool, stake_manager, registry, deployer):
    for config in [(4, 10, 10, 3, REFEREE_STAKE, REFEREE_PENALTY), (10, 10, 4, 3, REFEREE_STAKE, REFEREE_PENALTY),
                   (10, 10, 10, 3, REFEREE_STAKE, 0)]:
        with brownie.reverts("DisputeInvalidConfig: "):
            DisputeGame.deploy(job_market, pool, stake_manager, registry, config, NO_STEP_GAME, {"from": deployer})


def test_tokensSentStraightToTheContracts_changeNothingOwed(job_market, stake_manager, token, deployer, submitter, w1):
    token.mint(deployer, 100 * E, {"from": deployer})
    token.transfer(job_market, 7 * E, {"from": deployer})
    token.transfer(stake_manager, 5 * E, {"from": deployer})
    job_id, _ = new_job(job_market, submitter, shards=1, rounds=1)
    run_task(job_market, job_id, w1)
    run_task(job_market, job_id, w1)
    for who in (w1, submitter):
        job_market.withdraw({"from": who})
    # Tracked totals stay what is owed; the donations are the only surplus.
    assert job_market.totalEscrow() == 0 and job_market.totalCredits() == 0
    assert token.balanceOf(job_market) == 7 * E
    assert token.balanceOf(stake_manager) == stake_manager.totalStaked() + stake_manager.totalCredits() + 5 * E


def test_liveToken_hasItsInitialDistribution_andNeverMints(deployer, alice, bob):
    live = TrainToken.deploy(False, [alice, bob], [60 * E, 40 * E], {"from": deployer})
    assert live.totalSupply() == live.totalMinted() == 100 * E
    assert live.balanceOf(alice) == 60 * E and live.balanceOf(bob) == 40 * E
    with brownie.reverts("TokenNotDevnet: 1337" if chain.id == 1337 else f"TokenNotDevnet: {chain.id}"):
        live.mint(deployer, 1, {"from": deployer})
    with brownie.reverts("TokenInvalidDistribution: 0, 0"):
        TrainToken.deploy(False, [], [], {"from": deployer})
    with brownie.reverts("TokenInvalidDistribution: 1, 2"):
        TrainToken.deploy(True, [alice], [1, 2], {"from": deployer})
