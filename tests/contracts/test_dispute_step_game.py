"""DisputeGame wired to StepGame (docs/onestep.md, "Wiring"): a job binds its program, data root
and checkpoint interval; a challenged task's level 0 ends on an interval past the inputs and
StepGame plays levels 1-3 and the one-step on real digits-MLP traces
(tests/contracts/step_game_play.py); its verdict settles the task as a committee's did, with
no referee drawn: the honest side wins as worker, as challenger and as the auditor of a
mismatched audit, a stalled party loses on
StepGame's clock; stake, credits and the burned share exact, tokens conserved; every new
revert by name; the headroom."""

from __future__ import annotations

import brownie
import pytest
from brownie import accounts, chain, history

from tests.contracts.dispute_setup import *  # noqa: F401,F403
from tests.contracts.step_game_play import FAULTY_STEP, STEPS, Setting, deploy_step_game, drive
from truetrain.hashing import keccak256
from truetrain.trace.game import CHALLENGER, DEFENDER, Party as StepParty, job_batch_leaves, task_width
from truetrain.training.merkle import merkle_root

FAULT = 0  # fc.0's linear: its one-step reads the batch, opened under the job's data root
SHARDS = 2
ZERO = "0x" + "00" * 32
LEAVES = STEPS + 1  # checkpoints 0..STEPS, interval 1


@pytest.fixture(scope="module")
def setting():
    return Setting()


@pytest.fixture(scope="module")
def faulty(setting):
    """The cheater: fc.0's linear output of step FAULTY_STEP with one element flipped."""
    return setting.faulty(FAULT, 5)


@pytest.fixture(scope="module")
def step_game(StepGame, StepKindsCore, StepKindsXent, StepKindsQuant, deployer):
    return deploy_step_game(StepGame, (StepKindsCore, StepKindsXent, StepKindsQuant), deployer)


@pytest.fixture(scope="module")
def wired(DisputeGame, job_market, pool, stake_manager, registry, deployer, step_game, crew):
    return deploy_game(DisputeGame, job_market, pool, stake_manager, registry, deployer, step_game=step_game)


def _data(setting) -> list[bytes]:
    """The job's data leaves: task slot 0 (round 0, shard 0) the digits shard's steps, slot 1 another's."""
    other = [keccak256(b"shard 1 step %d" % s) for s in range(STEPS)]
    return job_batch_leaves([setting.batch_roots, other])


def _binding(setting, shards=SHARDS) -> tuple:
    p = setting.program
    return (p.root(), len(p), 1, shards, merkle_root(_data(setting)), p.layout())


def _leaves(setting, faulty: StepParty | None) -> list[bytes]:
    """A party's level-0 leaves, as a worker's result bundle has them: checkpoints 0..STEPS
    (leaf 0 the task's checkpoint 0; position 0 the task's inputs, position p leaf p - 1)."""
    leaves = [setting.checkpoint(s).hash() for s in range(STEPS + 1)]
    if faulty is not None:
        start = setting.checkpoint(0)
        leaves[FAULTY_STEP + 1:] = [start.after(s + 1, faulty.step_roots[s]).hash() for s in range(FAULTY_STEP, STEPS)]
    return leaves


def _interval_party(setting, source: StepParty) -> StepParty:
    """``source``'s side of the interval level 0 ends on: step FAULTY_STEP from checkpoint
    FAULTY_STEP, the batches the job's data leaves (its first step's at leaf FAULTY_STEP)."""
    return StepParty(setting.program, [source.step_roots[FAULTY_STEP]], {0: source.traces[FAULTY_STEP]},
                     _data(setting), setting.checkpoint(FAULTY_STEP), first_batch=FAULTY_STEP)


def _to_step_game(wired, job_market, setting, faulty, submitter, w1, challenger, honest_role):
    """A bound job whose task (w1) and challenger play level 0 by their leaves; returns the
    ids, the StepGame parties (worker's first) and the level-0 end."""
    job_id, _ = new_job(job_market, submitter, shards=SHARDS, checkpointLeaves=LEAVES, challengeWindow=50)
    wired.bindProgram(job_id, _binding(setting), {"from": submitter})
    honest = setting.honest()
    worker, other = (honest, faulty) if honest_role == DEFENDER else (faulty, honest)
    worker_leaves = _leaves(setting, None if worker is honest else faulty)
    challenger_leaves = _leaves(setting, None if other is honest else faulty)
    tid = run_task(job_market, job_id, w1, root=root_of(worker_leaves), finalize=False)
    gid, _ = challenge_task(wired, tid, challenger, challenger_leaves)
    txs = play(wired, gid, worker_leaves, challenger_leaves)
    return tid, gid, (_interval_party(setting, worker), _interval_party(setting, other)), txs[-1]


@pytest.mark.parametrize("honest_role", [DEFENDER, CHALLENGER], ids=["honestWorker", "honestChallenger"])
def test_levelZero_handsOverToStepGame_andItsVerdictSettles(wired, step_game, job_market, stake_manager, registry,
                                                             token, setting, faulty, submitter, w1, challenger,
                                                             honest_role):
    tid, gid, parties, last = _to_step_game(wired, job_market, setting, faulty, submitter, w1, challenger, honest_role)
    assert "RefereesRequested" not in last.events and view(wired, gid).status == GS.STEPPING
    opened = last.events["StepGameOpened"]
    sid = opened["stepGameId"]
    assert (opened["gameId"], opened["firstBatch"], opened["steps"]) == (gid, FAULTY_STEP, 1)
    assert wired.gameOfStepGame(sid) == gid
    link = wired.linkOf(gid)
    assert link[0] == "0x" + setting.checkpoint(FAULTY_STEP).hash().hex() and link[2] == sid
    assert [str(h) for h in link[1]] == ["0x" + p.end.hash().hex() for p in parties]
    # the agreed position is leaf FAULTY_STEP (checkpoint FAULTY_STEP), the first to differ the next
    assert (view(wired, gid).lo, view(wired, gid).hi) == (FAULTY_STEP + 1, FAULTY_STEP + 2)
    supply, held = token.totalSupply(), token.balanceOf(stake_manager)
    stakes = {a: stake_manager.stakeOf(a) for a in (w1, challenger)}
    moves = drive(step_game, sid, parties, (w1, challenger))
    step, app, _ = step_game.disputed(sid)
    assert (step, app) == (0, FAULT)
    assert len(moves) == setting.expected_moves(FAULT) - 2 * 2  # one step: level 1 has no descent
    settled = history[-1].events["DisputeSettled"]
    worker_won = honest_role == DEFENDER
    winner, loser = (w1, challenger) if worker_won else (challenger, w1)
    assert (settled["workerWon"], settled["winner"], settled["loser"], settled["slashed"]) == (
        worker_won, winner, loser, 20 * E)
    assert "RefereesDrawn" not in history[-1].events
    assert view(wired, gid).status == GS.RESOLVED and wired.committeeOf(gid) == ()
    # the loser's 20 slashed: 10 to the winner's credits, 10 burned (no referee share)
    assert stake_manager.stakeOf(loser)[0] == stakes[loser][0] - 20 * E
    assert stake_manager.stakeOf(winner)[0] == stakes[winner][0]
    assert stake_manager.credits(winner) == 10 * E and stake_manager.credits(loser) == 0
    assert token.totalSupply() == supply - 10 * E and token.balanceOf(stake_manager) == held - 10 * E
    assert stake_manager.stakeOf(challenger)[1] == 0  # the challenger's bond released or slashed
    assert stake_manager.stakeOf(w1)[1] == (20 * E if worker_won else 0)  # a winning worker's stays with its task
    assert job_market.taskOf(tid)[1] == (TS.CHALLENGE if worker_won else TS.PENDING)
    record = registry.identityOf(w1).dict()["history"]
    assert (record["disputesWon"], record["disputesLost"]) == ((1, 0) if worker_won else (0, 1))


def test_coalitionWithNinetyPercentOfTheVerifiers_losesToOneHonestChallenger(wired, step_game, job_market, pool,
                                                                              registry, token, stake_manager,
                                                                              setting, faulty, submitter, w1,
                                                                              challenger, deployer):
    """The cheating worker's friends hold over 90 % of the verifiers' weight in the pool; the
    one honest challenger holds none of it (it is not even in the pool). The verdict is the
    chain's computation, so their weight buys nothing: no seat is drawn, no vote taken, and a
    vote they try to cast is refused; the challenger wins and the coalition's stakes are as
    they were."""
    coalition = [accounts[i] for i in (17, 18, 19)]
    for a in coalition:
        register(registry, a, ROLE_VERIFIER)
        stake(token, stake_manager, a, amount=40 * STAKE_AMOUNT, deployer=deployer)
        pool.joinPool({"from": a})
    held = sum(pool.weightOf(a, True) for a in coalition)
    assert held * 10 >= pool.totalWeight(True) * 9 and pool.weightOf(challenger, True) == 0
    stakes = [stake_manager.stakeOf(a) for a in coalition]
    tid, gid, parties, last = _to_step_game(wired, job_market, setting, faulty, submitter, w1, challenger, CHALLENGER)
    sid = last.events["StepGameOpened"]["stepGameId"]
    with brownie.reverts(f"DisputeWrongStatus: {gid}, {int(GS.STEPPING)}"):
        wired.commitVote(gid, 0, "0x" + "11" * 32, {"from": coalition[0]})
    drive(step_game, sid, parties, (w1, challenger))
    settled = history[-1].events["DisputeSettled"]
    assert (settled["workerWon"], settled["winner"], settled["loser"]) == (False, challenger, w1)
    assert "RefereesRequested" not in history[-1].events and wired.committeeOf(gid) == ()
    assert [stake_manager.stakeOf(a) for a in coalition] == stakes


@pytest.mark.parametrize("stalled", ["worker", "challenger"])
def test_stalledStepGame_settlesByTimeout_againstTheStalledParty(wired, step_game, job_market, stake_manager, setting,
                                                                 faulty, submitter, w1, challenger, stalled):
    tid, gid, parties, last = _to_step_game(wired, job_market, setting, faulty, submitter, w1, challenger, DEFENDER)
    sid = last.events["StepGameOpened"]["stepGameId"]
    if stalled == "challenger":
        step_game.commitSteps(sid, *parties[0].commit_steps(), {"from": w1})
    chain.mine(CLOCK * wired.STEP_CLOCK_FACTOR() + 1)
    tx = step_game.timeout(sid, {"from": accounts[0]})
    worker_won = stalled == "challenger"
    settled = tx.events["DisputeSettled"]
    assert (settled["gameId"], settled["workerWon"], settled["slashed"]) == (gid, worker_won, 20 * E)
    assert "RefereesDrawn" not in tx.events and view(wired, gid).status == GS.RESOLVED
    winner = w1 if worker_won else challenger
    assert stake_manager.credits(winner) == 10 * E


def test_auditMismatch_endsInStepGame_theHonestAuditorWins(wired, step_game, job_market, stake_manager, setting, faulty,
                                                           submitter, w1):
    job_id, _ = new_job(job_market, submitter, shards=SHARDS, checkpointLeaves=LEAVES, auditRateBps=10_000)
    wired.bindProgram(job_id, _binding(setting), {"from": submitter})
    cheat, honest = _leaves(setting, faulty), _leaves(setting, None)
    tid = draw_task(job_market, job_id, {"from": w1}).return_value
    job_market.acceptTask(tid, {"from": w1})
    job_market.commitResult(tid, commitment(tid, root_of(cheat), CID, SALT, w1), {"from": w1})
    auditor = settle_audit(job_market, tid)
    job_market.commitAudit(tid, audit_commitment(tid, root_of(honest), SALT, auditor), {"from": auditor})
    job_market.revealResult(tid, root_of(cheat), CID, SALT, {"from": w1})
    job_market.revealAudit(tid, root_of(honest), SALT, {"from": auditor})
    gid = wired.openAuditDispute(tid, {"from": w1}).return_value
    sid = play(wired, gid, cheat, honest)[-1].events["StepGameOpened"]["stepGameId"]
    drive(step_game, sid, (_interval_party(setting, faulty), _interval_party(setting, setting.honest())), (w1, auditor))
    settled = history[-1].events["DisputeSettled"]
    assert (settled["workerWon"], settled["winner"], settled["loser"], settled["slashed"]) == (False, auditor, w1, 20 * E)
    assert stake_manager.credits(auditor) == 10 * E and stake_manager.stakeOf(auditor)[1] == 0


def test_stepGameResolved_fromAStranger_orForAnotherId_reverts(wired, step_game, job_market, setting, faulty, submitter,
                                                              w1, challenger):
    _, gid, _, last = _to_step_game(wired, job_market, setting, faulty, submitter, w1, challenger, DEFENDER)
    sid = last.events["StepGameOpened"]["stepGameId"]
    with brownie.reverts(f"DisputeNotStepGame: {challenger.address.lower()}, {sid}"):
        wired.stepGameResolved(sid, challenger, w1, {"from": challenger})
    with brownie.reverts(f"DisputeNotStepGame: {step_game.address.lower()}, {sid + 1}"):
        wired.stepGameResolved(sid + 1, challenger, w1, {"from": step_game.address})
    assert view(wired, gid).status == GS.STEPPING


def test_bindProgram_refusals(wired, job_market, setting, submitter, w1, challenger):
    job_id, _ = new_job(job_market, submitter, shards=SHARDS, checkpointLeaves=LEAVES)
    with brownie.reverts(f"DisputeNotSubmitter: {job_id}, {w1.address.lower()}"):
        wired.bindProgram(job_id, _binding(setting), {"from": w1})
    root, entries, interval, shards, data, layout = _binding(setting)
    for bad in [(ZERO, entries, interval, shards, data, layout), (root, 0, interval, shards, data, layout),
                (root, entries, 0, shards, data, layout), (root, entries, interval, shards, data, []),
                (root, entries, interval, SHARDS + 1, data, layout)]:
        with brownie.reverts(f"DisputeProgramInvalid: {job_id}"):
            wired.bindProgram(job_id, bad, {"from": submitter})
    tx = wired.bindProgram(job_id, _binding(setting), {"from": submitter})
    assert tx.events["ProgramBound"]["program"] == "0x" + setting.program.commitment().hex()
    b = wired.programOf(job_id).dict()
    assert (str(b["root"]), int(b["entries"]), int(b["interval"]), int(b["shards"]), str(b["data"])) == (
        f"0x{root.hex()}", entries, 1, SHARDS, f"0x{data.hex()}")
    assert [int(k) for k in b["layout"]] == list(layout)
    with brownie.reverts(f"DisputeProgramBound: {job_id}"):
        wired.bindProgram(job_id, _binding(setting), {"from": submitter})
    later, _ = new_job(job_market, submitter, shards=SHARDS, checkpointLeaves=LEAVES)
    draw_task(job_market, later, {"from": w1})
    with brownie.reverts(f"DisputeProgramTooLate: {later}"):
        wired.bindProgram(later, _binding(setting), {"from": submitter})


def test_unboundJob_keepsTheCommittee(wired, job_market, setting, faulty, submitter, w1, challenger):
    job_id, _ = new_job(job_market, submitter, shards=SHARDS, checkpointLeaves=LEAVES, challengeWindow=50)
    honest, cheat = _leaves(setting, None), _leaves(setting, faulty)
    tid = run_task(job_market, job_id, w1, root=root_of(cheat), finalize=False)
    gid, _ = challenge_task(wired, tid, challenger, honest)
    txs = play(wired, gid, cheat, honest)
    assert "RefereesRequested" in txs[-1].events and view(wired, gid).status == GS.AWAITING_REFEREES


def test_stepGame_firstBatchPastThirtyTwoBits_reverts(step_game, setting, faulty, alice, bob):
    setup = list(setting.setup(alice, bob, setting.honest(), faulty, ZERO[:42]))
    setup[-1] = 1 << 32
    with brownie.reverts("StepSetupInvalid: 12"):
        step_game.open(tuple(setup), {"from": alice})


def test_headroom(wired, step_game):
    for contract in (wired, step_game):
        assert len(contract.bytecode) // 2 <= 22_118, contract._name
