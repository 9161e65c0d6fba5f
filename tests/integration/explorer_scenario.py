"""A small market with a real job, an audit that caught a cheating worker, its dispute game
played to a verdict and the slash, for the explorer tests (and its screenshots).

Built from the existing helpers: :class:`MarketNet` (Anvil mining every 0.5 s, an IPFS dev
node, the deployed stack) and :class:`MarketDriver` (raw transactions, real computation).
The cheat is scripted the way ``adversarial/`` cheats: the worker reveals a root whose
checkpoints diverge from the honest ones at one leaf; the auditor's honest root differs,
so the task is disputed; both parties bisect with the planner the daemons use, three
referees vote for the auditor, and the worker is slashed.
"""

from __future__ import annotations

from web3.logs import DISCARD

from tests.integration.market_driver import ROLE_VERIFIER, ROLE_WORKER, MarketDriver
from tests.integration.market_net import TOKEN, MarketNet
from truetrain.chain.client import dev_account
from truetrain.dispute import GameStatus, GameView, Party, Vote, claims_for, vote_commitment
from truetrain.hashing import keccak256
from truetrain.market import TaskStatus, TaskView, audit_commitment, compute_task, new_salt, pending_audit_draw, \
    result_commitment
from truetrain.market.jobs import JobTerms
from truetrain.training.merkle import merkle_root

TERMS = JobTerms(reward_per_task=10 * TOKEN, audit_fee=2 * TOKEN, worker_collateral=40 * TOKEN,
                 accept_window=60, compute_window=40, reveal_window=120, challenge_window=40, audit_rate_bps=10_000)
WORKERS, VERIFIERS, KEEPER = (2, 3), (6, 7, 8, 9), 5
STEPS, INTERVAL, SHARDS, ROUNDS = 8, 2, 1, 2


def cids(hashes: list[bytes]) -> list[str]:
    return [f"bafy{h.hex()[:16]}" for h in hashes]


def open_market(home) -> tuple[MarketNet, MarketDriver]:
    """A market whose workers (2, 3) and verifiers (6..9) are registered, staked and in the pool."""
    net = MarketNet(home)
    try:
        driver = MarketDriver(net.rpc, net.nodes[0].api_addr, net.deployments, keeper=KEEPER)
        for index in WORKERS:
            driver.enlist(index, ROLE_WORKER, stake=200 * TOKEN)
        for index in VERIFIERS:
            driver.enlist(index, ROLE_VERIFIER, stake=200 * TOKEN)
    except BaseException:
        net.close()
        raise
    return net, driver


def submit(net: MarketNet, **kwargs) -> int:
    # unbound: its dispute is the committee's scripted here (the explorer does not show StepGame's levels yet)
    job_id, _, _ = net.submit(shards=SHARDS, rounds=ROUNDS, steps=STEPS, interval=INTERVAL, terms=TERMS, bind=False,
                              **kwargs)
    return job_id


def cheat_caught(driver: MarketDriver, job_id: int) -> tuple[int, int, str, str]:
    """Draw the job's next task; its worker reveals checkpoints that diverge at leaf 2, the
    drawn auditor reveals the honest root. Returns (task, game, worker, auditor) once the
    game is opened (the task is then Disputed)."""
    market, game = driver.market, driver.contracts.game
    drawn = driver.draw(job_id)
    task_id, worker = drawn["taskId"], driver.keys[drawn["worker"]]
    driver.send(market.functions.acceptTask(task_id), worker)
    honest = compute_task(driver.reader, task_id)
    hashes = list(honest.training.checkpoint_hashes)
    assert merkle_root(hashes) == honest.root
    fake = hashes[:2] + [keccak256(f"made-up:{i}".encode()) for i in range(2, len(hashes))]
    salt = new_salt()
    driver.send(market.functions.commitResult(task_id, result_commitment(task_id, merkle_root(fake), "bafyfake", salt,
                                                                         worker.address)), worker)
    draw = pending_audit_draw(driver.client.w3, TaskView.read(market, task_id), driver.reader.job(job_id))
    driver.mine(max(1, draw.ticket - driver.client.w3.eth.block_number + 1))
    auditor = driver.keys[driver.events(driver.send(market.functions.settleAudit(task_id), driver.keeper),
                                        "AuditorDrawn")[0]["auditor"]]
    audit_salt = new_salt()
    driver.send(market.functions.commitAudit(task_id, audit_commitment(task_id, honest.root, audit_salt, auditor.address)),
                auditor)
    driver.send(market.functions.revealResult(task_id, merkle_root(fake), "bafyfake", salt), worker)
    driver.send(market.functions.revealAudit(task_id, honest.root, audit_salt), auditor)
    assert TaskView.read(market, task_id).status == TaskStatus.DISPUTED
    receipt = driver.send(game.functions.openAuditDispute(task_id), driver.keeper)
    game_id = game.events.DisputeOpened().process_receipt(receipt.raw, errors=DISCARD)[0]["args"]["gameId"]
    driver.traces = {Party.WORKER: fake, Party.CHALLENGER: hashes}
    return task_id, game_id, worker.address, auditor.address


def play_game(driver: MarketDriver, game_id: int, *, stop_after_moves: int | None = None) -> GameView:
    """Both parties bisect by their own traces, referees are drawn and all vote for the
    challenger (the honest auditor), and the game is resolved; with ``stop_after_moves``
    return after that many moves (the game still bisecting)."""
    game, keeper = driver.contracts.game, driver.keeper
    moves = 0
    while True:
        g = GameView.read(game, game_id)
        if g.status == GameStatus.BISECTING:
            if stop_after_moves is not None and moves >= stop_after_moves:
                return g
            hashes = driver.traces[g.turn]
            mover = driver.keys[g.worker if g.turn == Party.WORKER else g.challenger]
            claims = [c.as_tuple() for c in claims_for(g, hashes, cids(hashes), g.turn)]
            driver.send(game.functions.move(game_id, claims), mover)
            moves += 1
        elif g.status == GameStatus.AWAITING_REFEREES:
            driver.mine(max(1, g.deadline - driver.client.w3.eth.block_number + 1))
            driver.send(game.functions.drawReferees(game_id), keeper)
        elif g.status == GameStatus.COMMITTING:
            salt = bytes.fromhex("77" * 32)
            for seat, (referee, _, _) in enumerate(game.functions.committeeOf(game_id).call()):
                driver.send(game.functions.commitVote(game_id, seat, vote_commitment(game_id, Vote.CHALLENGER, salt,
                                                                                     referee)), driver.keys[referee])
            if GameView.read(game, game_id).status == GameStatus.REVEALING:
                for seat, (referee, _, _) in enumerate(game.functions.committeeOf(game_id).call()):
                    driver.send(game.functions.revealVote(game_id, seat, int(Vote.CHALLENGER), salt),
                                driver.keys[referee])
        elif g.status == GameStatus.REVEALING:
            driver.send(game.functions.resolve(game_id), keeper)
        else:
            return g


def referee_accounts() -> list[str]:
    return [dev_account(i).address for i in VERIFIERS]
