"""Opening a dispute: public challenges (bond, one game per task, the window), audit
mismatches turned into games, aggregation tasks, the game's configuration."""

import brownie
import pytest
from brownie import accounts, chain

from tests.contracts.dispute_setup import *  # noqa: F401,F403
from truetrain.dispute import Vote

HONEST = trace()
CHEAT = diverged(HONEST, 5)
W, C = int(Vote.WORKER), int(Vote.CHALLENGER)


@pytest.fixture(autouse=True)
def _crew(market_isolation, referees):
    """Crew and referees set up once per module."""


def test_challenge_locksBond_disputesTask_andOpensGame(game, job_market, stake_manager, submitter, w1, challenger):
    _, tid = revealed_task(job_market, submitter, w1, CHEAT)
    deadline = job_market.taskOf(tid)[2]
    gid, tx = challenge_task(game, tid, challenger, HONEST)
    assert gid == 1 == game.gameCount() and game.gameOfTask(tid) == gid
    opened = tx.events["DisputeOpened"]
    assert (opened["taskId"], opened["worker"], opened["challenger"], opened["bond"], opened["leaves"], opened["audit"]) == (tid, w1, challenger, 20 * E, LEAVES, False)
    assert tx.events["TaskChallenged"]["windowLeft"] == deadline - tx.block_number
    assert job_market.taskOf(tid)[1] == TS.DISPUTED
    assert stake_manager.stakeOf(challenger)[1] == 20 * E
    g = view(game, gid)
    assert (g.status, g.turn, g.moves, g.challenger_hash) == (GS.BISECTING, Party.WORKER, 1, HONEST[-1])
    assert list(tx.events["DisputeBisected"]["hashes"]) == [hx(HONEST[-1]), hx(HONEST[LEAVES // 2 - 1])]
    assert list(tx.events["DisputeBisected"]["positions"]) == [LEAVES, LEAVES // 2]


def test_challenge_secondChallenger_reverts(game, job_market, submitter, w1, challenger, referees):
    _, tid = revealed_task(job_market, submitter, w1, CHEAT)
    gid, _ = challenge_task(game, tid, challenger, HONEST)
    with brownie.reverts(f"DisputeAlreadyOpen: {tid}, {gid}"):
        challenge_task(game, tid, referees[0], HONEST)


def test_challenge_sameRoot_selfChallenge_reverts(game, job_market, submitter, w1, challenger):
    _, tid = revealed_task(job_market, submitter, w1, CHEAT)
    with brownie.reverts(f"DisputeSameRoot: {tid}"):
        challenge_task(game, tid, challenger, CHEAT)
    with brownie.reverts(f"DisputeSelfChallenge: {tid}"):
        challenge_task(game, tid, w1, HONEST)


def test_challenge_outsideWindow_reverts(game, job_market, submitter, w1, challenger):
    job_id, _ = new_job(job_market, submitter, challengeWindow=50)
    tid = draw_task(job_market, job_id, {"from": w1}).return_value
    with brownie.reverts(f"TaskNotInChallengeWindow: {tid}"):
        challenge_task(game, tid, challenger, HONEST)
    _, late = revealed_task(job_market, submitter, w1, CHEAT, challengeWindow=20)
    chain.mine(21)
    with brownie.reverts(f"TaskDeadlinePassed: {late}, {job_market.taskOf(late)[2]}"):
        challenge_task(game, late, challenger, HONEST)


def test_challenge_withoutFreeStake_reverts(game, job_market, submitter, w1):
    _, tid = revealed_task(job_market, submitter, w1, CHEAT)
    nobody = accounts[17]
    with brownie.reverts(f"StakeInsufficientFree: {nobody.address.lower()}, {20 * E}, 0"):
        challenge_task(game, tid, nobody, HONEST)
    assert job_market.taskOf(tid)[1] == TS.CHALLENGE


def test_market_openChallengeAndResolve_onlyDisputeGame(job_market, submitter, w1):
    _, tid = revealed_task(job_market, submitter, w1, CHEAT)
    with brownie.reverts(f"MarketNotDisputeGame: {w1.address.lower()}"):
        job_market.openChallenge(tid, w1, {"from": w1})
    with brownie.reverts(f"MarketNotDisputeGame: {w1.address.lower()}"):
        job_market.voidDispute(tid, {"from": w1})
    with brownie.reverts(f"TaskNotDisputed: {tid}"):
        job_market.resolveDispute(tid, True, {"from": accounts[0]})


def test_auditMismatch_becomesGame_auditorOpens_andWinsAgainstCheater(game, job_market, stake_manager, registry, submitter, w1):
    job_id, tid, gid, v1 = open_audit_game(game, job_market, submitter, w1, CHEAT, HONEST)
    g = view(game, gid)
    assert (g.audit, g.challenger, g.challenger_stake, g.turn, g.moves) == (True, v1, AUDITOR_COLLATERAL, Party.CHALLENGER, 0)
    with brownie.reverts(f"DisputeAlreadyOpen: {tid}, {gid}"):
        game.openAuditDispute(tid, {"from": v1})
    play(game, gid, CHEAT, HONEST)
    seated = list(draw_referees(game, gid, v1).events["RefereesDrawn"]["referees"])
    assert v1 not in seated
    vote_all(game, gid, {r: C for r in seated})
    tx = game.resolve(gid, {"from": v1})
    assert tx.events["DisputeSettled"]["workerWon"] is False
    assert stake_manager.credits(v1) == 10 * E and stake_manager.stakeOf(v1)[1] == 0
    assert stake_manager.stakeOf(w1)[1] == 0 and stake_manager.stakeOf(w1)[0] == STAKE_AMOUNT - 20 * E
    assert job_market.taskOf(tid)[1] == TS.PENDING and job_market.jobOf(job_id).dict()["pendingCount"] == 1
    assert registry.identityOf(v1).dict()["history"]["disputesWon"] == 1


def test_auditMismatch_lyingAuditorLoses_workerPaidWithoutAuditFee(game, job_market, stake_manager, submitter, w1):
    job_id, tid, gid, v1 = open_audit_game(game, job_market, submitter, w1, HONEST, CHEAT)
    play(game, gid, HONEST, CHEAT)
    seated = list(draw_referees(game, gid, w1).events["RefereesDrawn"]["referees"])
    vote_all(game, gid, {r: W for r in seated})
    tx = game.resolve(gid, {"from": w1})
    assert tx.events["DisputeSettled"]["slashed"] == AUDITOR_COLLATERAL
    assert job_market.taskOf(tid)[1] == TS.FINALIZED and job_market.credits(w1) == 10 * E
    assert job_market.jobOf(job_id).dict()["surplus"] == 2 * E
    assert stake_manager.credits(w1) == AUDITOR_COLLATERAL // 2
    assert stake_manager.stakeOf(w1)[1] == 0 and stake_manager.stakeOf(v1)[1] == 0


def test_openAuditDispute_onTaskWithoutMismatch_reverts(game, job_market, submitter, w1):
    _, tid = revealed_task(job_market, submitter, w1, CHEAT)
    with brownie.reverts(f"DisputeNotAuditMismatch: {tid}"):
        game.openAuditDispute(tid, {"from": w1})


def test_challenge_afterMatchingAudit_slashesTheConfirmingAuditorWhenWorkerLoses(game, job_market, stake_manager, submitter, w1, challenger):
    _, tid, v1 = colluded_task(job_market, submitter, w1, CHEAT)  # a colluding auditor
    gid, _ = challenge_task(game, tid, challenger, HONEST)
    staked = stake_manager.stakeOf(v1)[0]
    chain.mine(CLOCK + 1)
    tx = game.timeout(gid, {"from": challenger})
    assert tx.events["AuditorSlashed"]["auditor"] == v1
    assert staked - stake_manager.stakeOf(v1)[0] == AUDITOR_COLLATERAL
    assert job_market.taskOf(tid)[1] == TS.PENDING
    assert stake_manager.stakeOf(v1)[1] == 0 and stake_manager.stakeOf(w1)[1] == 0


def test_aggregationTask_goesStraightToReferees(game, job_market, submitter, w1, challenger):
    job_id, _ = new_job(job_market, submitter, shards=1, rounds=1, challengeWindow=50)
    run_task(job_market, job_id, w1)
    agg = run_task(job_market, job_id, w1, root=hx(CHEAT[-1]), finalize=False)
    with brownie.reverts(f"DisputeWrongClaimCount: 1, 1, 0"):
        game.challenge(agg, hx(HONEST[-1]), [(HONEST[-1], [], "x")], {"from": challenger})
    tx = game.challenge(agg, hx(HONEST[-1]), [], {"from": challenger})
    gid = tx.return_value
    g = view(game, gid)
    assert (g.status, g.leaves, g.lo, g.hi) == (GS.AWAITING_REFEREES, 1, 0, 1)
    d = ended(game, gid)
    assert (d.agreed, d.worker, d.challenger) == (None, CHEAT[-1], HONEST[-1])
    assert "BisectionEnded" in tx.events


def test_gameConfig_outOfRange_reverts(DisputeGame, job_market, pool, stake_manager, registry, deployer):
    good = [CLOCK, COMMIT_WINDOW, REVEAL_WINDOW, COMMITTEE, REFEREE_STAKE, REFEREE_PENALTY]
    for index, bad in [(0, 0), (1, 0), (2, 0), (3, 0), (3, 2), (3, 11), (5, REFEREE_STAKE + 1)]:
        config = list(good)
        config[index] = bad
        with brownie.reverts("DisputeInvalidConfig: "):
            DisputeGame.deploy(job_market, pool, stake_manager, registry, tuple(config), NO_STEP_GAME,
                               {"from": deployer})


def test_createJob_zeroCheckpointLeaves_reverts(job_market, submitter):
    with brownie.reverts("JobInvalidCheckpointLeaves: 0"):
        job_market.createJob(job_params(checkpointLeaves=0), {"from": submitter})
