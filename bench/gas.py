"""Gas report: one task's life, createJob by shard count, a draw by pool size, disputes.

Deploys the real contracts to a fresh Anvil on a free port (stopped at the end) and prints
tables of gas used per call, as mined. Targets (issue 3): a task's whole life ≤ 400,000
gas; createJob flat in shard count (within 5% from 10 to 1,000); a draw at 1,000 workers
≤ 1.5× a draw at 10. Issue 6: a dispute over 8, 64 and 1,024 checkpoint leaves, every call
of it (challenge, each bisection move, the referee draw, each commit and reveal, the
settlement): ≤ 100,000 gas a move, a whole dispute over 1,024 leaves with 5 referees
≤ 2,500,000.

    .venv/bin/python bench/gas.py
"""

from __future__ import annotations

from devstack import CID, FUTURE_DELAY, ROOT, SALT, Bench, E, audit_commitment, commitment  # sets sys.path first
from truetrain.chain.deploy import StackParams
from truetrain.chain.devnet import free_port, start_anvil
from truetrain.dispute import GameView, Party, claims_for, opening_claims, vote_commitment
from truetrain.training.merkle import merkle_root
from web3 import Web3

REFEREES = 5  # the dispute game's committee size in this deployment


def task_life(b: Bench, submitter: str) -> tuple[str, list[tuple[str, int]]]:
    job_id, _ = b.create_job(submitter, 2)
    task, worker, draw_gas = b.draw(job_id, submitter)
    rows = [("drawTask", draw_gas)]
    rows.append(("acceptTask", b.send(b.market.functions.acceptTask(task), worker)))
    rows.append(("commitResult", b.send(b.market.functions.commitResult(task, commitment(worker)), worker)))
    rows.append(("revealResult", b.send(b.market.functions.revealResult(task, ROOT, CID, SALT), worker)))
    b.mine(51)
    rows.append(("finalize", b.send(b.market.functions.finalize(task), worker)))
    return worker, rows


def dispute_gas(b: Bench, submitter: str, challenger: str, verifiers: list[str], leaves: int):
    """One whole dispute, played to the end: a worker that cheats from the middle of its task
    on, an honest challenger, every move, a committee of REFEREES voting for the challenger."""
    honest = [Web3.keccak(text=f"honest:{i}") for i in range(leaves)]
    cheat = honest[: leaves // 2] + [Web3.keccak(text=f"cheat:{i}") for i in range(leaves // 2, leaves)]
    job_id, _ = b.create_job(submitter, 1, leaves=leaves, challenge_window=1_000)
    task, worker, _ = b.draw(job_id, submitter)
    root = merkle_root(cheat)
    b.send(b.market.functions.acceptTask(task), worker)
    b.send(b.market.functions.commitResult(task, commitment(worker, root)), worker)
    b.send(b.market.functions.revealResult(task, root, CID, SALT), worker)
    cids = [f"bafy{i}" for i in range(leaves)]
    opening = [c.as_tuple() for c in opening_claims(honest, cids)]
    game_id = b.game.functions.challenge(task, merkle_root(honest), opening).call({"from": challenger})
    rows = [("challenge (bond, opening claims)", b.send(b.game.functions.challenge(task, merkle_root(honest), opening), challenger))]
    moves = 0
    while (g := GameView.read(b.game, game_id)).turn != Party.NONE:
        mover, hashes = (worker, cheat) if g.turn == Party.WORKER else (challenger, honest)
        moves += 1
        claims = [c.as_tuple() for c in claims_for(g, hashes, cids, g.turn)]
        rows.append((f"move {moves} ({len(claims)} claims)", b.send(b.game.functions.move(game_id, claims), mover)))
    # The committee is drawn from the hash of a block after the bisection's end (the ticket).
    b.mine(FUTURE_DELAY)
    rows.append(("drawReferees", b.send(b.game.functions.drawReferees(game_id), submitter)))
    seated = [seat[0] for seat in b.game.functions.committeeOf(game_id).call()]
    salt = b"\x33" * 32
    for n, referee in enumerate(seated):
        sealed = vote_commitment(game_id, 2, salt, referee)
        rows.append((f"commitVote {n + 1}", b.send(b.game.functions.commitVote(game_id, n, sealed), referee)))
    for n, referee in enumerate(seated):
        rows.append((f"revealVote {n + 1}", b.send(b.game.functions.revealVote(game_id, n, 2, salt), referee)))
    rows.append(("resolve (slash, split, records, requeue)", b.send(b.game.functions.resolve(game_id), submitter)))
    return rows, moves


def audited_task_life(b: Bench, submitter: str) -> list[tuple[str, int]]:
    """A task of a job audited at 100 %: the audit draw settled from the future, the
    auditor's commit and reveal, the worker's reveal, finalize."""
    job_id, _ = b.create_job(submitter, 1, audit_bps=10_000)
    task, worker, draw_gas = b.draw(job_id, submitter)
    rows = [("drawTask", draw_gas), ("acceptTask", b.send(b.market.functions.acceptTask(task), worker)),
            ("commitResult", b.send(b.market.functions.commitResult(task, commitment(worker)), worker))]
    b.mine(FUTURE_DELAY)
    rows.append(("settleAudit (auditor drawn)", b.send(b.market.functions.settleAudit(task), submitter)))
    auditor = b.market.functions.taskOf(task).call()[4]
    sealed = audit_commitment(auditor, ROOT)
    rows.append(("commitAudit", b.send(b.market.functions.commitAudit(task, sealed), auditor)))
    rows.append(("revealResult", b.send(b.market.functions.revealResult(task, ROOT, CID, SALT), worker)))
    rows.append(("revealAudit", b.send(b.market.functions.revealAudit(task, ROOT, SALT), auditor)))
    b.mine(51)
    rows.append(("finalize", b.send(b.market.functions.finalize(task), worker)))
    return rows


def sizes(b: Bench) -> list[tuple[str, int]]:
    """Deployed bytecode size of every contract of the stack (EIP-170: 24,576 bytes)."""
    rows = []
    for key, contract in b.contracts.items():
        rows.append((contract.name, len(b.w3.eth.get_code(contract.address))))
    return rows


def table(title: str, rows: list[tuple[str, int]], extra: str = "") -> None:
    print(f"\n{title}")
    width = max(len(name) for name, _ in rows)
    for name, gas in rows:
        print(f"  {name:<{width}}  {gas:>10,}")
    if extra:
        print(f"  {extra}")


def main() -> None:
    devnet = start_anvil(free_port())
    try:
        # Growing the pool to 1,000 members takes ~5,000 blocks: a liveness window longer than
        # that keeps the first members eligible without a heartbeat each (which would move the
        # figures it measures).
        b = Bench(devnet.url, StackParams(committee_size=REFEREES, liveness_window_blocks=100_000))
        submitter = b.new_submitter()  # a submitter does not join the pool (the contracts refuse it)
        workers = [b.new_account(1) for _ in range(10)]
        limit = 24_576
        rows = sizes(b)
        table("Deployed bytecode (EIP-170 limit 24,576 bytes; target ≥ 10 % headroom)", rows,
              "headroom: " + ", ".join(f"{name} {1 - size / limit:.1%}" for name, size in rows))

        # A worker's first task pays first-time storage writes (its history counters, its
        # credit); later tasks of the same worker do not. Show both.
        first_worker, first = task_life(b, submitter)
        seen, repeat = {first_worker}, None
        while repeat is None:
            worker, life = task_life(b, submitter)
            repeat = life if worker in seen else None
            seen.add(worker)
        for title, life in (("a worker's first task", first), ("a later task of the same worker", repeat)):
            total = sum(g for _, g in life)
            table(f"One task's life, no audit: {title}", life + [("total", total)],
                  f"target ≤ 400,000: {'met' if total <= 400_000 else 'MISSED'}")

        b.new_account(2)  # a verifier, to audit
        life = audited_task_life(b, submitter)
        table("One task's life, audited (audit rate 100 %)", life + [("total", sum(g for _, g in life))])

        creates = [(f"createJob, {n:,} shards", b.create_job(submitter, n)[1]) for n in (10, 100, 1_000)]
        spread = max(g for _, g in creates) / min(g for _, g in creates) - 1
        table("createJob by shard count", creates, f"spread {spread:.2%} (target ≤ 5%)")

        draws = []
        for size in (10, 100, 1_000):
            while len(workers) < size:
                workers.append(b.new_account(1))
            job_id, _ = b.create_job(submitter, 4)
            draws.append((f"drawTask, {size:,} workers in the pool", b.draw(job_id, submitter)[2]))
        ratio = draws[-1][1] / draws[0][1]
        table("A draw by pool size", draws, f"1,000 / 10 = {ratio:.2f}x (target ≤ 1.5x)")

        verifiers = [b.new_account(2) for _ in range(REFEREES + 2)]
        challenger = b.new_account(2)
        # An LM task's dispute costs what any task's with as many leaves does: the chain sees
        # checkpoint hashes, never the model. The default `job submit --model lm` task has 60
        # inner AdamW steps and a checkpoint every 20 (4 leaves); at a checkpoint every step
        # (61 leaves) the referees recompute one step. tests/integration/adversarial/
        # test_lm_dispute.py plays one on real daemons (9 leaves, 3 referees) and prints its gas.
        for leaves, what in ((8, ""), (64, ""), (1_024, ""), (4, ", the default LM task (60 steps, every 20)"),
                             (61, ", an LM task checkpointed every step (60 steps)")):
            rows, moves = dispute_gas(b, submitter, challenger, verifiers, leaves)
            per_move = max((g for name, g in rows if name.startswith("move")), default=0)
            total = sum(g for _, g in rows)
            limit = "; whole dispute ≤ 2,500,000" if leaves == 1_024 else ""
            met = per_move <= 100_000 and (leaves != 1_024 or total <= 2_500_000)
            table(f"A dispute over {leaves:,} checkpoint leaves{what}, {REFEREES} referees ({moves} moves after "
                  f"the opening)", rows + [("total", total)], f"targets ≤ 100,000 a move{limit}: {'met' if met else 'MISSED'}")
    finally:
        devnet.stop()


if __name__ == "__main__":
    main()
