"""A party of the step game (contracts/StepGame.sol, docs/onestep.md "The step game"): its
commitments (the state roots after each step of the disputed interval, the traces of the
steps it is asked about) and every move's arguments, from its own computation; :func:`play`
drives a game between two parties to its end through a ``send`` callable (brownie in the
tests, web3 in the bench). The game opens on level 0's leaves, checkpoint hashes
(:func:`checkpoint_leaf`: :func:`truetrain.training.checkpoint.commitment_hash`, the one place
they are computed; a checkpoint's parts from ``checkpoint_commitment``).

Nothing here is on a worker's normal path. The challenger's one-step opens earlier entries
against the *defender's* trace root: the proof's siblings left of the disputed entry are
agreed (the party's own), the others are the defender's nodes revealed on the way down."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from ..errors import TraceError
from ..merkle import tree_levels
from ..numerics.tensor_merkle import CHUNK, CHUNK_BYTES, TensorTree
from ..training.checkpoint import commitment_hash
from ..training.merkle import leaf_node, merkle_proof, merkle_root
from .builder import Trace, committed
from .openings import game_openings
from .program import APP, BATCH, STATE, Program

# the contract's stages
STEPS, STEP_DESCENT, TRACE, TRACE_DESCENT, OUTPUT, ELEMENT_DESCENT, CHUNK_STAGE, ONE_STEP, DONE = range(1, 10)
DEFENDER, CHALLENGER = 0, 1


def checkpoint_leaf(step: int, rng_key: bytes, layout_hash: bytes, tensors_root: bytes) -> bytes:
    """A checkpoint's hash, level 0's leaf: ``keccak256(abi.encode(uint256 step, bytes32
    rngKey, bytes32 layoutHash, bytes32 tensorsRoot))``, the tensors root the state root
    (:attr:`Trace.state_root`). StepGame checks the same bytes."""
    return commitment_hash(step, rng_key, layout_hash, tensors_root)


class CheckpointLeaf(NamedTuple):
    """A checkpoint hash's preimage (StepGame's ``Checkpoint``)."""

    step: int
    rng_key: bytes
    layout_hash: bytes
    tensors_root: bytes

    def hash(self) -> bytes:
        return checkpoint_leaf(*self)

    def after(self, steps: int, tensors_root: bytes) -> "CheckpointLeaf":
        """The checkpoint ``steps`` steps on, at state root ``tensors_root`` (a task's rng key
        and layout do not change)."""
        return self._replace(step=self.step + steps, tensors_root=tensors_root)

    def args(self) -> tuple:
        return (self.step, _hex(self.rng_key), _hex(self.layout_hash), _hex(self.tensors_root))


def _hex(b: bytes) -> str:
    return "0x" + b.hex()


def _hexes(xs) -> list[str]:
    return [_hex(x) for x in xs]


@dataclass
class Party:
    """One side: ``step_roots[i]`` its state root after step ``i`` of the interval,
    ``traces[i]`` its trace of step ``i`` (built with ``keep=True``; needed for the disputed
    step only), ``batch_roots[first_batch + i]`` step ``i``'s batch root (public: the shard's;
    the list the game's ``batches`` is the root of: the interval's steps, or a job's data
    leaves, ``job_batch_leaves``), ``start`` the interval's agreed start checkpoint (its hash
    level 0's)."""

    program: Program
    step_roots: list[bytes]
    traces: dict[int, Trace]
    batch_roots: list[bytes]
    start: CheckpointLeaf
    seen: dict[tuple[int, int], bytes] = field(default_factory=dict)  # the defender's revealed nodes, level 2
    first_batch: int = 0

    def __post_init__(self):
        self.l1 = tree_levels([leaf_node(r) for r in self.step_roots])
        self._l2: dict[int, list] = {}
        self._out: dict[tuple[int, int], TensorTree] = {}

    def trace(self, step: int) -> Trace:
        if step not in self.traces:
            raise TraceError(f"no trace of step {step} kept")
        return self.traces[step]

    def l2(self, step: int) -> list:
        if step not in self._l2:
            self._l2[step] = tree_levels([leaf_node(x) for x in self.trace(step).leaves()])
        return self._l2[step]

    def output(self, step: int, t: int) -> TensorTree:
        if (step, t) not in self._out:
            self._out[step, t] = TensorTree(committed(self.trace(step).outputs[t]))
        return self._out[step, t]

    # --- the moves' arguments -----------------------------------------------------------

    @property
    def end(self) -> CheckpointLeaf:
        """This party's end checkpoint (its hash the party's level-0 claim)."""
        return self.start.after(len(self.step_roots), self.step_roots[-1])

    def commit_steps(self, opens_start: bool = True) -> tuple:
        """``commitSteps``'s arguments; the start's preimage is the defender's to give (the
        challenger's is not read: zeros)."""
        n = len(self.step_roots)
        start = self.start.args() if opens_start else (0, *[_hex(bytes(32))] * 3)
        return (_hex(merkle_root(self.step_roots)), _hex(self.step_roots[-1]),
                _hexes(merkle_proof(self.step_roots, n - 1)), start)

    @staticmethod
    def children(levels, index: int, height: int) -> tuple[bytes, bytes]:
        below = levels[height - 1]
        return below[2 * index], below[2 * index + 1]

    def commit_trace(self, step: int) -> tuple:
        tr, layout = self.trace(step), self.program.layout()
        leaves = tr.leaves()
        updates = [at - 1 for at in layout if at]
        start = merkle_proof(self.step_roots, step - 1) if step else []
        return ((_hex(tr.root()), layout, _hexes(tr.state_roots), _hexes(tr.roots[t] for t in updates),
                 [_hexes(merkle_proof(leaves, t)) for t in updates], _hexes(start)),)

    def open_output(self, step: int, t: int) -> tuple:
        return (self.program.entries[t].encode(), _hexes(merkle_proof(self.program.leaves(), t)),
                _hex(self.trace(step).roots[t]))

    def chunk(self, step: int, t: int, leaf: int) -> bytes:
        return self.output(step, t).data[leaf * CHUNK_BYTES:(leaf + 1) * CHUNK_BYTES]

    def pick(self, step: int, t: int, index: int, height: int, left: bytes) -> bool:
        """Go right when the defender's left child is this party's own."""
        return self.children(self.output(step, t).levels, index, height)[0] == left

    def one_step(self, step: int, t: int, leaf: int, theirs: bytes) -> tuple:
        """The one-step claim on the first word of the defender's chunk ``theirs`` unlike ours."""
        mine = self.chunk(step, t, leaf)
        word = next((w for w in range(CHUNK) if mine[4 * w:4 * w + 4] != theirs[4 * w:4 * w + 4]), 0)
        app, tr = self.program.entries[t], self.trace(step)
        element = (leaf * CHUNK + word) // app.words
        inputs = []
        for ref in app.inputs:
            if ref.source == APP:
                inputs.append((_hex(tr.roots[ref.index]), _hexes(self._agreed_proof(step, ref.index))))
            elif ref.source == STATE:
                inputs.append((_hex(tr.state_roots[ref.index]), _hexes(merkle_proof(tr.state_roots, ref.index))))
            else:
                inputs.append((_hex(tr.batch_roots[ref.index]), _hexes(merkle_proof(tr.batch_roots, ref.index))))
        batch = any(r.source == BATCH for r in app.inputs)
        return ((app.encode(), theirs, word, inputs, _hex(merkle_root(tr.batch_roots)) if batch else _hex(bytes(32)),
                 _hexes(merkle_proof(self.batch_roots, self.first_batch + step)) if batch else [],
                 game_openings(self.program, tr, t, element)),)

    def _agreed_proof(self, step: int, k: int) -> list[bytes]:
        """Entry ``k``'s proof against the defender's trace root (see the module's note)."""
        levels, proof = self.l2(step), []
        for h in range(len(levels) - 1):
            sib = (k >> h) ^ 1
            proof.append(self.seen.get((h, sib), levels[h][sib]))
        return proof


@dataclass
class Move:
    """One transaction of a game: who sent it, the function, the level it belongs to."""

    party: int
    function: str
    level: int
    gas: int


def play(parties: tuple[Party, Party], status: Callable[[], tuple], disputed: Callable[[], tuple],
         send: Callable[[int, str, tuple], object], gas_of: Callable[[object], int]) -> list[Move]:
    """Drive a game to its end: ``status()`` the contract's ``status(id)`` (stage, turn, ...,
    index, height), ``disputed()`` its ``disputed(id)`` (step, app, start); ``send(party,
    function, args)`` sends one move (the id first) and returns what ``gas_of`` reads."""
    moves: list[Move] = []
    pending: tuple[bytes, bytes] | None = None
    leaf_chunk = b""
    levels = {STEPS: 1, STEP_DESCENT: 1, TRACE: 2, TRACE_DESCENT: 2}
    while True:
        stage, turn, _clock, _start, index, height = status()
        if stage == DONE:
            return moves
        me = parties[turn]
        step, t, _ = disputed()
        if stage == STEPS:
            fn, args = "commitSteps", me.commit_steps(turn == DEFENDER)
        elif stage in (STEP_DESCENT, TRACE_DESCENT):
            levels_of = me.l1 if stage == STEP_DESCENT else me.l2(step)
            left, right = me.children(levels_of, index, height)
            if turn == DEFENDER and stage == TRACE_DESCENT:
                for p in parties:  # the revealed nodes the challenger's proofs may need
                    p.seen[(height - 1, 2 * index)], p.seen[(height - 1, 2 * index + 1)] = left, right
            fn, args = "reveal", (_hex(left), _hex(right))
        elif stage == TRACE:
            fn, args = "commitTrace", me.commit_trace(step)
        elif stage == OUTPUT:
            fn, args = "openOutput", me.open_output(step, t)
        elif stage == ELEMENT_DESCENT and turn == DEFENDER:
            pending = me.children(me.output(step, t).levels, index, height)
            fn, args = "reveal", tuple(_hex(x) for x in pending)
        elif stage == ELEMENT_DESCENT:
            fn, args = "pick", (me.pick(step, t, index, height, pending[0]),)
        elif stage == CHUNK_STAGE:
            leaf_chunk = me.chunk(step, t, index)
            fn, args = "revealChunk", (leaf_chunk,)
        else:
            fn, args = "oneStep", me.one_step(step, t, index, leaf_chunk)
        moves.append(Move(turn, fn, levels.get(stage, 3), gas_of(send(turn, fn, args))))


def batches_root(batch_roots: list[bytes]) -> bytes:
    """The game's ``batches``: the root over the interval's per-step batch roots."""
    return merkle_root(batch_roots)


def task_width(steps_per_task: int) -> int:
    """The leaves a task holds in a job's data tree: its steps rounded up to a power of two."""
    return 1 << (steps_per_task - 1).bit_length()


def job_batch_leaves(tasks: list[list[bytes]]) -> list[bytes]:
    """A job's data leaves (the job binds ``merkle_root`` of them): task slot k's steps' batch
    roots at ``k · task_width`` on, each task padded to its width with zero leaf hashes, so a
    task is one subtree and a step's proof is its proof in the task, then the task's in the job;
    slot k = round · shards + shard (DisputeGame: the leaf of an interval's first step is
    ``k · task_width + (lo - 1) · interval``: leaf 0 is the task's checkpoint 0)."""
    width = task_width(max(len(t) for t in tasks))
    return [b for t in tasks for b in list(t) + [bytes(32)] * (width - len(t))]


__all__ = ["CHALLENGER", "DEFENDER", "CheckpointLeaf", "Move", "Party", "batches_root", "checkpoint_leaf",
           "job_batch_leaves", "play", "task_width"]
