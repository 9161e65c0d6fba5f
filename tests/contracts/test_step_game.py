"""StepGame (contracts/StepGame.sol): levels 1-3 of a repro dispute and the one-step, played
on real digits-MLP traces (tests/contracts/step_game_play.py), opened on level 0's leaves
(checkpoint hashes): the honest side wins whether it defends or challenges, on the kind of
every application a fault is put in; each level's clock ends the game against the party that
stalls; a checkpoint preimage that does not match its hash reverts; every revert by its error
name; the number of moves is the levels' ⌈log2 size⌉ summed, doubled, plus 7."""

from __future__ import annotations

import brownie
import numpy as np
import pytest
from brownie import chain, history

from tests.contracts.step_game_play import CLOCK, FAULTY_STEP, STEPS, Setting, deploy_step_game, drive, kind_id
from truetrain.hashing import keccak256
from truetrain.merkle import tree_levels
from truetrain.trace.game import CHALLENGER, DEFENDER, Party
from truetrain.trace.kind_names import CONTRACTS
from truetrain.training.merkle import leaf_node, merkle_root

KINDS_XENT = list(CONTRACTS["StepKindsXent"])
ZERO = "0x" + "00" * 32
NO_START = (0, ZERO, ZERO, ZERO)  # the challenger's commitSteps: the start is not read
# (entry, kind): a fault in each; every one flows into the step's update (the trace builder's
# xent_grad recomputes its sums: a fault in the partial sums (4) or the loss (5) changes no state)
FAULTS = [(0, "linear", "linear"), (2, "relu", "relu mask"), (6, "xent_grad", "xent gradient"),
          (8, "permute", "permute"), (10, "weight_grad_transposed", "weight gradient"), (11, "column_sum", "column sum"),
          (13, "linear", "linear (input gradient)"), (14, "apply_mask", "apply_mask"), (21, "sgd", "sgd buffer"),
          (26, "sgd", "sgd parameter")]


_kind = kind_id


@pytest.fixture(scope="module")
def setting():
    return Setting()


@pytest.fixture(scope="module")
def game(StepGame, StepKindsCore, StepKindsXent, StepKindsQuant, deployer):
    return deploy_step_game(StepGame, (StepKindsCore, StepKindsXent, StepKindsQuant), deployer)


@pytest.fixture(scope="module")
def probe(StepGameProbe, deployer):
    return StepGameProbe.deploy({"from": deployer})


def _element(setting, t: int, seed: int) -> int:
    return int(np.random.default_rng(seed).integers(int(np.prod(setting.program.entries[t].shape))))


def _open(game, setting, parties, accounts, probe, clock=CLOCK):
    tx = game.open(setting.setup(accounts[0], accounts[1], *parties, probe, clock), {"from": accounts[0]})
    return tx.return_value


@pytest.mark.parametrize("honest_role", [DEFENDER, CHALLENGER], ids=["honestDefender", "honestChallenger"])
@pytest.mark.parametrize("t,kind,name", FAULTS, ids=[name for *_, name in FAULTS])
def test_fullGame_honestSideWins(game, setting, probe, alice, bob, t, kind, name, honest_role):
    assert setting.program.entries[t].kind == kind  # the entry is the one the id names
    honest, faulty = setting.honest(), setting.faulty(t, _element(setting, t, t))
    parties = (honest, faulty) if honest_role == DEFENDER else (faulty, honest)
    accounts = (alice, bob)
    gid = _open(game, setting, parties, accounts, probe)
    moves = drive(game, gid, parties, accounts)
    step, app, start = game.disputed(gid)
    assert (step, app) == (FAULTY_STEP, t)
    assert start == "0x" + setting.traces[FAULTY_STEP].state_root.hex()
    winner = accounts[honest_role]
    assert probe.winnerOf(gid) == winner and probe.loserOf(gid) == accounts[1 - honest_role]
    assert game.status(gid)[0] == 9
    assert len(moves) == setting.expected_moves(t), [m.function for m in moves]
    assert max(m.gas for m in moves) < 10_000_000


def _stalled(game, setting, probe, accounts, stage, turn, clock=CLOCK):
    """A game (honest defender, faulty challenger on the linear fc.0) played to (stage, turn)."""
    parties = (setting.honest(), setting.faulty(0, 5))
    gid = _open(game, setting, parties, accounts, probe, clock)
    drive(game, gid, parties, accounts, stop=lambda s, u: (s, u) == (stage, turn))
    return gid, parties


STALLS = [(1, DEFENDER), (1, CHALLENGER), (2, DEFENDER), (2, CHALLENGER), (3, DEFENDER), (3, CHALLENGER),
          (4, DEFENDER), (4, CHALLENGER), (5, DEFENDER), (6, DEFENDER), (6, CHALLENGER), (7, DEFENDER),
          (8, CHALLENGER)]


@pytest.mark.parametrize("stage,turn", STALLS)
def test_timeout_stalledPartyLoses(game, setting, probe, alice, bob, carol, stage, turn):
    accounts = (alice, bob)
    gid, _ = _stalled(game, setting, probe, accounts, stage, turn)
    assert tuple(game.status(gid)[:2]) == (stage, turn)
    left = game.status(gid)[2][turn] - (chain.height - game.status(gid)[3])
    with brownie.reverts(f"StepClockRunning: {left - 1}"):
        game.timeout(gid, {"from": carol})
    chain.mine(CLOCK + 1)
    tx = game.timeout(gid, {"from": carol})
    assert tx.events["GameResolved"]["reason"] == 2
    assert probe.winnerOf(gid) == accounts[1 - turn] and probe.loserOf(gid) == accounts[turn]
    with brownie.reverts(f"StepStageInvalid: {gid}, 9"):
        game.timeout(gid, {"from": carol})


def test_refusedVerdict_endsTheGameAnyway_andIsDeliveredLater(game, setting, probe, alice, bob, carol):
    """A receiver that refuses the verdict cannot keep the game from ending: the deciding move
    goes through (the one-step here), the verdict waits, and anyone delivers it once the
    receiver takes it; there is then nothing left to deliver."""
    parties, accounts = (setting.honest(), setting.faulty(0, 5)), (alice, bob)
    gid = _open(game, setting, parties, accounts, probe)
    probe.setRefusing(True, {"from": carol})
    drive(game, gid, parties, accounts)
    ended = history[-1]
    assert ended.fn_name == "oneStep" and ended.status == 1
    assert ended.events["GameResolved"]["winner"] == alice and "VerdictUndelivered" in ended.events
    assert game.status(gid)[0] == 9 and probe.winnerOf(gid) == "0x" + "00" * 20
    with brownie.reverts(f"ProbeRefused: {gid}"):
        game.deliver(gid, {"from": carol})
    probe.setRefusing(False, {"from": carol})
    tx = game.deliver(gid, {"from": carol})
    assert "VerdictDelivered" in tx.events
    assert (probe.winnerOf(gid), probe.loserOf(gid)) == (alice, bob)
    with brownie.reverts(f"StepNothingToDeliver: {gid}"):
        game.deliver(gid, {"from": carol})


def test_lateMove_revertsClockExpired(game, setting, probe, alice, bob):
    gid, parties = _stalled(game, setting, probe, (alice, bob), 1, DEFENDER, clock=5)
    chain.mine(6)
    with brownie.reverts("StepClockExpired: 7, 5"):
        game.commitSteps(gid, *parties[0].commit_steps(), {"from": alice})


def test_open_rejectsBadSetups(game, setting, probe, alice, bob):
    h = setting.honest()
    good = list(setting.setup(alice, bob, h, setting.faulty(0, 5), probe))
    for field, value in ((0, bob.address), (1, ZERO[:42]), (4, 0), (5, []), (5, [len(setting.program.entries) + 1] + [0] * 7), (8, 0),
                         (10, good[9]), (11, 0), (11, 2**40 + 1)):
        bad = list(good)
        bad[field] = value
        with brownie.reverts(f"StepSetupInvalid: {field if field != 0 else 0}"):
            game.open(bad, {"from": alice})


def test_constructor_rejectsUnpairedKinds(StepGame, deployer, alice):
    with brownie.reverts("StepKindsInvalid: "):
        StepGame.deploy([_kind("linear")], [], {"from": deployer})
    with brownie.reverts("StepKindsInvalid: "):
        StepGame.deploy([_kind("linear")], [ZERO[:42]], {"from": deployer})
    with brownie.reverts("StepKindsInvalid: "):
        StepGame.deploy([_kind("linear")] * 2, [alice, alice], {"from": deployer})


def test_moves_revertOutOfTurnStageOrOpening(game, setting, probe, alice, bob):
    parties = (setting.honest(), setting.faulty(0, 5))
    gid = _open(game, setting, parties, (alice, bob), probe)
    mine = parties[0].commit_steps()
    with brownie.reverts(f"StepNotYourTurn: {alice.address.lower()}"):
        game.commitSteps(gid, *mine, {"from": bob})
    with brownie.reverts(f"StepStageInvalid: {gid}, 1"):
        game.reveal(gid, ZERO, ZERO, {"from": alice})
    with brownie.reverts(f"StepStageInvalid: {gid + 1}, 0"):
        game.commitSteps(gid + 1, *mine, {"from": alice})
    theirs = parties[1].commit_steps(opens_start=False)
    with brownie.reverts(f"MerkleProofInvalid: {_b(theirs[0])}, {STEPS - 1}, {parties[0].step_roots[-1]}"):
        game.commitSteps(gid, theirs[0], mine[1], theirs[2], mine[3], {"from": alice})
    game.commitSteps(gid, *mine, {"from": alice})
    game.commitSteps(gid, *theirs, {"from": bob})
    left, right = Party.children(parties[0].l1, 0, 2)
    swapped = keccak256(b"\x01" + right + left)
    with brownie.reverts(f"StepOpeningInvalid: {parties[0].l1[-1][0]}, {swapped}"):
        game.reveal(gid, "0x" + right.hex(), "0x" + left.hex(), {"from": alice})
    with brownie.reverts(f"StepStageInvalid: {gid}, 2"):
        game.pick(gid, True, {"from": bob})


def _b(h: str) -> bytes:
    return bytes.fromhex(h[2:])


def _at(game, setting, probe, accounts, stage, turn, t=0):
    parties = (setting.honest(), setting.faulty(t, 5))
    gid = _open(game, setting, parties, accounts, probe)
    drive(game, gid, parties, accounts, stop=lambda s, u: (s, u) == (stage, turn))
    return gid, parties


def test_padding_nonZeroNode_reverts(game, setting, probe, alice, bob):
    """3 steps: leaf 3 is padding. A challenger whose tree holds a node there (its first two
    leaves the honest ones) cannot reveal it: StepPaddingInvalid."""
    d = setting.honest()
    mine = keccak256(b"the challenger's end")
    levels = tree_levels([leaf_node(r) for r in d.step_roots[:2]] + [leaf_node(mine), keccak256(b"not padding")])
    setup = list(setting.setup(alice, bob, d, d, probe))
    setup[10] = setting.start.after(STEPS, mine).hash()
    gid = game.open(setup, {"from": alice}).return_value
    game.commitSteps(gid, *d.commit_steps(), {"from": alice})
    game.commitSteps(gid, "0x" + levels[-1][0].hex(), "0x" + mine.hex(),
                     ["0x" + levels[0][3].hex(), "0x" + levels[1][0].hex()], NO_START, {"from": bob})
    for who, lv in ((alice, d.l1), (bob, levels)):  # the left halves agree: the descent goes right
        game.reveal(gid, *["0x" + x.hex() for x in Party.children(lv, 0, 2)], {"from": who})
    game.reveal(gid, *["0x" + x.hex() for x in Party.children(d.l1, 1, 1)], {"from": alice})
    with brownie.reverts("StepPaddingInvalid: 3, 0"):
        game.reveal(gid, *["0x" + x.hex() for x in Party.children(levels, 1, 1)], {"from": bob})


def test_leaves_areTheCheckpointsHashes(game, setting, probe, alice, bob):
    """Level 0's leaves: the start is checkpoint 0's hash, the honest end checkpoint STEPS's
    (each the checkpoint's own hash, its tensors root the trace's state root); the
    defender's first move opens the start."""
    h, f = setting.honest(), setting.faulty(0, 5)
    assert setting.start.step == 0 and setting.checkpoints[STEPS].step == STEPS
    assert [setting.checkpoint(s).hash() for s in range(STEPS + 1)] == [c.hash() for c in setting.checkpoints]
    assert [setting.checkpoint(s).tensors_root for s in range(STEPS + 1)] == \
        [tr.state_root for tr in setting.traces] + [setting.traces[-1].next_state_root]
    assert h.end == setting.checkpoint(STEPS) and h.end.rng_key == setting.checkpoints[0].rng_key
    gid = _open(game, setting, (h, f), (alice, bob), probe)
    assert game.disputed(gid)[2] == "0x" + setting.start.hash().hex()
    tx = game.commitSteps(gid, *h.commit_steps(), {"from": alice})
    assert dict(tx.events["StartOpened"]) == {"id": gid, "step": 0, "rngKey": "0x" + setting.start.rng_key.hex(),
                                              "layoutHash": "0x" + setting.start.layout_hash.hex(),
                                              "tensorsRoot": "0x" + setting.traces[0].state_root.hex()}
    assert tx.events["StepsCommitted"]["end"] == "0x" + h.step_roots[-1].hex()
    assert game.disputed(gid)[2] == "0x" + setting.traces[0].state_root.hex()
    tx = game.commitSteps(gid, *f.commit_steps(opens_start=False), {"from": bob})
    assert "StartOpened" not in tx.events and tx.events["StepsCommitted"]["end"] == "0x" + f.step_roots[-1].hex()


def test_commitSteps_wrongStartPreimage_reverts(game, setting, probe, alice, bob, carol):
    """Each field of the start's preimage changed: StepPreimageInvalid; the defender that
    cannot open the start loses on its clock."""
    h = setting.honest()
    gid = _open(game, setting, (h, setting.faulty(0, 5)), (alice, bob), probe)
    root, end, proof, _ = h.commit_steps()
    s = setting.start
    for wrong in (s._replace(step=1), s._replace(rng_key=keccak256(b"another key")),
                  s._replace(layout_hash=keccak256(b"another layout")),
                  s._replace(tensors_root=setting.traces[1].state_root)):
        with brownie.reverts(f"StepPreimageInvalid: {s.hash()}, {wrong.hash()}"):
            game.commitSteps(gid, root, end, proof, wrong.args(), {"from": alice})
    chain.mine(CLOCK + 1)
    game.timeout(gid, {"from": carol})
    assert probe.winnerOf(gid) == bob and probe.loserOf(gid) == alice


def test_commitSteps_endRootNotGivingEndHash_reverts(game, setting, probe, alice, bob):
    """A party's level-1 root must end on the state root its end hash commits to: the defender
    ending on the challenger's root, the challenger on the defender's, each StepPreimageInvalid."""
    d, c = setting.honest(), setting.faulty(0, 5)
    gid = _open(game, setting, (d, c), (alice, bob), probe)
    mine, theirs = d.commit_steps(), c.commit_steps(opens_start=False)
    with brownie.reverts(f"StepPreimageInvalid: {d.end.hash()}, {c.end.hash()}"):
        game.commitSteps(gid, mine[0], theirs[1], mine[2], mine[3], {"from": alice})
    game.commitSteps(gid, *mine, {"from": alice})
    with brownie.reverts(f"StepPreimageInvalid: {c.end.hash()}, {d.end.hash()}"):
        game.commitSteps(gid, theirs[0], mine[1], theirs[2], NO_START, {"from": bob})
    game.commitSteps(gid, *theirs, {"from": bob})
    assert game.status(gid)[0] == 2


@pytest.mark.parametrize("wrong_role", [DEFENDER, CHALLENGER], ids=["defender", "challenger"])
def test_commitSteps_rightRootWrongStepCount_loses(game, setting, probe, alice, bob, carol, wrong_role):
    """A party whose end hash holds the honest state root at step STEPS + 1 (one step counted
    too many): its end root does not give its end hash, it cannot commit and loses on its clock."""
    h = setting.honest()
    claimed = setting.start.after(STEPS + 1, h.step_roots[-1]).hash()
    setup = list(setting.setup(alice, bob, h, h, probe))
    setup[9 + wrong_role] = claimed
    gid = game.open(setup, {"from": alice}).return_value
    if wrong_role == CHALLENGER:
        game.commitSteps(gid, *h.commit_steps(), {"from": alice})
    with brownie.reverts(f"StepPreimageInvalid: {claimed}, {h.end.hash()}"):
        game.commitSteps(gid, *h.commit_steps(wrong_role == DEFENDER), {"from": (alice, bob)[wrong_role]})
    chain.mine(CLOCK + 1)
    game.timeout(gid, {"from": carol})
    assert probe.winnerOf(gid) == (alice, bob)[1 - wrong_role]
    assert probe.loserOf(gid) == (alice, bob)[wrong_role]


def test_trace_rejectsWrongLayoutOrState(game, setting, probe, alice, bob):
    gid, (d, c) = _at(game, setting, probe, (alice, bob), 3, DEFENDER)
    (claim,) = d.commit_trace(FAULTY_STEP)
    tr = d.traces[FAULTY_STEP]
    bad = list(claim)
    bad[1] = list(claim[1])[::-1]
    with brownie.reverts("StepLayoutInvalid: "):
        game.commitTrace(gid, bad, {"from": alice})
    bad = list(claim)
    bad[2] = list(claim[2])[::-1]
    wrong_start = merkle_root(tr.state_roots[::-1])
    with brownie.reverts(f"MerkleProofInvalid: {d.l1[-1][0]}, 0, {wrong_start}"):
        game.commitTrace(gid, bad, {"from": alice})
    game.commitTrace(gid, claim, {"from": alice})
    with brownie.reverts(f"StepStateInconsistent: {leaf_node(c.step_roots[FAULTY_STEP])}, "
                         f"{leaf_node(tr.next_state_root)}"):
        game.commitTrace(gid, claim, {"from": bob})  # the honest trace is not the challenger's end state
    with brownie.reverts(f"StepStateInconsistent: {tr.state_root}, {wrong_start}"):
        game.commitTrace(gid, bad, {"from": bob})


def test_pick_paddingSubtree_reverts(game, setting, probe, alice, bob):
    """The xent gradient (32 x 10) is 5 leaves: the subtree of leaves 6-7 cannot be picked."""
    gid, (d, _) = _at(game, setting, probe, (alice, bob), 6, CHALLENGER, t=6)
    game.pick(gid, True, {"from": bob})
    game.reveal(gid, *["0x" + x.hex() for x in Party.children(d.output(FAULTY_STEP, 6).levels, 1, 2)],
                {"from": alice})
    with brownie.reverts("StepPickOutOfRange: 3, 1"):
        game.pick(gid, True, {"from": bob})
    with brownie.reverts(f"StepNotYourTurn: {bob.address.lower()}"):
        game.pick(gid, False, {"from": alice})


def _with(claim, field, value):
    out = list(claim)
    out[field] = value
    return out


def test_oneStep_rejectsBadClaims(game, setting, probe, alice, bob):
    gid, (d, c) = _at(game, setting, probe, (alice, bob), 8, CHALLENGER)
    index = game.status(gid)[4]
    (claim,) = c.one_step(FAULTY_STEP, 0, index, d.chunk(FAULTY_STEP, 0, index))
    with brownie.reverts("StepEntryInvalid: "):
        game.oneStep(gid, _with(claim, 0, setting.program.entries[1].encode()), {"from": bob})
    with brownie.reverts(f"StepElementOutOfRange: {index * 64 + 64}, 4096"):
        game.oneStep(gid, _with(claim, 2, 64), {"from": bob})
    with brownie.reverts("StepInputInvalid: 3"):
        game.oneStep(gid, _with(claim, 3, claim[3][:2]), {"from": bob})
    with brownie.reverts("StepKindArity: 3, 4, 2"):
        game.oneStep(gid, _with(claim, 6, claim[6][:2]), {"from": bob})
    bad = list(claim)
    bad[1] = bytes(256)
    with brownie.reverts(f"StepOpeningInvalid: {d.output(FAULTY_STEP, 0).levels[0][index]}, "
                         f"{leaf_node(keccak256(bytes(256)))}"):
        game.oneStep(gid, bad, {"from": bob})
    bad = list(claim)
    bad[3] = [claim[3][1], claim[3][0], claim[3][2]]
    batch = merkle_root(setting.traces[FAULTY_STEP].batch_roots)  # input 0 is the batch's inputs
    with brownie.reverts(f"MerkleProofInvalid: {batch}, 0, {_b(claim[3][1][0])}"):
        game.oneStep(gid, bad, {"from": bob})
    game.oneStep(gid, claim, {"from": bob})
    assert probe.winnerOf(gid) == alice


def test_oneStep_kindWithoutVerifier_reverts(StepGame, StepKindsXent, setting, probe, deployer, alice, bob):
    xent = StepKindsXent.deploy({"from": deployer})
    only = StepGame.deploy([_kind(k) for k in KINDS_XENT], [xent] * len(KINDS_XENT), {"from": deployer})
    gid, (d, c) = _at(only, setting, probe, (alice, bob), 8, CHALLENGER)
    index = only.status(gid)[4]
    (claim,) = c.one_step(FAULTY_STEP, 0, index, d.chunk(FAULTY_STEP, 0, index))
    with brownie.reverts(f"StepKindUnsupported: {keccak256(b'linear')}"):
        only.oneStep(gid, claim, {"from": bob})


def test_kinds_refuseUnknownKindOrMissingOpenings(StepKindsCore, StepKindsXent, deployer):
    entry = (keccak256(b"conv"), 0, 1, [2], [0], [], [1, 2])
    for container in (StepKindsCore, StepKindsXent):
        kinds = container.deploy({"from": deployer})
        with brownie.reverts(f"StepKindUnknown: {keccak256(b'conv')}"):
            kinds.element(entry, [(ZERO, 1, 2)], 0, [])
    with brownie.reverts("StepKindArity: 3, 1, 0"):
        kinds.element((keccak256(b"xent_grad"),) + entry[1:], [(ZERO, 1, 2)], 0, [])


def test_bytecodeHeadroom(StepGame, StepKindsCore, StepKindsXent):
    for c in (StepGame, StepKindsCore, StepKindsXent):
        assert len(c._build["deployedBytecode"]) // 2 <= 22_118, c._name
