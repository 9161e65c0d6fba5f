"""One party's side of a StepGame (contracts/StepGame.sol: levels 1-3 and the one-step), one
transaction a call, as :class:`~truetrain.dispute.party.GameDriver` plays level 0.

A call reads the game from the chain (its ``status``, ``disputed`` and events), and sends at
most the one transaction it asks of this party: its move when on turn, ``timeout`` when the
other party's clock ran out, else nothing. What the moves need of this party's own training
is built lazily and kept on disk under ``state_dir`` (the interval's per-step state roots,
the start checkpoint's preimage, the disputed step's trace, the disputed entry's output
tree), so a restarted player resumes where the chain stands without recomputing.

A party never needs the other's data: its moves are :class:`~truetrain.trace.game.Party`'s,
from its own trace, plus what the defender revealed on chain, read from the game's events:
its level-2 nodes (``ChildrenRevealed`` between the two ``LevelEnded``: the challenger's
one-step proves earlier entries against the defender's trace root with them), its level-3
children (the challenger picks the side whose left child is not its own) and its chunk
(``ChunkRevealed``: the challenger names the first word unlike its own).
"""

from __future__ import annotations

import json
import logging
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from truetrain.errors import DisputeError
from truetrain.trace.builder import Trace, batch_root, build_trace
from truetrain.trace.game import (CHALLENGER, CHUNK_STAGE, DEFENDER, DONE, ELEMENT_DESCENT, ONE_STEP, OUTPUT, STEP_DESCENT,
                                  STEPS, TRACE, TRACE_DESCENT, CheckpointLeaf, Party)
from truetrain.trace.program import Program, derive
from truetrain.training.checkpoint import Checkpoint, checkpoint_commitment

log = logging.getLogger("truetrain.dispute")

#: ``checkpoints(i)``: this party's own checkpoint ``i`` steps into the interval (0: the agreed start)
Checkpoints = Callable[[int], Checkpoint]


@dataclass
class GameLog:
    """What a game's events tell a party: the parties, the steps, the defender's revealed
    nodes at level 2 (by (height, index)) and its last children at level 3, its chunk, the
    winner once resolved."""

    parties: tuple[str, str]
    steps: int
    seen: dict[tuple[int, int], bytes] = field(default_factory=dict)
    pending: tuple[bytes, bytes] | None = None
    chunk: bytes = b""
    winner: str | None = None


EVENTS = ("GameOpened", "ChildrenRevealed", "LevelEnded", "ChunkRevealed", "GameResolved")


def read_log(game, gid: int, from_block: int = 0) -> GameLog:
    """Game ``gid``'s events, in chain order, folded into a :class:`GameLog`."""
    logs = [e for name in EVENTS
            for e in getattr(game.events, name)().get_logs(from_block=from_block, argument_filters={"id": gid})]
    out, level = None, 1
    for e in sorted(logs, key=lambda e: (e["blockNumber"], e["logIndex"])):
        a = e["args"]
        if e["event"] == "GameOpened":
            out = GameLog((a["defender"], a["challenger"]), a["steps"])
        elif e["event"] == "LevelEnded":
            level = a["level"] + 1
        elif e["event"] == "ChildrenRevealed" and a["party"] == DEFENDER and level >= 2:
            left, right = bytes(a["left"]), bytes(a["right"])
            if level == 2:
                h, i = a["height"] - 1, 2 * a["index"]
                out.seen[(h, i)], out.seen[(h, i + 1)] = left, right
            else:
                out.pending = (left, right)
        elif e["event"] == "ChunkRevealed":
            out.chunk = bytes(a["chunk"])
        elif e["event"] == "GameResolved":
            out.winner = a["winner"]
    if out is None:
        raise DisputeError(f"no StepGame {gid} opened (from block {from_block})")
    return out


class StepPlayer:
    """Play StepGames for ``address``: ``game`` the StepGame (web3 contract), ``send(name,
    call)`` sends one transaction (the daemon's), ``checkpoints`` this party's own
    checkpoints of the interval (called only to build what is not on disk yet), ``edit``
    (tests: a deliberately faulty party) ``edit(step)`` the trace builder's edit of a step."""

    def __init__(self, game, w3, address: str, send: Callable, state_dir: Path | str, manifest, shard,
                 checkpoints: Checkpoints, *, program: Program | None = None, from_block: int = 0,
                 edit: Callable[[int], Callable | None] | None = None,
                 data: Callable[[], list[bytes]] | None = None, first_batch: int = 0):
        self.game, self.w3, self.address, self.send = game, w3, address, send
        self.dir = Path(state_dir) / "stepgame"
        self.manifest, self.shard, self.checkpoints = manifest, shard, checkpoints
        self.program = program or derive(manifest)
        self.from_block, self.edit = from_block, edit
        #: the leaves the game's batches root is over (a job's data leaves, the interval's step
        #: ``i`` at ``first_batch + i``); None: the interval's own batch roots
        self.data, self.first_batch = data, first_batch

    def step(self, gid: int) -> str | None:
        """Move game ``gid`` on. Returns "won" or "lost" once it is resolved, else None."""
        stage, turn, clock, turn_start, index, height = self.game.functions.status(gid).call()
        g = read_log(self.game, gid, self.from_block)
        sides = [p.lower() for p in g.parties]
        if self.address.lower() not in sides:
            raise DisputeError(f"{self.address} plays no side of StepGame {gid}")
        mine = sides.index(self.address.lower())
        if stage == DONE:
            return "won" if g.winner.lower() == self.address.lower() else "lost"
        calls = self.game.functions
        if turn != mine:
            # the gas estimate runs at the head's number: one block more than the contract needs
            if self.w3.eth.block_number - turn_start > clock[turn]:
                self.send("timeout", calls.timeout(gid))
                log.info("step game timeout", extra={"game": gid})
            return None
        fn, args = self._move(gid, g, stage, turn, index, height)
        self.send(fn, getattr(calls, fn)(gid, *args))
        log.info("step game move", extra={"game": gid, "move": fn, "stage": stage})
        return None

    def _move(self, gid: int, g: GameLog, stage: int, turn: int, index: int, height: int) -> tuple[str, tuple]:
        step, t, _ = self.game.functions.disputed(gid).call()
        needs_trace = stage not in (STEPS, STEP_DESCENT)
        me = self.party(gid, g.steps, step if needs_trace else None, with_batches=stage == ONE_STEP)
        me.seen.update(g.seen)
        if stage == STEPS:
            return "commitSteps", me.commit_steps(turn == DEFENDER)
        if stage in (STEP_DESCENT, TRACE_DESCENT):
            levels = me.l1 if stage == STEP_DESCENT else me.l2(step)
            return "reveal", _hexes(me.children(levels, index, height))
        if stage == TRACE:
            return "commitTrace", me.commit_trace(step)
        if stage == OUTPUT:
            return "openOutput", me.open_output(step, t)
        self._output(gid, me, step, t)
        if stage == ELEMENT_DESCENT and turn == DEFENDER:
            return "reveal", _hexes(me.children(me.output(step, t).levels, index, height))
        if stage == ELEMENT_DESCENT:
            return "pick", (me.pick(step, t, index, height, g.pending[0]),)
        if stage == CHUNK_STAGE:
            return "revealChunk", (me.chunk(step, t, index),)
        return "oneStep", me.one_step(step, t, index, g.chunk)

    # --- this party's own data, built once and kept on disk ------------------------------

    def party(self, gid: int, steps: int, step: int | None = None, with_batches: bool = False) -> Party:
        """This party of game ``gid`` (``steps`` steps): its state roots and start, the trace
        of ``step`` when given, the interval's batch roots when asked for."""
        where = self.dir / str(gid)
        where.mkdir(parents=True, exist_ok=True)
        roots = _cached(where / "roots.json", lambda: self._roots(steps))
        batches = []
        if with_batches:
            build = (lambda: [x.hex() for x in self.data()]) if self.data is not None else (lambda: self._batches(steps))
            batches = _cached(where / "batches.json", build)
        traces = {} if step is None else {step: self._trace(where, step)}
        return Party(self.program, _bytes(roots["steps"]), traces, _bytes(batches),
                     CheckpointLeaf(roots["start"][0], *_bytes(roots["start"][1:])), first_batch=self.first_batch)

    def _roots(self, steps: int) -> dict:
        start = checkpoint_commitment(self.checkpoints(0))
        ends = [checkpoint_commitment(self.checkpoints(i))[3] for i in range(1, steps + 1)]
        return {"start": [start[0], *(x.hex() for x in start[1:])], "steps": [x.hex() for x in ends]}

    def _batches(self, steps: int) -> list[str]:
        return [batch_root(self.manifest, self.shard, self.checkpoints(i)).hex() for i in range(steps)]

    def _trace(self, where: Path, step: int) -> Trace:
        path = where / f"trace-{step}.pt"
        if path.exists():
            return Trace(**torch.load(path, weights_only=False))
        edit = self.edit(step) if self.edit else None
        tr = build_trace(self.manifest, self.shard, self.checkpoints(step), keep=True, edit=edit)
        _atomic(path, lambda f: torch.save(vars(tr), f))
        return tr

    def _output(self, gid: int, me: Party, step: int, t: int) -> None:
        """The disputed entry's output tree, from disk where built before."""
        path = self.dir / str(gid) / f"output-{step}-{t}.pkl"
        if path.exists():
            me._out[step, t] = pickle.loads(path.read_bytes())
        else:
            _atomic(path, lambda f: pickle.dump(me.output(step, t), f))


def _cached(path: Path, build: Callable[[], object]):
    if path.exists():
        return json.loads(path.read_text())
    value = build()
    _atomic(path, lambda f: f.write(json.dumps(value).encode()))
    return value


def _atomic(path: Path, write: Callable) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as f:
        write(f)
    tmp.replace(path)


def _bytes(xs) -> list:
    return [bytes.fromhex(x) for x in xs]


def _hexes(xs) -> tuple[str, ...]:
    return tuple("0x" + x.hex() for x in xs)


__all__ = ["CHALLENGER", "DEFENDER", "GameLog", "StepPlayer", "read_log"]
