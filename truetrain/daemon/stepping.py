"""A daemon's side of the StepGames its dispute games hand over (DisputeGame status
Stepping: level 0 ended on checkpoints (lo, lo + 1), lo >= 1, of a job that bound its program).

The player (:class:`~truetrain.dispute.step_player.StepPlayer`) needs this party's own
checkpoints of the interval, one a step: they are the party's own checkpoint at lo (the
agreed one, fetched from the bundle it published and checked against its hash) trained on
step by step, which repro mode makes the same bits anywhere. They are trained only when
the player needs something not on disk yet, and kept in memory for the game's life.

A party whose published checkpoints are not what its own training gives (a cheater) could
make no move the contract accepts: it says so once, sends nothing and loses on its clock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from truetrain.dispute import GameView, Party, Trace
from truetrain.errors import DisputeError
from truetrain.dispute.step_player import StepPlayer
from truetrain.market import decode_task_id
from truetrain.market.faulty_step import FlipCheat
from truetrain.trace.binding import Binding, job_data_leaves
from truetrain.training.checkpoint import Checkpoint
from truetrain.training.merkle import merkle_root
from truetrain.training.trainer import as_checkpoint, train

log = logging.getLogger("truetrain.dispute")

#: ``cheat_for(task_id, manifest)``: the named cheat a deliberately faulty party plays the
#: task's game with (truetrain.market.faulty_step), None for an honest one
CheatFor = Callable[[int, object], "FlipCheat | None"]


class Stepping:
    """Play StepGames for the daemon at ``address``: ``contracts`` its deployment's handles,
    ``reader`` its MarketReader, ``send`` its one-transaction send, ``state_dir`` where the
    players keep what they built."""

    def __init__(self, contracts, w3, address: str, send: Callable, reader, state_dir: Path,
                 cheat_for: CheatFor | None = None):
        self.contracts, self.w3, self.address, self.send = contracts, w3, address, send
        self.reader, self.dir, self.cheat_for = reader, Path(state_dir), cheat_for
        self._checkpoints: dict[int, list[Checkpoint]] = {}
        self._leaves: dict[int, list[bytes]] = {}
        self._unbacked: set[int] = set()
        self._shards: dict[tuple[int, int], bytes] = {}
        self._first: dict[int, int] = {}

    def step(self, game: GameView, bundle: Callable[[], Trace]) -> None:
        """Move dispute ``game``'s StepGame on (at most one transaction); ``bundle()`` gives
        this party's published checkpoint hashes and CIDs (called only to train its data)."""
        agreed, ends, step_game = self.contracts.game.functions.linkOf(game.game_id).call()
        job_id, _, index = decode_task_id(game.task_id)
        manifest = self.reader.manifest(job_id)
        if (job_id, index) not in self._shards:  # fetched once a game, not once a tick
            self._shards[(job_id, index)] = self.reader.shard(job_id, index)
        shard = self._shards[(job_id, index)]

        cheat = self.cheat_for(game.task_id, manifest) if self.cheat_for is not None else None

        def checkpoints(i: int) -> Checkpoint:
            if game.game_id not in self._checkpoints:
                self._checkpoints[game.game_id] = self._interval(game, manifest, shard, bundle, cheat)
            return self._checkpoints[game.game_id][i]

        if not self._backs(game, bytes(agreed), bytes(ends[0 if game.party(self.address) == Party.WORKER else 1]),
                           checkpoints):
            return
        edit = None if cheat is None else (lambda i: cheat.edit_for(manifest, shard, checkpoints(i)))
        player = StepPlayer(self.contracts.stepgame, self.w3, self.address, self.send, self.dir, manifest, shard,
                            checkpoints, from_block=game.last_move_block, edit=edit,
                            data=lambda: self._data(job_id, manifest), first_batch=self._first_batch(game))
        if player.step(step_game) is not None:
            self._checkpoints.pop(game.game_id, None)
            # The StepGame is over while the dispute still waits in Stepping: its receiver refused
            # the verdict (StepGame.VerdictUndelivered). Hand it over again.
            self.send("deliver", self.contracts.stepgame.functions.deliver(step_game))

    def _backs(self, game: GameView, agreed: bytes, end: bytes, checkpoints: Callable[[int], Checkpoint]) -> bool:
        """Whether our own training of the interval gives the hashes level 0 ended on (the
        agreed one at lo, ours at hi). When it does not, no move of ours can be accepted: say
        so once and send nothing (the game ends on our clock)."""
        if game.game_id in self._unbacked:
            return False
        checkpoints(0)
        own = self._checkpoints[game.game_id]
        if own[0].hash() == agreed and own[-1].hash() == end:
            return True
        del self._checkpoints[game.game_id]  # never needed again
        self._unbacked.add(game.game_id)
        log.warning("our training of the disputed interval does not give the hashes we claimed: no move can be "
                    "accepted, the game ends on our clock", extra={"game": game.game_id})
        return False

    def _first_batch(self, game: GameView) -> int:
        """The data leaf of the interval's first step (DisputeGame's StepGameOpened)."""
        if game.game_id not in self._first:
            opened = self.contracts.game.events.StepGameOpened().get_logs(
                from_block=game.last_move_block, argument_filters={"gameId": game.game_id})
            if not opened:
                raise DisputeError(f"game {game.game_id} is Stepping but no StepGameOpened from block "
                                   f"{game.last_move_block}")
            self._first[game.game_id] = opened[0]["args"]["firstBatch"]
        return self._first[game.game_id]

    def _data(self, job_id: int, manifest) -> list[bytes]:
        """Job ``job_id``'s data leaves, from its shards (the one-step proves a batch under
        them), checked against the data root the job bound."""
        if job_id not in self._leaves:
            leaves = job_data_leaves(manifest, lambda k: self.reader.shard(job_id, k))
            bound = Binding.from_chain(self.contracts.game.functions.programOf(job_id).call())
            if merkle_root(leaves) != bound.data:
                raise DisputeError(f"job {job_id}'s bound data root is not its manifest's shards'")
            self._leaves[job_id] = leaves
        return self._leaves[job_id]

    def _interval(self, game: GameView, manifest, shard, bundle: Callable[[], Trace], cheat) -> list[Checkpoint]:
        hashes, cids = bundle()
        start = as_checkpoint(self.reader.fetch_checkpoint(cids[game.lo - 1], hashes[game.lo - 1]))
        log.info("training the disputed interval", extra={"game": game.game_id, "from_step": start.step})
        if cheat is not None:
            return cheat.train(manifest, shard, start, manifest.checkpoint_interval)
        return train(manifest, shard, start, manifest.checkpoint_interval, every=1)[0]


__all__ = ["Stepping"]
