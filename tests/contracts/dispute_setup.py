"""Fixtures and helpers for the DisputeGame tests.

Import explicitly: ``from tests.contracts.dispute_setup import *``. Builds on
``market_setup`` (token, registry, stake manager, pool, market and the crew) and deploys the
DisputeGame with the documented role grants. Checkpoint traces are lists of 32-byte leaf
hashes: the honest one and variants that diverge; roots and proofs come from
``truetrain.training.merkle`` and moves are planned by ``truetrain.dispute`` (the same code
the daemons use), so every move sent here is one a real party would send.
"""

from __future__ import annotations

import pytest
from brownie import accounts, chain, web3

from tests.contracts.conftest import MARKET_ROLE, RECORDER_ROLE
from tests.contracts.market_setup import *  # noqa: F401,F403
from tests.contracts.market_setup import __all__ as _market_all
from truetrain.dispute import GameStatus, GameView, Party, claims_for, disputed, opening_claims, vote_commitment
from truetrain.training.merkle import merkle_root

__all__ = list(_market_all) + [
    "CLOCK", "COMMIT_WINDOW", "REVEAL_WINDOW", "COMMITTEE", "REFEREE_STAKE", "REFEREE_PENALTY", "GS", "Party",
    "deploy_game", "game", "referees", "challenger", "trace", "diverged", "root_of", "hx", "view", "play",
    "challenge_task", "revealed_task", "open_audit_game", "vote_all", "cids", "claims", "LEAVES", "opening_claims",
    "ended", "step_game", "draw_referees", "colluded_task", "NO_STEP_GAME",
]

CLOCK = 10
#: a DisputeGame without a StepGame: its games end with committees
NO_STEP_GAME = "0x" + "00" * 20
#: The vote each referee committed, by (game contract, game, seat): what step_game reveals.
_VOTES: dict[tuple[str, int, int], int] = {}
COMMIT_WINDOW = 10
REVEAL_WINDOW = 10
COMMITTEE = 3
REFEREE_STAKE = 50 * E
REFEREE_PENALTY = 5 * E
LEAVES = 7
GS = GameStatus


def hx(b: bytes) -> str:
    return "0x" + bytes(b).hex()


def trace(leaves: int = LEAVES, tag: str = "honest") -> list[bytes]:
    """A checkpoint trace: leaf i is keccak(tag, i)."""
    return [bytes(web3.keccak(text=f"{tag}:{i}")) for i in range(leaves)]


def diverged(base: list[bytes], at: int, tag: str = "cheat") -> list[bytes]:
    """``base`` up to leaf ``at`` − 1, then a different trace from leaf ``at`` on."""
    return base[:at] + [bytes(web3.keccak(text=f"{tag}:{i}")) for i in range(at, len(base))]


def root_of(hashes: list[bytes]) -> str:
    return hx(merkle_root(hashes))


def cids(hashes: list[bytes]) -> list[str]:
    return [f"bafy{h.hex()[:16]}" for h in hashes]


def deploy_game(DisputeGame, job_market, pool, stake_manager, registry, deployer, committee=COMMITTEE,
                step_game=None):
    contract = DisputeGame.deploy(
        job_market, pool, stake_manager, registry,
        (CLOCK, COMMIT_WINDOW, REVEAL_WINDOW, committee, REFEREE_STAKE, REFEREE_PENALTY), step_game or NO_STEP_GAME,
        {"from": deployer},
    )
    stake_manager.grantRole(MARKET_ROLE, contract, {"from": deployer})
    registry.grantRole(RECORDER_ROLE, contract, {"from": deployer})
    pool.grantRole(pool.DRAW_ROLE(), contract, {"from": deployer})
    job_market.wireDisputeGame(contract, {"from": deployer})
    return contract


def draw_referees(game, game_id, sender):
    """Mine past the committee's ticket (kept in the game's deadline) and draw it."""
    mine_past(game.gameOf(game_id).dict()["deadline"])
    return game.drawReferees(game_id, {"from": sender})


@pytest.fixture(scope="module")
def game(DisputeGame, job_market, pool, stake_manager, registry, deployer):
    return deploy_game(DisputeGame, job_market, pool, stake_manager, registry, deployer)


@pytest.fixture(scope="module")
def referees(registry, token, stake_manager, pool, deployer, crew):
    """Five more verifiers (accounts 11..15), registered, staked and in the pool, beside v1."""
    members = [accounts[i] for i in range(11, 16)]
    for a in members:
        register(registry, a, ROLE_VERIFIER)
        stake(token, stake_manager, a, deployer=deployer)
        pool.joinPool({"from": a})
    return members


@pytest.fixture(scope="module")
def challenger(token, stake_manager, deployer, crew):
    """Account 16: staked, no identity, not in the pool (anyone may challenge)."""
    acct = accounts[16]
    stake(token, stake_manager, acct, deployer=deployer)
    return acct


def view(game, game_id) -> GameView:
    return GameView.read(game, game_id) if hasattr(game, "functions") else GameView.from_tuple(game_id, game.gameOf(game_id))


def ended(game, game_id):
    """The interval and hashes the game's bisection ended on, from its logs."""
    return disputed(web3.eth.contract(address=game.address, abi=game.abi), view(game, game_id))


def claims(game, game_id, hashes, mover: Party) -> list[tuple]:
    return [c.as_tuple() for c in claims_for(view(game, game_id), hashes, cids(hashes), mover)]


def revealed_task(job_market, submitter, w1, hashes, **job):
    """A job whose first task was run by w1 and revealed with ``merkle_root(hashes)``; in its window."""
    job.setdefault("challengeWindow", 50)
    job_id, _ = new_job(job_market, submitter, **job)
    tid = run_task(job_market, job_id, w1, root=root_of(hashes), finalize=False)
    return job_id, tid


def challenge_task(game, tid, who, hashes):
    """``who`` challenges with ``hashes``' root and the opening claims."""
    opening = [c.as_tuple() for c in opening_claims(hashes, cids(hashes))]
    tx = game.challenge(tid, root_of(hashes), opening, {"from": who})
    return tx.return_value, tx


def open_audit_game(game, job_market, submitter, w1, worker_hashes, auditor_hashes):
    """A task whose audit mismatched (worker w1, whichever verifier was drawn to audit) and
    its game, opened; returns (job, task, game, auditor)."""
    job_id, _ = new_job(job_market, submitter, auditRateBps=10_000)
    tid = draw_task(job_market, job_id, {"from": w1}).return_value
    job_market.acceptTask(tid, {"from": w1})
    root = root_of(worker_hashes)
    job_market.commitResult(tid, commitment(tid, root, CID, SALT, w1), {"from": w1})
    auditor = settle_audit(job_market, tid)
    job_market.commitAudit(tid, audit_commitment(tid, root_of(auditor_hashes), SALT, auditor), {"from": auditor})
    job_market.revealResult(tid, root, CID, SALT, {"from": w1})
    job_market.revealAudit(tid, root_of(auditor_hashes), SALT, {"from": auditor})
    gid = game.openAuditDispute(tid, {"from": w1}).return_value
    return job_id, tid, gid, auditor


def colluded_task(job_market, submitter, w1, hashes, **job):
    """A task of a fully audited job whose worker (w1) and drawn auditor both reveal the root of
    ``hashes``: the audit "matches", so the result sits in its challenge window with the
    auditor confirming it. Returns (job, task, auditor)."""
    job.setdefault("challengeWindow", 50)
    job_id, _ = new_job(job_market, submitter, auditRateBps=10_000, **job)
    tid = draw_task(job_market, job_id, {"from": w1}).return_value
    job_market.acceptTask(tid, {"from": w1})
    root = root_of(hashes)
    job_market.commitResult(tid, commitment(tid, root, CID, SALT, w1), {"from": w1})
    auditor = settle_audit(job_market, tid)
    job_market.commitAudit(tid, audit_commitment(tid, root, SALT, auditor), {"from": auditor})
    job_market.revealResult(tid, root, CID, SALT, {"from": w1})
    job_market.revealAudit(tid, root, SALT, {"from": auditor})
    return job_id, tid, auditor


def play(game, game_id, worker_hashes, challenger_hashes, *, stop_after=None):
    """Both parties move honestly by their own traces until the bisection ends (or
    ``stop_after`` moves were made here); returns the transactions."""
    txs = []
    while view(game, game_id).status == GS.BISECTING and (stop_after is None or len(txs) < stop_after):
        g = view(game, game_id)
        hashes = worker_hashes if g.turn == Party.WORKER else challenger_hashes
        mover = accounts.at(g.worker if g.turn == Party.WORKER else g.challenger, force=True)
        txs.append(game.move(game_id, claims(game, game_id, hashes, g.turn), {"from": mover}))
    return txs


def vote_all(game, game_id, votes: dict, salt="0x" + "33" * 32, reveal=True):
    """Seated referees commit (and reveal) ``votes[referee]``; a referee missing from
    ``votes`` neither commits nor reveals."""
    seated = [s[0] for s in game.committeeOf(game_id)]
    for seat, r in enumerate(seated):
        if r in votes:
            game.commitVote(game_id, seat, vote_commitment(game_id, votes[r], bytes.fromhex(salt[2:]), r), {"from": r})
    if reveal:
        if view(game, game_id).status == GS.COMMITTING:
            chain.mine(COMMIT_WINDOW + 1)
            game.timeout(game_id, {"from": seated[0]})
        for seat, r in enumerate(seated):
            if r in votes:
                game.revealVote(game_id, seat, votes[r], salt, {"from": r})
    return seated


def step_game(game, game_id, traces: dict, honest: list[bytes], send, keeper, behaviour: str = "straight"):
    """One step of a game as the random walks play it, every party and referee included:
    ``straight`` moves by the party's own trace (``traces`` by root) and votes for the truth
    (``honest``); ``stall`` lets the party on turn run out of time and keeps the first
    referee silent; ``lie`` makes the referees vote against the truth. ``send(fn, *args)``
    sends a transaction the way the walk does (a revert is not an error there)."""
    g = view(game, game_id)
    if g.status == GS.BISECTING:
        if behaviour == "stall":
            chain.mine(CLOCK + 1)
            send(game.timeout, game_id, {"from": keeper})
            return
        root, mover = (g.worker_root, g.worker) if g.turn == Party.WORKER else (g.challenger_root, g.challenger)
        send(game.move, game_id, claims(game, game_id, traces[hx(root)], g.turn), {"from": mover})
    elif g.status == GS.AWAITING_REFEREES:
        mine_past(g.deadline)
        send(game.drawReferees, game_id, {"from": keeper})
    elif g.status in (GS.COMMITTING, GS.REVEALING):
        truth = 1 if traces[hx(g.worker_root)][g.hi - 1] == honest[g.hi - 1] else 2
        vote = 3 - truth if behaviour == "lie" else truth
        salt = bytes.fromhex("77" * 32)
        for seat, (referee, _, sealed) in enumerate(game.committeeOf(game_id)):
            if behaviour == "stall" and seat == 0:
                continue  # a silent referee
            if g.status == GS.COMMITTING:
                _VOTES[(game.address, game_id, seat)] = vote
                send(game.commitVote, game_id, seat, vote_commitment(game_id, vote, salt, referee), {"from": referee})
            elif sealed != "0x" + "00" * 32:
                # A referee reveals the vote it committed (the step that committed it may have
                # played another behaviour than this one).
                send(game.revealVote, game_id, seat, _VOTES.get((game.address, game_id, seat), vote), salt,
                     {"from": referee})
        if view(game, game_id).status == GS.COMMITTING:
            chain.mine(COMMIT_WINDOW + 1)
            send(game.timeout, game_id, {"from": keeper})
        elif g.status == GS.REVEALING:
            if behaviour == "stall":
                chain.mine(REVEAL_WINDOW + 1)
            send(game.resolve, game_id, {"from": keeper})
