"""DisputeGame's enums and stored game, decoded into a named record."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from eth_abi import encode
from web3 import Web3

from truetrain.hashing import keccak256


class GameStatus(IntEnum):
    NONE = 0
    BISECTING = 1
    AWAITING_REFEREES = 2
    COMMITTING = 3
    REVEALING = 4
    RESOLVED = 5
    VOIDED = 6
    STEPPING = 7  # level 0 ended; StepGame plays the rest (DisputeGame.stepGameOf)


class Party(IntEnum):
    NONE = 0
    WORKER = 1
    CHALLENGER = 2


class Vote(IntEnum):
    NONE = 0
    WORKER = 1
    CHALLENGER = 2
    NEITHER = 3


def vote_commitment(game_id: int, vote: int, salt: bytes, referee: str) -> bytes:
    """``keccak256(abi.encode(gameId, vote, salt, referee))``, as Committee.commitment."""
    return keccak256(encode(["uint256", "uint8", "bytes32", "address"],
                            [game_id, int(vote), bytes(salt), Web3.to_checksum_address(str(referee))]))


@dataclass(frozen=True)
class GameView:
    """``DisputeGame.gameOf`` with snake-case names. Positions: 0 = the task's inputs,
    p ≥ 1 = checkpoint leaf p − 1; the interval (lo, hi) is agreed at lo, disputed at hi."""

    game_id: int
    task_id: int
    worker: str
    status: GameStatus
    turn: Party
    audit: bool
    worker_won: bool
    committee: int
    moves: int
    leaves: int
    lo: int
    hi: int
    challenger: str
    seats: int
    committed: int
    revealed: int
    votes_worker: int
    votes_challenger: int
    votes_neither: int
    last_move_block: int
    deadline: int
    worker_clock: int
    challenger_clock: int
    worker_stake: int
    challenger_stake: int
    worker_root: bytes
    challenger_root: bytes
    pending: bytes
    challenger_hash: bytes

    @classmethod
    def from_tuple(cls, game_id: int, raw) -> GameView:
        values = list(raw)
        values[2], values[3] = GameStatus(values[2]), Party(values[3])
        values = [bytes(v) if isinstance(v, (bytes, bytearray)) else v for v in values]
        return cls(game_id, *values)

    @classmethod
    def read(cls, game, game_id: int) -> GameView:
        return cls.from_tuple(game_id, game.functions.gameOf(game_id).call())

    def party(self, address: str) -> Party:
        """Which side ``address`` plays in this game (NONE for neither)."""
        a = address.lower()
        if a == self.worker.lower():
            return Party.WORKER
        if a == self.challenger.lower():
            return Party.CHALLENGER
        return Party.NONE

    def clock_expires_at(self) -> int:
        """The block after which the party on turn has lost on its clock."""
        clock = self.worker_clock if self.turn == Party.WORKER else self.challenger_clock
        return self.last_move_block + clock
