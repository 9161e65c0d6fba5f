"""One party's side of a game, one transaction a step: the worker and verifier daemons and
``truetrain challenge --follow`` all drive their games through :class:`GameDriver`.

A step reads the game from the chain and sends at most the one transaction it asks of this
party: its move when on turn (claims planned from its own checkpoint hashes), and otherwise
whatever moves a game that waits on anybody (the opponent's clock ran out, referees to
draw, a phase that ended). So a re-run step, or a restart, never sends a move twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from truetrain.market import randomness

from .game import GameStatus, GameView, Party
from .planner import claims_for

log = logging.getLogger("truetrain.dispute")


#: (checkpoint hashes, their CIDs), in leaf order: what the party committed to.
Trace = tuple[list[bytes], list[str]]


class GameDriver:
    """Drive games for ``address``. ``send(name, call, random_path=False)`` sends one
    transaction (the daemon's ``send``, or the CLI's)."""

    def __init__(self, game_contract, w3, address: str, send: Callable):
        self.game = game_contract
        self.w3 = w3
        self.address = address
        self.send = send

    def step(self, game_id: int, trace: Callable[[], Trace]) -> str | None:
        """Move game ``game_id`` on; ``trace()`` is called only when a move is due. Returns
        "won" or "lost" once the game is resolved, "void" when it ended without a verdict,
        else None."""
        g = GameView.read(self.game, game_id)
        me = g.party(self.address)
        if g.status == GameStatus.RESOLVED:
            return "won" if g.worker_won == (me == Party.WORKER) else "lost"
        if g.status == GameStatus.VOIDED:
            return "void"
        block = self.w3.eth.block_number
        calls = self.game.functions
        if g.status == GameStatus.BISECTING:
            if g.turn == me:
                hashes, cids = trace()
                claims = claims_for(g, hashes, cids, me)
                self.send("move", calls.move(game_id, [c.as_tuple() for c in claims]))
                log.info("dispute move", extra={"game": game_id, "positions": [c.position for c in claims]})
            elif block > g.clock_expires_at():
                self.send("timeout", calls.timeout(game_id))
        elif g.status == GameStatus.AWAITING_REFEREES and block > g.deadline:
            # The committee is drawn from the hash of the ticket block (`deadline`): from the
            # next block on, and as a failed draw once the ticket's epoch is over.
            lapsed = randomness.lapsed(g.deadline, block)
            self.send("timeout" if lapsed else "drawReferees",
                      calls.timeout(game_id) if lapsed else calls.drawReferees(game_id), random_path=True)
        elif g.status == GameStatus.COMMITTING and block > g.deadline:
            self.send("timeout", calls.timeout(game_id))
        elif g.status == GameStatus.REVEALING and (g.revealed == g.committed or block > g.deadline):
            self.send("resolve", calls.resolve(game_id))
        return None
