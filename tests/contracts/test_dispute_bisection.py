"""DisputeGame bisection: openings, moves, the interval it ends on, chess clocks, and every
revert a party can meet while moving."""

import brownie
import pytest
from brownie import chain

from tests.contracts.dispute_setup import *  # noqa: F401,F403


@pytest.fixture(autouse=True)
def _crew(market_isolation, referees):
    """Crew and referees set up once per module."""


HONEST = trace()


@pytest.mark.parametrize("leaves, diverge_at", [(7, 5), (8, 1), (8, 7), (2, 1), (64, 37), (33, 32)])
def test_bisection_endsOnFirstDivergingLeaf_inCeilLog2Moves(game, job_market, submitter, w1, challenger, leaves, diverge_at):
    honest = trace(leaves)
    cheat = diverged(honest, diverge_at)
    _, tid = revealed_task(job_market, submitter, w1, cheat, checkpointLeaves=leaves)
    gid, tx = challenge_task(game, tid, challenger, honest)
    assert tx.events["DisputeOpened"]["challengerRoot"] == root_of(honest)
    txs = play(game, gid, cheat, honest)
    g = view(game, gid)
    assert g.status == GS.AWAITING_REFEREES
    # leaf diverge_at is position diverge_at + 1; the parties agree at the position before it
    assert (g.lo, g.hi) == (diverge_at, diverge_at + 1)
    d = ended(game, gid)
    assert d.agreed == (honest[diverge_at - 1] if diverge_at else None)
    assert (d.worker, d.challenger) == (cheat[diverge_at], honest[diverge_at])
    assert len(txs) == game.movesFor(leaves) == (leaves - 1).bit_length()
    last = txs[-1].events["BisectionEnded"]
    assert (last["lo"], last["hi"]) == (diverge_at, diverge_at + 1)


def test_wrongStartCheckpoint_endsOnInputs(game, job_market, submitter, w1, challenger):
    wrong_start = diverged(HONEST, 0)
    _, tid = revealed_task(job_market, submitter, w1, wrong_start)
    gid, _ = challenge_task(game, tid, challenger, HONEST)
    play(game, gid, wrong_start, HONEST)
    d = ended(game, gid)
    assert (d.lo, d.hi, d.agreed, d.agreed_cids) == (0, 1, None, ())
    assert (d.worker, d.challenger) == (wrong_start[0], HONEST[0])


def test_challengerClaimsWorkersOwnResult_losesAtOnce(game, job_market, stake_manager, submitter, w1, challenger):
    # a different trace that ends on the worker's final checkpoint: the result is not disputed
    other = diverged(HONEST, 2)[:-1] + [HONEST[-1]]
    _, tid = revealed_task(job_market, submitter, w1, HONEST)
    gid, _ = challenge_task(game, tid, challenger, other)
    txs = play(game, gid, HONEST, other)
    assert len(txs) == 1 and txs[0].events["DisputeSettled"]["workerWon"]
    assert view(game, gid).status == GS.RESOLVED
    assert job_market.taskOf(tid)[1] == TS.CHALLENGE
    assert stake_manager.stakeOf(challenger)[0] == STAKE_AMOUNT - 20 * E


def test_oneLeafTask_bisectsInOneWorkerMove(game, job_market, submitter, w1, challenger):
    honest, cheat = trace(1), trace(1, "cheat")
    _, tid = revealed_task(job_market, submitter, w1, cheat, checkpointLeaves=1)
    gid, _ = challenge_task(game, tid, challenger, honest)
    assert view(game, gid).turn == Party.WORKER
    txs = play(game, gid, cheat, honest)
    g = view(game, gid)
    assert len(txs) == 1 and (g.lo, g.hi, g.status) == (0, 1, GS.AWAITING_REFEREES)


def test_move_outOfTurn_reverts(game, job_market, submitter, w1, challenger):
    cheat = diverged(HONEST, 4)
    _, tid = revealed_task(job_market, submitter, w1, cheat)
    gid, _ = challenge_task(game, tid, challenger, HONEST)
    with brownie.reverts(f"DisputeNotYourTurn: {gid}, {challenger.address.lower()}"):
        game.move(gid, claims(game, gid, HONEST, Party.CHALLENGER), {"from": challenger})


def test_move_forgedProof_reverts(game, job_market, submitter, w1, challenger):
    cheat = diverged(HONEST, 4)
    _, tid = revealed_task(job_market, submitter, w1, cheat)
    gid, _ = challenge_task(game, tid, challenger, HONEST)
    forged = claims(game, gid, cheat, Party.WORKER)
    # the worker claims the honest hash at the result with its own (cheat) proof
    forged[0] = (HONEST[-1], forged[0][1], forged[0][2])
    with brownie.reverts(f"DisputeProofInvalid: {gid}, {LEAVES}, {HONEST[-1]}"):
        game.move(gid, forged, {"from": w1})
    short = claims(game, gid, cheat, Party.WORKER)
    short[1] = (short[1][0], short[1][1][:-1], short[1][2])
    with brownie.reverts(f"DisputeProofInvalid: {gid}, 3, {cheat[2]}"):
        game.move(gid, short, {"from": w1})


def test_move_claimCidPastTheCap_reverts(game, job_market, submitter, w1, challenger):
    cheat = diverged(HONEST, 4)
    _, tid = revealed_task(job_market, submitter, w1, cheat)
    gid, _ = challenge_task(game, tid, challenger, HONEST)
    long = claims(game, gid, cheat, Party.WORKER)
    long[0] = (long[0][0], long[0][1], "b" * 24_000)  # a 24 KB CID would make every log huge
    with brownie.reverts(f"DisputeCidTooLong: {gid}, 24000"):
        game.move(gid, long, {"from": w1})
    assert view(game, gid).turn == Party.WORKER  # nothing moved


def test_move_wrongClaimCount_reverts(game, job_market, submitter, w1, challenger):
    cheat = diverged(HONEST, 4)
    _, tid = revealed_task(job_market, submitter, w1, cheat)
    gid, _ = challenge_task(game, tid, challenger, HONEST)
    due = claims(game, gid, cheat, Party.WORKER)
    with brownie.reverts(f"DisputeWrongClaimCount: {gid}, 4, 3"):
        game.move(gid, due + due[:1], {"from": w1})
    with brownie.reverts(f"DisputeWrongClaimCount: {gid}, 1, 2"):
        game.move(gid, due[:1], {"from": w1})


def test_move_afterClockRanOut_reverts_andTimeoutMakesMoverLose(game, job_market, stake_manager, registry, submitter, w1, challenger):
    cheat = diverged(HONEST, 4)
    _, tid = revealed_task(job_market, submitter, w1, cheat)
    gid, tx = challenge_task(game, tid, challenger, HONEST)
    opened = tx.block_number
    with brownie.reverts(f"DisputeClockRunning: {gid}, {opened + CLOCK}"):
        game.timeout(gid, {"from": challenger})
    chain.mine(CLOCK + 1)
    with brownie.reverts(f"DisputeClockExpired: {gid}, {opened + CLOCK}"):
        game.move(gid, claims(game, gid, cheat, Party.WORKER), {"from": w1})
    tx = game.timeout(gid, {"from": challenger})
    assert tx.events["ClockExpired"]["party"] == w1
    settled = tx.events["DisputeSettled"]
    assert (settled["workerWon"], settled["winner"], settled["loser"], settled["slashed"]) == (False, challenger, w1, 20 * E)
    assert job_market.taskOf(tid)[1] == TS.PENDING  # the only worker is excluded: it waits to be redrawn
    assert stake_manager.credits(challenger) == 10 * E  # 50 % of 20; no referees: 20 % + 30 % burned
    assert stake_manager.stakeOf(challenger)[1] == 0 and stake_manager.stakeOf(w1)[1] == 0
    assert registry.identityOf(w1).dict()["history"]["disputesLost"] == 1


def test_clock_isChargedPerParty(game, job_market, submitter, w1, challenger):
    cheat = diverged(HONEST, 4)
    _, tid = revealed_task(job_market, submitter, w1, cheat)
    gid, _ = challenge_task(game, tid, challenger, HONEST)
    chain.mine(3)
    tx = play(game, gid, cheat, HONEST, stop_after=1)[0]
    g = view(game, gid)
    assert g.worker_clock == CLOCK - 4 == tx.events["DisputeBisected"]["clockLeft"]
    assert g.challenger_clock == CLOCK and g.turn == Party.CHALLENGER


def test_move_onResolvedGame_reverts_andUnknownGame_reverts(game, job_market, submitter, w1, challenger):
    cheat = diverged(HONEST, 4)
    _, tid = revealed_task(job_market, submitter, w1, cheat)
    gid, _ = challenge_task(game, tid, challenger, HONEST)
    chain.mine(CLOCK + 1)
    game.timeout(gid, {"from": challenger})
    with brownie.reverts(f"DisputeWrongStatus: {gid}, {int(GS.RESOLVED)}"):
        game.move(gid, [], {"from": w1})
    with brownie.reverts(f"DisputeWrongStatus: {gid}, {int(GS.RESOLVED)}"):
        game.timeout(gid, {"from": w1})
    with brownie.reverts("DisputeNotFound: 99"):
        game.move(99, [], {"from": w1})
