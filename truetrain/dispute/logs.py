"""What each party claimed in a game, rebuilt from its ``DisputeBisected`` logs.

The game keeps only what its next move needs; the hashes and CIDs each party claimed at
every position live in the logs. A referee reads here which checkpoint both hold at lo
(and where to fetch it) and which two hashes they claim at hi.
"""

from __future__ import annotations

from dataclasses import dataclass

from truetrain.errors import DisputeError

from .game import GameView, Party


@dataclass(frozen=True)
class Claimed:
    party: Party
    position: int
    hash: bytes
    cid: str


@dataclass(frozen=True)
class Disputed:
    """The interval a bisection ended on: both claimed ``agreed`` at lo (None at lo = 0, the
    inputs; ``agreed_cids`` where to fetch it), and ``worker`` / ``challenger`` at hi."""

    lo: int
    hi: int
    agreed: bytes | None
    agreed_cids: tuple[str, ...]
    worker: bytes
    challenger: bytes


def game_claims(game_contract, view: GameView, from_block: int = 0) -> dict[tuple[Party, int], Claimed]:
    """Every claim of game ``view.game_id``, by (party, position); a later claim at the same
    position (there is none in a well-formed game) would win."""
    logs = game_contract.events.DisputeBisected().get_logs(
        from_block=from_block, argument_filters={"gameId": view.game_id})
    claims: dict[tuple[Party, int], Claimed] = {}
    for log in sorted(logs, key=lambda e: (e["blockNumber"], e["logIndex"])):
        party = view.party(log["args"]["mover"])
        for position, digest, cid in zip(log["args"]["positions"], log["args"]["hashes"], log["args"]["cids"]):
            claims[(party, position)] = Claimed(party, position, bytes(digest), cid)
    return claims


def disputed(game_contract, view: GameView, from_block: int = 0) -> Disputed:
    """The ended bisection's interval and hashes (aggregation task: the two roots at (0, 1))."""
    if view.hi - view.lo != 1:
        raise DisputeError(f"game {view.game_id} is still bisecting ({view.lo}, {view.hi})")
    claims = game_claims(game_contract, view, from_block)
    if not claims:  # an aggregation task: one hash each, their roots
        return Disputed(view.lo, view.hi, None, (), view.worker_root, view.challenger_root)
    try:
        worker = claims[(Party.WORKER, view.hi)].hash
        challenger = claims[(Party.CHALLENGER, view.hi)].hash
    except KeyError as exc:
        raise DisputeError(f"game {view.game_id}: no claim at position {view.hi} in the logs: {exc}") from None
    if view.lo == 0:
        return Disputed(0, view.hi, None, (), worker, challenger)
    at_lo = [claims[k] for k in ((Party.WORKER, view.lo), (Party.CHALLENGER, view.lo)) if k in claims]
    if not at_lo:
        raise DisputeError(f"game {view.game_id}: no claim at position {view.lo} in the logs")
    return Disputed(view.lo, view.hi, at_lo[0].hash, tuple(c.cid for c in at_lo), worker, challenger)
