"""StepPlayer (truetrain/dispute/step_player.py): two players, each built only from its own
side's checkpoints of the digits-MLP interval (tests/contracts/step_game_play.py), called in
turns against the real StepGame until it resolves: the honest one wins defending and
challenging; a player recreated before every call, defending and challenging, (same state dir) resumes, wins and builds
each piece of its data once; a player facing a silent opponent waits out its clock, calls
timeout and wins; an account that plays no side is refused."""

from __future__ import annotations

import functools

import brownie
import pytest
from brownie import chain
from web3 import Web3

from tests.contracts.step_game_play import CLOCK, FAULTY_STEP, STEPS, Setting
from tests.contracts.test_step_game import FAULTS, game, probe  # noqa: F401 (the fixtures)
from truetrain.dispute.step_player import StepPlayer
from truetrain.errors import DisputeError
from truetrain.trace.builder import updated_state
from truetrain.trace.game import CHALLENGER, DEFENDER, CheckpointLeaf
from truetrain.training.checkpoint import Checkpoint, checkpoint_commitment
from truetrain.training.trainer import train

PLAYED = [FAULTS[0], FAULTS[2]]  # the linear fc.0 (inputs from the batch) and the xent gradient


@pytest.fixture(scope="module")
def setting():
    return Setting()


@pytest.fixture(scope="module")
def w3():
    return Web3(Web3.HTTPProvider(brownie.web3.provider.endpoint_uri))


@functools.lru_cache
def faulty_checkpoints(setting, t: int) -> tuple[list[Checkpoint], object]:
    """A faulty party's own checkpoints: the honest ones up to FAULTY_STEP, the state its
    faulty step gives (element 5 of entry ``t`` flipped), its training on from there; and
    its edit of that step."""
    bad, edit = setting.faulty_trace(t, 5)
    before = setting.checkpoints[FAULTY_STEP]
    after = Checkpoint(before.step + 1, before.rng_key,
                       {**before.tensors, **updated_state(setting.program, bad)})
    assert checkpoint_commitment(after)[3] == bad.next_state_root
    rest, _ = train(setting.manifest, setting.shard, after, STEPS - FAULTY_STEP - 1, every=1)
    return setting.checkpoints[:FAULTY_STEP + 1] + rest, edit


class Side:
    """A party's account, own checkpoints and state dir; :meth:`player` a fresh StepPlayer
    (as a restarted daemon builds it), its sent moves and checkpoint reads recorded."""

    def __init__(self, setting, contract, w3, account, checkpoints, state_dir, edit=None):
        self.setting, self.contract, self.w3, self.account = setting, contract, w3, account
        self.checkpoints, self.dir, self.edit = checkpoints, state_dir, edit
        self.sent: list[str] = []
        self.read: list[int] = []

    def end(self) -> bytes:
        return CheckpointLeaf(*checkpoint_commitment(self.checkpoints[STEPS])).hash()

    def player(self) -> StepPlayer:
        def send(name, call):
            self.sent.append(name)
            self.w3.eth.wait_for_transaction_receipt(call.transact({"from": self.account.address}))

        def own(i):
            self.read.append(i)
            return self.checkpoints[i]

        edit = (lambda s: self.edit if s == FAULTY_STEP else None) if self.edit else None
        return StepPlayer(self.contract, self.w3, self.account.address, send, self.dir, self.setting.manifest,
                          self.setting.shard, own, program=self.setting.program, edit=edit)


def _sides(setting, game, w3, tmp_path, accounts, t: int, honest_role: int) -> list[Side]:
    contract = w3.eth.contract(address=game.address, abi=game.abi)
    bad, edit = faulty_checkpoints(setting, t)
    own = [(setting.checkpoints, None), (bad, edit)]
    if honest_role == CHALLENGER:
        own.reverse()
    return [Side(setting, contract, w3, a, c, tmp_path / a.address, e) for a, (c, e) in zip(accounts, own)]


def _open(game, setting, sides, probe) -> int:
    setup = list(setting.setup(sides[0].account, sides[1].account, setting.honest(), setting.honest(), probe))
    setup[9], setup[10] = sides[0].end(), sides[1].end()
    return game.open(setup, {"from": sides[0].account}).return_value


def _play(gid, players, calls: int = 100) -> list:
    """Call the players in turns until every one reports the game resolved."""
    for _ in range(calls):
        results = [p().step(gid) for p in players]
        if all(r is not None for r in results):
            return results
    raise AssertionError("the game did not resolve")


@pytest.mark.parametrize("honest_role", [DEFENDER, CHALLENGER], ids=["honestDefender", "honestChallenger"])
@pytest.mark.parametrize("t,kind,name", PLAYED, ids=[name for *_, name in PLAYED])
def test_players_honestWins(game, setting, probe, w3, tmp_path, alice, bob, t, kind, name, honest_role):
    sides = _sides(setting, game, w3, tmp_path, (alice, bob), t, honest_role)
    gid = _open(game, setting, sides, probe)
    players = [s.player() for s in sides]
    results = _play(gid, [lambda p=p: p for p in players])
    assert results == (["won", "lost"] if honest_role == DEFENDER else ["lost", "won"])
    assert tuple(game.disputed(gid))[:2] == (FAULTY_STEP, t)
    assert probe.winnerOf(gid) == sides[honest_role].account
    assert len(sides[0].sent) + len(sides[1].sent) == setting.expected_moves(t)
    assert sides[CHALLENGER].sent[-1] == "oneStep" and "timeout" not in sides[0].sent + sides[1].sent


@pytest.mark.parametrize("honest_role", [DEFENDER, CHALLENGER], ids=["honestDefender", "honestChallenger"])
def test_player_recreatedEveryCall_resumesAndWins(game, setting, probe, w3, tmp_path, alice, bob, honest_role):
    """The honest player is a new object at every call: it reads where the game stands from
    the chain and its data from disk, each checkpoint read once for the roots, the disputed
    step's once for its trace and, the challenger's, each once for the batch roots (the
    one-step)."""
    t = PLAYED[0][0]
    sides = _sides(setting, game, w3, tmp_path, (alice, bob), t, honest_role)
    gid = _open(game, setting, sides, probe)
    faulty = sides[1 - honest_role].player()
    players = [sides[honest_role].player, lambda: faulty]
    if honest_role == CHALLENGER:
        players.reverse()
    results = _play(gid, players)
    assert results[honest_role] == "won" and results[1 - honest_role] == "lost"
    assert probe.winnerOf(gid) == sides[honest_role].account
    batches = [*range(STEPS)] if honest_role == CHALLENGER else []
    assert sides[honest_role].read == [0, *range(1, STEPS + 1), FAULTY_STEP, *batches]
    assert sides[honest_role].sent[0] == "commitSteps"
    assert sides[CHALLENGER].sent[-1] == "oneStep"


def test_player_silentOpponent_timesOutAndWins(game, setting, probe, w3, tmp_path, alice, bob):
    sides = _sides(setting, game, w3, tmp_path, (alice, bob), PLAYED[0][0], DEFENDER)
    gid = _open(game, setting, sides, probe)
    honest = sides[0].player()
    assert honest.step(gid) is None and sides[0].sent == ["commitSteps"]
    chain.mine(CLOCK)  # the challenger's clock: CLOCK blocks from the commit's (the player waits one more)
    assert honest.step(gid) is None and sides[0].sent == ["commitSteps"]
    chain.mine(1)
    assert honest.step(gid) is None and sides[0].sent == ["commitSteps", "timeout"]
    assert honest.step(gid) == "won" and sides[1].player().step(gid) == "lost"
    assert probe.winnerOf(gid) == alice and probe.loserOf(gid) == bob


def test_player_notAParty_refused(game, setting, probe, w3, tmp_path, alice, bob, carol):
    sides = _sides(setting, game, w3, tmp_path, (alice, bob), PLAYED[0][0], DEFENDER)
    gid = _open(game, setting, sides, probe)
    outsider = Side(setting, sides[0].contract, w3, carol, setting.checkpoints, tmp_path / "carol").player()
    with pytest.raises(DisputeError, match=f"{carol.address} plays no side of StepGame {gid}"):
        outsider.step(gid)
    with pytest.raises(DisputeError, match=f"no StepGame {gid + 1} opened"):
        outsider.step(gid + 1)
