"""The step game's setting for the tests and the bench: a digits-MLP job trained three steps
(an interval of level 0), the honest traces, a faulty party's (one element of one
application of step 1 flipped), the game's setup (level 0's leaves: the checkpoints' hashes)
and a brownie driver (truetrain/trace/game.py plays the moves)."""

from __future__ import annotations

import math

import torch

from truetrain.hashing import keccak256
from truetrain.trace import build_trace, derive
from truetrain.trace.game import CheckpointLeaf, Party, batches_root, play
from truetrain.trace.kind_names import CONTRACTS
from truetrain.training import build_manifest, prepare_dataset
from truetrain.training.checkpoint import checkpoint_commitment
from truetrain.training.task import task_start
from truetrain.training.trainer import train
from truetrain.numerics.tensor_merkle import CHUNK
from truetrain.training.merkle import merkle_root

STEPS = 3  # the interval: three steps (not a power of two: the trees' padding is walked)
FAULTY_STEP = 1
CLOCK = 50  # blocks a party
SEED = 11
# the layout hash of the one-entry kind games' start (step_kinds_play): their state tensors
# are no checkpoint's, so its hash stands in; the digits games use the checkpoints' own
LAYOUT_HASH = keccak256(b"a kind game: its inputs' layout")


def digits_job():
    """(manifest, shard, checkpoints 0..STEPS) of the digits MLP, repro, SGD with momentum."""
    from tests.training.conftest import data_ref

    shards, test = prepare_dataset("digits", num_shards=1, seed=SEED)
    manifest = build_manifest(name="digits-test", seed=SEED, numeric_mode="repro",
                              model={"kind": "mlp", "widths": [64, 128, 10]},
                              optimizer={"kind": "sgd", "lr": 0.1, "momentum": 0.9}, batch_size=32,
                              steps_per_task=STEPS, checkpoint_interval=1, rounds=1,
                              shards=[data_ref(s) for s in shards], test_set=data_ref(test))
    checkpoints, _ = train(manifest, shards[0], task_start(manifest, None, 0, 0), STEPS, every=1)
    return manifest, shards[0], checkpoints


class Setting:
    """The honest party's traces and the pieces of a game's setup."""

    def __init__(self):
        self.manifest, self.shard, self.checkpoints = digits_job()
        self.program = derive(self.manifest)
        self.traces = [build_trace(self.manifest, self.shard, self.checkpoints[s], keep=True) for s in range(STEPS)]
        self.batch_roots = [merkle_root(tr.batch_roots) for tr in self.traces]
        self.start = self.checkpoint(0)

    def checkpoint(self, s: int) -> CheckpointLeaf:
        """Checkpoint ``s``'s hash preimage: its step and rng key, its layout hash and its
        tensors root (the state root of trace ``s``, the last trace's next one for STEPS)."""
        return CheckpointLeaf(*checkpoint_commitment(self.checkpoints[s]))

    def honest(self) -> Party:
        return Party(self.program, [tr.next_state_root for tr in self.traces], dict(enumerate(self.traces)),
                     self.batch_roots, self.start)

    def faulty(self, t: int, element: int) -> Party:
        """A party whose step FAULTY_STEP flips the significand's top bit of one element of entry ``t``:
        ``element`` or the next after it whose flip reaches the step's new state (a flip a
        ReLU or the loss's metrics drop changes nothing the game is about); its later state
        roots are its own (they differ from the honest ones)."""
        bad, _ = self.faulty_trace(t, element)
        roots = [tr.next_state_root for tr in self.traces]
        roots[FAULTY_STEP] = bad.next_state_root
        for s in range(FAULTY_STEP + 1, STEPS):
            roots[s] = keccak256(roots[s - 1] + b"faulty")
        return Party(self.program, roots, {**dict(enumerate(self.traces)), FAULTY_STEP: bad}, self.batch_roots,
                     self.start)

    def faulty_trace(self, t: int, element: int):
        """(trace, edit): step FAULTY_STEP with ``element`` of entry ``t``, or the first after
        it whose flip reaches the new state, flipped (see :meth:`faulty`)."""
        numel = math.prod(self.program.entries[t].shape)
        for k in range(min(numel, 64)):
            edit = _flip(t, (element + k) % numel)
            bad = build_trace(self.manifest, self.shard, self.checkpoints[FAULTY_STEP], keep=True, edit=edit)
            if bad.next_state_root != self.traces[FAULTY_STEP].next_state_root:
                break
        return bad, edit

    def setup(self, defender, challenger, d: Party, c: Party, receiver, clock: int = CLOCK) -> tuple:
        return (defender.address, challenger.address, receiver, self.program.root(), len(self.program),
                self.program.layout(), self.start.hash(), batches_root(self.batch_roots), STEPS,
                d.end.hash(), c.end.hash(), clock, 0)

    def expected_moves(self, t: int) -> int:
        """2 · (⌈log2 steps⌉ + ⌈log2 entries⌉ + ⌈log2 leaves of entry t⌉) + 7."""
        app = self.program.entries[t]
        leaves = -(-math.prod(app.shape) * app.words // CHUNK)
        return 2 * sum(_log2(n) for n in (STEPS, len(self.program), leaves)) + 7


def _flip(t: int, element: int):
    def edit(u, out):
        if u != t:
            return out
        out = out.clone()
        wide = out.dtype == torch.float64
        flat = out.view(-1).view(torch.int64 if wide else torch.int32)
        flat[element] ^= 1 << (51 if wide else 22)  # the significand's top bit (the quantised products drop a low one)
        return out
    return edit


def deploy_step_game(StepGame, kinds, deployer):
    """A StepGame with every kind of the contracts ``kinds`` (brownie containers) registered."""
    deployed = {c._name: c.deploy({"from": deployer}) for c in kinds}
    pairs = [(k, deployed[name]) for name in deployed for k in CONTRACTS[name]]
    return StepGame.deploy([kind_id(k) for k, _ in pairs], [c for _, c in pairs], {"from": deployer})


def kind_id(name: str) -> str:
    """A kind's key in StepGame.verifierOf: keccak256 of its name."""
    return "0x" + keccak256(name.encode()).hex()


def _log2(n: int) -> int:
    return (n - 1).bit_length()


def drive(game, gid, parties, accounts, stop=None):
    """Play game ``gid`` (brownie) with ``parties`` (defender, challenger) sent from
    ``accounts``; ``stop(stage, turn)`` true ends the play there (for the timeouts)."""
    def status():
        st = game.status(gid)
        if stop is not None and stop(st[0], st[1]):
            return (9, *st[1:])
        return st

    def send(turn, fn, args):
        return getattr(game, fn)(gid, *args, {"from": accounts[turn]})

    return play(parties, status, lambda: game.disputed(gid), send, lambda tx: tx.gas_used)
