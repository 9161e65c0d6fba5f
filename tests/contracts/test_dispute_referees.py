"""DisputeGame referees: the committee draw, commit–reveal voting, the verdict, and what each
party and referee ends up with (exact stake, credit, burn and reputation changes)."""

import brownie
import pytest
from brownie import chain

from tests.contracts.dispute_setup import *  # noqa: F401,F403
from truetrain.dispute import Vote, vote_commitment

HONEST = trace()
CHEAT = diverged(HONEST, 5)
W, C, N = int(Vote.WORKER), int(Vote.CHALLENGER), int(Vote.NEITHER)


@pytest.fixture(autouse=True)
def _crew(market_isolation, referees):
    """Crew and referees set up once per module."""


def _bisected(game, job_market, submitter, w1, challenger, worker_hashes=CHEAT, challenger_hashes=HONEST):
    job_id, tid = revealed_task(job_market, submitter, w1, worker_hashes)
    gid, _ = challenge_task(game, tid, challenger, challenger_hashes)
    play(game, gid, worker_hashes, challenger_hashes)
    return job_id, tid, gid


def _reputation(registry, who):
    return registry.identityOf(who).dict()["reputation"]


def test_drawReferees_seatsDistinctNonPartyVerifiers_andLocksTheirStake(game, job_market, stake_manager, submitter, w1, challenger):
    _, _, gid = _bisected(game, job_market, submitter, w1, challenger)
    tx = draw_referees(game, gid, challenger)
    seated = list(tx.events["RefereesDrawn"]["referees"])
    assert len(seated) == COMMITTEE == len(set(seated))
    assert w1 not in seated and challenger not in seated
    assert [s[0] for s in game.committeeOf(gid)] == seated
    assert all(stake_manager.stakeOf(r)[1] == REFEREE_STAKE for r in seated)
    g = view(game, gid)
    assert (g.status, g.committee, g.seats, g.deadline) == (GS.COMMITTING, 1, COMMITTEE, tx.block_number + COMMIT_WINDOW)
    with brownie.reverts(f"DisputeWrongStatus: {gid}, {int(GS.COMMITTING)}"):
        draw_referees(game, gid, challenger)


def test_drawReferees_whileBisecting_reverts(game, job_market, submitter, w1, challenger):
    _, tid = revealed_task(job_market, submitter, w1, CHEAT)
    gid, _ = challenge_task(game, tid, challenger, HONEST)
    with brownie.reverts(f"DisputeWrongStatus: {gid}, {int(GS.BISECTING)}"):
        draw_referees(game, gid, challenger)


def test_drawReferees_noEligibleVerifier_failsThatCommittee_thenSeatsAnOddCommittee(game, job_market, pool, submitter, w1, v1, challenger, referees):
    _, _, gid = _bisected(game, job_market, submitter, w1, challenger)
    mine_past(view(game, gid).deadline)  # the ticket's hash exists: verifier weights are held
    for r in referees + [v1]:
        pool.leavePool({"from": r})
    tx = draw_referees(game, gid, challenger)
    # No eligible verifier: that committee fails (an exit, not a wait) and another is asked
    # for, from the hash of a later block.
    assert tx.events["CommitteeFailed"]["committee"] == 1
    assert tx.events["RefereesRequested"]["ticket"] == ticket_for(tx.block_number)
    assert view(game, gid).status == GS.AWAITING_REFEREES
    pool.joinPool({"from": referees[0]})
    pool.joinPool({"from": referees[1]})
    tx = draw_referees(game, gid, challenger)
    # two eligible verifiers: a committee of one, so a vote cannot tie
    assert len(tx.events["RefereesDrawn"]["referees"]) == 1


def test_verdictForChallenger_slashesWorker_splitsWithReferees_andRequeues(game, job_market, token, stake_manager, registry, pool, submitter, w1, w2, challenger):
    job_id, tid, gid = _bisected(game, job_market, submitter, w1, challenger)
    seated = list(draw_referees(game, gid, challenger).events["RefereesDrawn"]["referees"])
    reps = {r: _reputation(registry, r) for r in seated}
    burned = token.totalBurned()
    vote_all(game, gid, {r: C for r in seated})
    tx = game.resolve(gid, {"from": challenger})
    settled = tx.events["DisputeSettled"]
    assert (settled["workerWon"], settled["winner"], settled["loser"], settled["slashed"]) == (False, challenger, w1, 20 * E)
    per_referee = 20 * E * 2_000 // 10_000 // 3
    assert stake_manager.credits(challenger) == 10 * E
    assert all(stake_manager.credits(r) == per_referee for r in seated)
    assert token.totalBurned() - burned == 20 * E - 10 * E - 3 * per_referee
    assert stake_manager.stakeOf(w1)[0] == STAKE_AMOUNT - 20 * E and stake_manager.stakeOf(w1)[1] == 0
    assert stake_manager.stakeOf(challenger)[1] == 0
    assert all(stake_manager.stakeOf(r)[1] == 0 for r in seated)
    assert all(_reputation(registry, r) == reps[r] for r in seated)  # the majority keeps its reputation
    assert registry.identityOf(w1).dict()["history"]["disputesLost"] == 1
    assert view(game, gid).status == GS.RESOLVED and (view(game, gid).votes_challenger, view(game, gid).revealed) == (3, 3)
    # the worker lost: its task goes back (no redraw inside the settlement) and is drawn for another worker
    assert job_market.taskOf(tid)[1] == TS.PENDING and "TaskRequeued" in tx.events
    pool.joinPool({"from": w2})
    tx = draw_task(job_market, job_id, {"from": w2})
    assert tx.return_value == tid and tx.events["TaskDrawn"]["worker"] == w2
    with brownie.reverts(f"DisputeWrongStatus: {gid}, {int(GS.RESOLVED)}"):
        game.resolve(gid, {"from": challenger})


def test_minorityAndSilentReferees_arePenalised_majoritySharesTheSlash(game, job_market, stake_manager, registry, submitter, w1, challenger):
    _, _, gid = _bisected(game, job_market, submitter, w1, challenger)
    seated = list(draw_referees(game, gid, challenger).events["RefereesDrawn"]["referees"])
    liar, honest, silent = seated
    before = {r: registry.identityOf(r).dict() for r in seated}
    vote_all(game, gid, {liar: W, honest: N})
    tx = game.resolve(gid, {"from": challenger})
    # one vote for the worker out of two revealed is no strict majority: the worker loses
    assert tx.events["DisputeSettled"]["workerWon"] is False
    penalised = {e["referee"]: (e["penalty"], e["revealed"]) for e in tx.events["RefereePenalized"]}
    assert penalised == {liar: (REFEREE_PENALTY, True), silent: (REFEREE_PENALTY, False)}
    # The referees' penalties are burned: no party gains from its own referees' penalties.
    assert stake_manager.credits(challenger) == 10 * E
    assert stake_manager.credits(honest) == 20 * E * 2_000 // 10_000
    assert stake_manager.stakeOf(liar)[0] == STAKE_AMOUNT - REFEREE_PENALTY and stake_manager.stakeOf(liar)[1] == 0
    assert stake_manager.stakeOf(silent)[0] == STAKE_AMOUNT - REFEREE_PENALTY and stake_manager.stakeOf(silent)[1] == 0
    after = {r: registry.identityOf(r).dict() for r in seated}
    assert after[liar]["history"]["tasksFailed"] == 1
    assert after[liar]["reputation"] == before[liar]["reputation"] - before[liar]["reputation"] // 4
    assert after[silent]["history"]["tasksTimedOut"] == 1
    assert after[silent]["reputation"] == before[silent]["reputation"] - before[silent]["reputation"] // 10


def test_falseChallenger_losesBond_workerKeepsWindowAndIsPaid(game, job_market, stake_manager, registry, submitter, w1, challenger):
    false_claim = diverged(HONEST, 3)
    _, tid, gid = _bisected(game, job_market, submitter, w1, challenger, HONEST, false_claim)
    window_left = job_market.taskOf(tid)[2]
    seated = list(draw_referees(game, gid, challenger).events["RefereesDrawn"]["referees"])
    vote_all(game, gid, {r: W for r in seated})
    tx = game.resolve(gid, {"from": challenger})
    assert tx.events["DisputeSettled"]["workerWon"] is True and tx.events["DisputeSettled"]["slashed"] == 20 * E
    assert stake_manager.stakeOf(challenger)[0] == STAKE_AMOUNT - 20 * E and stake_manager.stakeOf(challenger)[1] == 0
    assert stake_manager.credits(w1) == 10 * E
    assert registry.identityOf(w1).dict()["history"]["disputesWon"] == 1
    # the result stood: its challenge window resumes with the blocks it had left
    assert tx.events["ChallengeWindowOpened"]["deadline"] == tx.block_number + window_left
    assert job_market.taskOf(tid)[1] == TS.CHALLENGE and stake_manager.stakeOf(w1)[1] == 20 * E
    chain.mine(window_left + 1)
    job_market.finalize(tid, {"from": w1})
    assert job_market.credits(w1) == 10 * E and stake_manager.stakeOf(w1)[1] == 0


def test_vote_reverts_notReferee_twice_wrongStatus_invalid_mismatch_late(game, job_market, submitter, w1, challenger):
    _, _, gid = _bisected(game, job_market, submitter, w1, challenger)
    seated = list(draw_referees(game, gid, challenger).events["RefereesDrawn"]["referees"])
    salt = bytes.fromhex("44" * 32)
    with brownie.reverts(f"DisputeNotReferee: {gid}, 0, {challenger.address.lower()}"):
        game.commitVote(gid, 0, vote_commitment(gid, C, salt, challenger), {"from": challenger})
    with brownie.reverts(f"DisputeNotReferee: {gid}, 3, {seated[0].lower()}"):
        game.commitVote(gid, 3, vote_commitment(gid, C, salt, seated[0]), {"from": seated[0]})
    with brownie.reverts(f"DisputeWrongStatus: {gid}, {int(GS.COMMITTING)}"):
        game.revealVote(gid, 0, C, salt, {"from": seated[0]})
    with brownie.reverts(f"DisputeDeadlineNotPassed: {gid}, {view(game, gid).deadline}"):
        game.timeout(gid, {"from": challenger})
    with brownie.reverts(f"DisputeVoteMismatch: {gid}, {seated[0].lower()}"):
        game.commitVote(gid, 0, "0x" + "00" * 32, {"from": seated[0]})
    game.commitVote(gid, 0, vote_commitment(gid, C, salt, seated[0]), {"from": seated[0]})
    with brownie.reverts(f"DisputeAlreadyVoted: {gid}, {seated[0].lower()}"):
        game.commitVote(gid, 0, vote_commitment(gid, C, salt, seated[0]), {"from": seated[0]})
    game.commitVote(gid, 1, vote_commitment(gid, 0, salt, seated[1]), {"from": seated[1]})
    chain.mine(COMMIT_WINDOW + 1)
    with brownie.reverts(f"DisputeDeadlinePassed: {gid}, {view(game, gid).deadline}"):
        game.commitVote(gid, 2, vote_commitment(gid, C, salt, seated[2]), {"from": seated[2]})
    tx = game.timeout(gid, {"from": challenger})
    deadline = tx.events["RevealPhaseOpened"]["revealDeadline"]
    with brownie.reverts(f"DisputeVoteMismatch: {gid}, {seated[0].lower()}"):
        game.revealVote(gid, 0, W, salt, {"from": seated[0]})
    with brownie.reverts(f"DisputeInvalidVote: {gid}, 0"):
        game.revealVote(gid, 1, 0, salt, {"from": seated[1]})
    with brownie.reverts(f"DisputeAlreadyVoted: {gid}, {seated[2].lower()}"):
        game.revealVote(gid, 2, C, salt, {"from": seated[2]})  # never committed
    game.revealVote(gid, 0, C, salt, {"from": seated[0]})
    with brownie.reverts(f"DisputeAlreadyVoted: {gid}, {seated[0].lower()}"):
        game.revealVote(gid, 0, C, salt, {"from": seated[0]})
    with brownie.reverts(f"DisputeDeadlineNotPassed: {gid}, {deadline}"):
        game.resolve(gid, {"from": challenger})
    chain.mine(REVEAL_WINDOW + 1)
    with brownie.reverts(f"DisputeDeadlinePassed: {gid}, {deadline}"):
        game.revealVote(gid, 1, C, salt, {"from": seated[1]})
    assert game.resolve(gid, {"from": challenger}).events["DisputeSettled"]["workerWon"] is False


def test_silentCommittee_isPenalisedAndRedrawn_thenVoidedWithoutVerdict(game, job_market, stake_manager, token, submitter, w1, challenger):
    _, tid, gid = _bisected(game, job_market, submitter, w1, challenger)
    penalties = 0
    burned = token.totalBurned()
    for committee in range(1, 4):
        seated = list(draw_referees(game, gid, challenger).events["RefereesDrawn"]["referees"])
        assert view(game, gid).committee == committee
        chain.mine(COMMIT_WINDOW + 1)
        game.timeout(gid, {"from": challenger})
        tx = game.resolve(gid, {"from": challenger})
        assert tx.events["CommitteeFailed"]["committee"] == committee
        assert len(tx.events["RefereePenalized"]) == len(seated)
        penalties += REFEREE_PENALTY * len(seated)
        assert all(stake_manager.stakeOf(r)[1] == 0 for r in seated)
    # MAX_REDRAWS committees failed after the first: no verdict. Nobody is paid or slashed
    # (not the worker either: its result never got a verdict), and the task is redone.
    assert game.MAX_REDRAWS() == 2
    assert "DisputeSettled" not in tx.events and tx.events["DisputeVoided"]["taskId"] == tid
    assert view(game, gid).status == GS.VOIDED
    assert stake_manager.credits(w1) == 0 and stake_manager.credits(challenger) == 0
    assert token.totalBurned() - burned == penalties
    assert stake_manager.stakeOf(w1)[1] == 0 and stake_manager.stakeOf(challenger)[1] == 0
    assert stake_manager.stakeOf(w1)[0] == stake_manager.stakeOf(challenger)[0] == STAKE_AMOUNT
    assert job_market.taskOf(tid)[1] == TS.PENDING
