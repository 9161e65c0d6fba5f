"""The dispute game as every role plays it: the game's state read from chain, the claims a
move owes (computed from the mover's own checkpoint hashes, exactly as DisputeGame checks
them) and the referee's vote commitment.

Worker, verifier and the ``truetrain challenge`` command all go through this package, so
they agree with each other and with the contract on positions, proofs and encodings.
"""

from .game import GameStatus, GameView, Party, Vote, vote_commitment
from .logs import Claimed, Disputed, disputed, game_claims
from .party import GameDriver, Trace
from .planner import Claim, claims_for, opening_claims, plan_positions
from .referee import recompute_hi, referee_vote

__all__ = ["Claim", "Claimed", "Disputed", "disputed", "game_claims", "GameStatus", "GameView", "Party", "Vote", "claims_for", "opening_claims", "plan_positions", "vote_commitment",
           "GameDriver", "Trace", "recompute_hi", "referee_vote"]
