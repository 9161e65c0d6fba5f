"""Which claims a move owes: a Python mirror of ``DisputeGame._move``.

A move is planned from the game as stored and the mover's own checkpoint hashes (its
leaves, in order); each claim carries the hash at a position, its Merkle proof against the
mover's root and the CID of that checkpoint. The contract checks the same positions in the
same order, so a plan from an honest party's hashes always goes through.
"""

from __future__ import annotations

from dataclasses import dataclass

from truetrain.errors import DisputeError
from truetrain.training.merkle import merkle_proof, merkle_root

from .game import GameView, Party


@dataclass(frozen=True)
class Claim:
    position: int
    hash: bytes
    proof: tuple[bytes, ...]
    cid: str

    def as_tuple(self) -> tuple:
        """The ``IDisputeGame.Claim`` tuple (hash, proof, cid)."""
        return (self.hash, list(self.proof), self.cid)


def _mid(lo: int, hi: int) -> int:
    return lo + (hi - lo) // 2


def plan_positions(game: GameView, hashes: list[bytes], mover: Party) -> list[int]:
    """Positions (0 = inputs, p = leaf p − 1) the mover's next move must claim, in order."""
    if len(hashes) != game.leaves:
        raise DisputeError(f"the game is over {game.leaves} checkpoints, the mover holds {len(hashes)}")
    lo, hi = game.lo, game.hi
    positions: list[int] = []

    def answer() -> None:
        nonlocal lo, hi
        at = _mid(lo, hi)
        positions.append(at)
        if hashes[at - 1] == game.pending:
            lo = at
        else:
            hi = at

    if game.moves < 2:
        positions.append(game.leaves)
        if mover == Party.WORKER and hashes[-1] == game.challenger_hash:
            return positions  # the challenger claims our own result: it loses at once
        if game.moves == 1 and hi - lo >= 2:
            answer()
    else:
        answer()
    if hi - lo >= 2:
        positions.append(_mid(lo, hi))
    return positions


def claims_for(game: GameView, hashes: list[bytes], cids: list[str], mover: Party) -> list[Claim]:
    """The claims of the mover's next move, with proofs against ``merkle_root(hashes)``."""
    root = merkle_root(hashes)
    own = game.worker_root if mover == Party.WORKER else game.challenger_root
    if root != own:
        raise DisputeError(f"these checkpoints commit to 0x{root.hex()}, not to the mover's root 0x{own.hex()}")
    return [Claim(p, hashes[p - 1], tuple(merkle_proof(hashes, p - 1)), cids[p - 1])
            for p in plan_positions(game, hashes, mover)]


def opening_claims(hashes: list[bytes], cids: list[str]) -> list[Claim]:
    """The claims a challenger opens with: its hash at the result and at the first midpoint."""
    leaves = len(hashes)
    positions = [leaves] + ([_mid(0, leaves)] if leaves >= 2 else [])
    return [Claim(p, hashes[p - 1], tuple(merkle_proof(hashes, p - 1)), cids[p - 1]) for p in positions]
