"""Honest and dishonest parties playing tasks and dispute games on the bench's devnet.

Every step is a real transaction on the deployed stack (bench/devstack.py). Checkpoint
traces are lists of leaf hashes: HONEST is what a correct replay gives; CHEAT is a worker's
wrong result (diverging from leaf 2 on); SPAM is a false challenger's claim; SAME_END a
sybil's claim with another root but HONEST's result (its last leaf). Moves are
planned by ``truetrain.dispute`` (the code the daemons use).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from devstack import CID, SALT, Bench, audit_commitment, commitment  # sets sys.path first
from truetrain.dispute import GameStatus, GameView, Party, Vote, claims_for, opening_claims, vote_commitment
from truetrain.market.randomness import last_block
from truetrain.training.merkle import merkle_root
from web3 import Web3

LEAVES = 4


def _trace(tag: str, start: int = 0, base: list[bytes] | None = None) -> list[bytes]:
    head = (base or [])[:start]
    return head + [bytes(Web3.keccak(text=f"{tag}:{i}")) for i in range(start, LEAVES)]


HONEST = _trace("honest")
CHEAT = _trace("cheat", 2, HONEST)
SPAM = _trace("spam", 1, HONEST)
SAME_END = _trace("sybil", 1, HONEST)[:-1] + HONEST[-1:]
TRACES = {merkle_root(t): t for t in (HONEST, CHEAT, SPAM, SAME_END)}
HONEST_ROOT, CHEAT_ROOT, SPAM_ROOT = (merkle_root(t) for t in (HONEST, CHEAT, SPAM))
VOTE_SALT = b"\x77" * 32
#: Stake top-ups (wei) a grinder tries once a draw's hash is public (issue 27's proof of
#: concept found a 15-wei one).
TOP_UPS = [1, 2, 3, 5, 8, 13, 15, 21, 55, 144, 10**6, 10**18, 37 * 10**18]


def cids(hashes: list[bytes]) -> list[str]:
    return [f"bafy{h.hex()[:16]}" for h in hashes]


@dataclass
class Cast:
    """Who plays: the keeper (also the submitter) settles draws and times out the late; a
    verifier in ``colluders`` confirms a CHEAT root it audits and, seated on a committee,
    votes for the worker when the colluders hold a majority of the seats (else with the
    truth). Every other verifier is honest."""

    keeper: str
    verifiers: list[str]
    colluders: set[str] = field(default_factory=set)
    #: per game: whether calling drawReferees at other blocks of the ticket's window, or after
    #: a colluder's stake top-up, would have seated another committee (the seat buyer's probe)
    steerable_draws: list[bool] = field(default_factory=list)


class Players:
    def __init__(self, bench: Bench, cast: Cast):
        self.b, self.cast = bench, cast
        self.m, self.g = bench.market.functions, bench.game.functions

    # ------------------------------------------------------------ a task's steps

    def new_task(self, worker: str, submitter: str | None = None, **terms) -> int:
        """A one-task job (1 shard, 1 round) whose task is drawn to ``worker`` and accepted."""
        submitter = submitter or self.cast.keeper
        job_id, _ = self.b.create_job(submitter, 1, rounds=1, leaves=LEAVES, **terms)
        task_id, drawn, _ = self.b.draw(job_id, self.cast.keeper)
        if drawn != worker:
            raise RuntimeError(f"task {task_id} was drawn to {drawn}, not {worker}")
        return task_id

    def commit(self, task_id: int, worker: str, root: bytes, sender: str | None = None, via=None) -> None:
        """``worker`` commits to ``root``; ``via``: a worker contract's functions, called by ``sender``."""
        sealed = commitment(task_id, worker, root)
        call = self.m.commitResult(task_id, sealed) if via is None else via.commit(task_id, sealed)
        self.b.send(call, sender or worker)

    def settle_audit(self, task_id: int, reveal_window: int) -> str | None:
        """The keeper settles the audit draw once its ticket's hash exists; the auditor or None."""
        self.b.mine_past(self.b.task(task_id)["deadline"] - reveal_window)
        self.b.send(self.m.settleAudit(task_id), self.cast.keeper)
        auditor = self.b.task(task_id)["auditor"]
        return None if int(auditor, 16) == 0 else auditor

    def audit_commit(self, task_id: int, auditor: str, worker_root: bytes) -> bytes:
        """The auditor commits its root: a colluder copies the worker's, the honest replays."""
        root = worker_root if auditor in self.cast.colluders else HONEST_ROOT
        self.b.send(self.m.commitAudit(task_id, audit_commitment(task_id, auditor, root)), auditor)
        return root

    def reveal(self, task_id: int, sender: str, root: bytes, via=None) -> None:
        call = self.m.revealResult(task_id, root, CID, SALT) if via is None else via.reveal(task_id, root, CID, SALT)
        self.b.send(call, sender)

    def finalize(self, task_id: int, window: int) -> None:
        self.b.mine(window + 1)
        self.b.send(self.m.finalize(task_id), self.cast.keeper)

    def time_out(self, task_id: int) -> None:
        self.b.mine_past(self.b.task(task_id)["deadline"])
        self.b.send(self.m.timeoutTask(task_id), self.cast.keeper)

    # ------------------------------------------------------------ games

    def challenge(self, task_id: int, challenger: str, hashes: list[bytes]) -> int:
        opening = [c.as_tuple() for c in opening_claims(hashes, cids(hashes))]
        game_id = self.g.challenge(task_id, merkle_root(hashes), opening).call({"from": challenger})
        self.b.send(self.g.challenge(task_id, merkle_root(hashes), opening), challenger)
        return game_id

    def open_audit_game(self, task_id: int) -> int:
        game_id = self.g.openAuditDispute(task_id).call({"from": self.cast.keeper})
        self.b.send(self.g.openAuditDispute(task_id), self.cast.keeper)
        return game_id

    def play(self, game_id: int, probe: bool = False) -> dict:
        """Both parties bisect by their own traces, the keeper draws the committee, the
        referees vote, the keeper resolves; returns DisputeSettled's arguments (at once when
        a move settled the game). ``probe``:
        first try the draw at three blocks of the ticket's settle window, its first, a middle one
        and its last (state reverted each time),
        and record whether any would have seated another committee."""
        while (view := GameView.read(self.b.game, game_id)).status == GameStatus.BISECTING:
            mover, root = ((view.worker, view.worker_root) if view.turn == Party.WORKER
                           else (view.challenger, view.challenger_root))
            hashes = TRACES[bytes(root)]
            claims = [c.as_tuple() for c in claims_for(view, hashes, cids(hashes), view.turn)]
            settled = self.b.events(self.b.receipt(self.g.move(game_id, claims), mover), self.b.game, "DisputeSettled")
            if settled:  # a move that ends the game (a challenger's claim agreeing with the worker's result)
                return settled[0]
        self.b.mine_past(view.deadline)
        if probe:
            # The draw's first block, one mid-way, and the last of the ticket's epoch.
            last_wait = last_block(view.deadline) - self.b.height - 1
            tries = [(wait, 0) for wait in (0, last_wait // 2, last_wait)] + [(0, top_up) for top_up in TOP_UPS]
            self.cast.steerable_draws.append(len({self._probe_committee(game_id, *t) for t in tries}) > 1)
        self.b.send(self.g.drawReferees(game_id), self.cast.keeper)
        self._vote(game_id, GameView.read(self.b.game, game_id))
        receipt = self.b.receipt(self.g.resolve(game_id), self.cast.keeper)
        return self.b.events(receipt, self.b.game, "DisputeSettled")[0]

    def _probe_committee(self, game_id: int, wait: int, top_up: int = 0) -> tuple[str, ...]:
        """The committee drawReferees seats when called ``wait`` blocks later, or right after a
        colluder moved ``top_up`` more wei into its stake (state reverted after)."""
        snapshot = self.b.snapshot()
        caller = self.cast.colluders and sorted(self.cast.colluders)[0] or self.cast.keeper
        try:
            self.b.mine(wait)
            if top_up:
                self.b.send(self.b.token.functions.mint(caller, top_up), self.b.deployer.address)
                self.b.send(self.b.stake.functions.stake(top_up), caller)
            self.b.send(self.g.drawReferees(game_id), caller)
            return tuple(seat[0] for seat in self.g.committeeOf(game_id).call())
        finally:
            self.b.revert_to(snapshot)

    def _vote(self, game_id: int, view: GameView) -> None:
        seated = [seat[0] for seat in self.g.committeeOf(game_id).call()]
        worker_right = TRACES[bytes(view.worker_root)][view.hi - 1] == HONEST[view.hi - 1]
        truth = Vote.WORKER if worker_right else Vote.CHALLENGER
        bought = 2 * sum(1 for r in seated if r in self.cast.colluders) > len(seated)
        votes = {r: Vote.WORKER if (bought and r in self.cast.colluders) else truth for r in seated}
        for seat, referee in enumerate(seated):
            sealed = vote_commitment(game_id, int(votes[referee]), VOTE_SALT, referee)
            self.b.send(self.g.commitVote(game_id, seat, sealed), referee)
        for seat, referee in enumerate(seated):
            self.b.send(self.g.revealVote(game_id, seat, int(votes[referee]), VOTE_SALT), referee)
