"""Issue 27, findings 5, 6 and the job-terms part of 7: no reputation, offer or referee seat
can be bought cheaply.

5. Reputation by self-challenge: a sybil challenges its own worker's result with a root of the
   same result hash; the worker's first move wins. A game on a task whose worker or challenger
   is the job's submitter records no win; any other costs the losing sybil its bond, at least
   MIN_COLLATERAL, half of it burned.
6. Referees griefed with dust: a task's collateral (the challenger's bond) is at least
   MIN_COLLATERAL, so a self-dealt game that seats referees pays them their share of it and
   burns the rest the attacker does not get back.
7. A job that pays nothing, or farms accept penalties with a collateral out of all proportion
   to its reward, is refused; a penalty is rounded up, so ignoring an offer is never free.

Each attack is played as the attacker would (its accounts stand in for sybils: nothing ties
them together on chain); see PROPERTIES.md C13-C16 for the arithmetic.
"""

import brownie
import pytest
from brownie import accounts, chain, web3

from tests.contracts.dispute_setup import *  # noqa: F401,F403
from truetrain.dispute import Vote
from truetrain.market import jobs as terms

#: JobMarket.MIN_COLLATERAL and MAX_COLLATERAL_PER_REWARD, as the CLI checks them (and the
#: contract's, below).
MIN = terms.MIN_COLLATERAL
RATIO = terms.MAX_COLLATERAL_PER_REWARD
#: StakeManager's default slash split (winner / referees, bps); the rest is burned.
WINNER_BPS, REFEREE_BPS = 5_000, 2_000
HONEST = trace()
CHEAT = diverged(HONEST, 3)
#: A sybil's trace: another root, but the same hash at the result as HONEST.
SAME_END = HONEST[:2] + [bytes(web3.keccak(text="sybil"))] + HONEST[3:]
W, C = int(Vote.WORKER), int(Vote.CHALLENGER)


@pytest.fixture(autouse=True)
def _crew(market_isolation, referees):
    """Crew and referees set up once per module."""


def _history(registry, account) -> dict:
    won, lost, slashed = registry.identityOf(account)[8][3:6]
    return {"disputesWon": won, "disputesLost": lost, "amountSlashed": slashed}


def _self_challenged(game, job_market, worker, submitter, sybil):
    """The attack of finding 5 once: `submitter`'s cheapest job, its task run by `worker`,
    challenged by `sybil` with a root ending in the worker's own result hash; the worker's
    first move wins at once. Returns the settling transaction and the task."""
    job_id, _ = new_job(job_market, submitter, shards=1, rounds=1, rewardPerTask=MIN // RATIO, auditFee=0,
                        workerCollateral=MIN, challengeWindow=50)
    tid = run_task(job_market, job_id, worker, root=root_of(HONEST), finalize=False)
    gid, _ = challenge_task(game, tid, sybil, SAME_END)
    return game.move(gid, claims(game, gid, HONEST, Party.WORKER), {"from": worker}), tid


def test_selfChallenge_onItsOwnJob_buysNoReputationNorDrawWeight(game, job_market, registry, pool, token,
                                                                  stake_manager, deployer, w1, challenger):
    registry.setRoles(ROLE_WORKER | ROLE_SUBMITTER, {"from": w1})
    token.mint(w1, 1_000 * E, {"from": deployer})
    token.approve(job_market, 2**256 - 1, {"from": w1})
    # The finding's terms: reward 0 and a 1-wei collateral (so a 1-wei bond) are refused.
    with brownie.reverts("JobRewardZero: "):
        new_job(job_market, w1, rewardPerTask=0, auditFee=0, workerCollateral=1)
    with brownie.reverts(f"JobCollateralTooLow: 1, {MIN}"):
        new_job(job_market, w1, rewardPerTask=1, auditFee=0, workerCollateral=1)
    pool.refresh(w1, {"from": w1})
    reputation, weight = registry.reputationOf(w1), pool.weightOf(w1, False)
    bond, burned = stake_manager.stakeOf(challenger)[0], token.totalBurned()
    for _ in range(3):
        tx, tid = _self_challenged(game, job_market, w1, w1, challenger)
        assert tx.events["DisputeSettled"]["workerWon"]
        chain.mine(51)
        job_market.finalize(tid, {"from": w1})  # paid by itself to itself: no completion either
    # The worker is the job's submitter: its wins are self-dealt and record nothing.
    assert registry.reputationOf(w1) == reputation
    assert _history(registry, w1)["disputesWon"] == 0
    pool.refresh(w1, {"from": w1})
    assert pool.weightOf(w1, False) == weight
    # And each try cost the sybil its bond, half of it burned (no referee sat).
    assert stake_manager.stakeOf(challenger)[0] == bond - 3 * MIN
    assert stake_manager.credits(w1) == 3 * MIN * WINNER_BPS // 10_000
    assert token.totalBurned() - burned == 3 * (MIN - MIN * WINNER_BPS // 10_000)


def test_selfChallenge_bySybilWorker_costsHalfTheMinimumBondPerReputationStep(game, job_market, registry, token,
                                                                              stake_manager, submitter, w1,
                                                                              challenger):
    # Worker, submitter and challenger are three unlinked accounts: the market cannot see the
    # self-dealing, so the win counts; what it cost is what the contracts guarantee.
    with brownie.reverts(f"JobCollateralTooLow: 1, {MIN}"):
        new_job(job_market, submitter, rewardPerTask=1, auditFee=0, workerCollateral=1)
    reputation, burned = registry.reputationOf(w1), token.totalBurned()
    _self_challenged(game, job_market, w1, submitter, challenger)
    assert registry.reputationOf(w1) == reputation + (10_000 - reputation) // 10
    assert stake_manager.credits(w1) == MIN * WINNER_BPS // 10_000
    assert token.totalBurned() - burned == MIN - MIN * WINNER_BPS // 10_000  # 10 TRAIN a step


def test_selfChallenge_byTheSubmitter_ofItsSybilWorker_recordsNoWinForEither(game, job_market, registry, submitter,
                                                                            w1, token, stake_manager, deployer):
    # The submitter challenges (and loses to) its own sybil worker: a self-dealt game; the
    # worker's win is not recorded, the submitter's loss is.
    stake(token, stake_manager, submitter, deployer=deployer)
    _self_challenged(game, job_market, w1, submitter, submitter)
    assert registry.reputationOf(w1) == 5_000 and _history(registry, w1)["disputesWon"] == 0
    assert _history(registry, submitter)["disputesLost"] == 1
    assert _history(registry, submitter)["amountSlashed"] == MIN


def test_dustGame_isRefused_andTheCheapestGamePaysItsRefereesAndBurns(game, job_market, stake_manager, token, submitter,
                                                                     w1, challenger):
    with brownie.reverts(f"JobCollateralTooLow: 1, {MIN}"):
        new_job(job_market, submitter, rewardPerTask=1, auditFee=0, workerCollateral=1)
    # The cheapest game the attacker can make its sybils play down to the referees.
    _, tid = revealed_task(job_market, submitter, w1, CHEAT, rewardPerTask=MIN // RATIO, auditFee=0,
                           workerCollateral=MIN)
    gid, _ = challenge_task(game, tid, challenger, HONEST)
    play(game, gid, CHEAT, HONEST)
    draw_referees(game, gid, submitter)
    seated = [s[0] for s in game.committeeOf(gid)]
    assert len(seated) == COMMITTEE
    vote_all(game, gid, {r: C for r in seated})
    burned = token.totalBurned()
    game.resolve(gid, {"from": submitter})
    each = MIN * REFEREE_BPS // 10_000 // COMMITTEE
    for r in seated:
        assert stake_manager.credits(r) == each and stake_manager.stakeOf(r)[1] == 0
    to_sybil = MIN * WINNER_BPS // 10_000
    assert stake_manager.credits(challenger) == to_sybil
    # The attacker (worker + challenger) is MIN - to_sybil = 10 TRAIN poorer: 4 to referees, 6 burned.
    assert token.totalBurned() - burned == MIN - to_sybil - COMMITTEE * each


def test_jobThatPaysNothing_orOutweighsItsReward_isRefused(job_market, token, submitter):
    before = token.balanceOf(submitter)
    with brownie.reverts("JobRewardZero: "):
        new_job(job_market, submitter, rewardPerTask=0)
    with brownie.reverts(f"JobCollateralTooLow: {MIN - 1}, {MIN}"):
        new_job(job_market, submitter, rewardPerTask=E, workerCollateral=MIN - 1)
    # 100 × the reward at most: at the least accept penalty (1 %) an ignored offer costs the
    # worker at most one reward, so a submitter cannot farm penalties from a job that pays dust.
    with brownie.reverts(f"JobCollateralTooHigh: {RATIO * E + 1}, {RATIO * E}"):
        new_job(job_market, submitter, rewardPerTask=E, workerCollateral=RATIO * E + 1)
    assert token.balanceOf(submitter) == before and job_market.jobCount() == 0
    new_job(job_market, submitter, rewardPerTask=MIN // RATIO, workerCollateral=MIN)  # the bounds themselves pass
    new_job(job_market, submitter, rewardPerTask=E, workerCollateral=RATIO * E)
    assert job_market.jobCount() == 2
    assert (job_market.MIN_COLLATERAL(), job_market.MAX_COLLATERAL_PER_REWARD()) == (MIN, RATIO) == (20 * E, 100)
    # The windows the CLI checks are the market's too.
    assert (job_market.MIN_WINDOW_BLOCKS(), job_market.MAX_REVEAL_WINDOW_BLOCKS()) == (
        terms.MIN_WINDOW_BLOCKS, terms.MAX_REVEAL_WINDOW_BLOCKS)


def test_ignoredOffer_isNeverFree_itsPenaltyRoundsUp(job_market, stake_manager, token, submitter, w1):
    collateral = MIN + 1  # 1 % of it is not a whole number of wei
    job_id, _ = new_job(job_market, submitter, workerCollateral=collateral)
    tid = draw_task(job_market, job_id, {"from": w1}).return_value
    chain.mine(job_market.jobOf(job_id).dict()["acceptWindow"] + 1)
    burned = token.totalBurned()
    tx = job_market.timeoutTask(tid, {"from": submitter})
    penalty = -(-collateral * ACCEPT_PENALTY_BPS // 10_000)
    assert penalty == MIN // 100 + 1
    assert tx.events["TaskTimedOut"]["penalty"] == penalty == token.totalBurned() - burned  # burned, to nobody
    assert stake_manager.credits(submitter) == 0


def test_gameAfterGame_eachLosingChallengerPaysTheWorker_thenItIsPaid(game, job_market, stake_manager, token,
                                                                      submitter, w1, challenger, referees):
    """Finding 7's last item: a worker held game after game is paid by every challenger that
    loses (half its bond each), and its window resumes after each; any challenger may still
    challenge in what is left (no first challenger blocks honest ones)."""
    _, tid = revealed_task(job_market, submitter, w1, HONEST)
    second = referees[0]
    for sybil in (challenger, second):
        gid, _ = challenge_task(game, tid, sybil, SAME_END)
        game.move(gid, claims(game, gid, HONEST, Party.WORKER), {"from": w1})
        assert job_market.taskOf(tid)[1] == TS.CHALLENGE
    assert stake_manager.credits(w1) == 2 * 20 * E * WINNER_BPS // 10_000
    chain.mine(51)
    job_market.finalize(tid, {"from": w1})
    assert job_market.credits(w1) == 10 * E
