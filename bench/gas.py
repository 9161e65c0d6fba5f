"""Gas report: one task's life, createJob by shard count, a draw by pool size, disputes.

Deploys the real contracts to a fresh Anvil on a free port (stopped at the end) and prints
tables of gas used per call, as mined. Targets: a task's whole life (draw, accept, commit,
reveal, finalize) ≤ 250,000 gas, where the batch calls count per task (`drawTasks` over N
tasks / N, `finalizeMany` over N tasks / N; issue 3 asked ≤ 400,000 with single calls);
createJob flat in shard count (within 5% from 10 to 1,000); a draw at 1,000 workers ≤ 1.5×
a draw at 10. Issue 6: a dispute over 8, 64 and 1,024 checkpoint leaves, every call
of it (challenge, each bisection move, the referee draw, each commit and reveal, the
settlement): ≤ 100,000 gas a move, a whole dispute over 1,024 leaves with 5 referees
≤ 2,500,000.

    .venv/bin/python bench/gas.py            # everything (~10 min)
    .venv/bin/python bench/gas.py --lives    # sizes and the task-life tables only
"""

from __future__ import annotations

import sys

from devstack import CID, ROOT, SALT, Bench, E, audit_commitment, commitment  # sets sys.path first
from truetrain.chain.deploy import StackParams
from truetrain.chain.devnet import free_port, start_anvil
from truetrain.dispute import GameView, Party, claims_for, opening_claims, vote_commitment
from truetrain.market import JobView, TaskView
from truetrain.market.randomness import EPOCH
from truetrain.training.merkle import merkle_root
from web3 import Web3

REFEREES = 5  # the dispute game's committee size in this deployment
LIFE_TARGET = 250_000
BATCH, BATCH_CONCURRENCY = 32, 8  # a batch: 32 tasks over 10 workers that take 8 tasks at once
LATER_LIVES = 8  # lives averaged for "a later task of the same worker"

#: BEFORE: measured with this script on `main` at cb1d652, before the gas issue's changes
#: (packed job record, offer nonce in the job, auditor flag, drawTasks, finalizeMany settling
#: each member once). One run; figures of one task's life move by several thousand gas with
#: the drawn worker's place in the sortition tree. The batched rows ran the same batches
#: on main, with `drawTask` called N times (main had no drawTasks) and main's finalizeMany.
BEFORE = {
    "sizes": {"TrainToken": 4_618, "IdentityRegistry": 7_621, "StakeManager": 8_446, "WorkerPool": 9_839,
              "TaskRecovery": 9_247, "JobMarket": 21_610, "DisputeGame": 17_915, "ParameterTimelock": 6_550},
    "first": {"drawTask": 119_856, "acceptTask": 33_491, "commitResult": 54_498, "revealResult": 46_731,
              "finalize": 152_690},
    "later": {"drawTask": 119_856, "acceptTask": 33_491, "commitResult": 54_498, "revealResult": 46_731,
              "finalize": 135_590},
    "audited": {"drawTask": 116_931, "acceptTask": 33_491, "commitResult": 56_325, "settleAudit (auditor drawn)": 106_291,
                "commitAudit": 56_609, "revealResult": 42_802, "revealAudit": 44_119, "finalize": 201_011},
    "batch": {"drawTasks / task": 118_166, "acceptTask (mean)": 33_503, "commitResult (mean)": 54_510,
              "revealResult (mean)": 46_743, "finalizeMany / task": 52_842},
    "capacity": {"drawTasks / task": 140_026, "acceptTask (mean)": 33_502, "commitResult (mean)": 54_506,
                 "revealResult (mean)": 46_742, "finalizeMany / task": 85_890},
}


def task_life(b: Bench, submitter: str) -> tuple[str, list[tuple[str, int]]]:
    job_id, _ = b.create_job(submitter, 2)
    task, worker, draw_gas = b.draw(job_id, submitter)
    rows = [("drawTask (asks for the offer ticket)", b.ask_gas)] if b.ask_gas else []
    rows.append(("drawTask", draw_gas))
    rows.append(("acceptTask", b.send(b.market.functions.acceptTask(task), worker)))
    rows.append(("commitResult", b.send(b.market.functions.commitResult(task, commitment(task, worker)), worker)))
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
    b.send(b.market.functions.commitResult(task, commitment(task, worker, root)), worker)
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
    b.mine_past(GameView.read(b.game, game_id).deadline)
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
    """A task of a job audited at 100 %, as on a chain in use: the audit's hold
    (WorkerPool.holdDraws) rewrites a slot an earlier epoch's hold used, as every hold does
    after the chain's first two epochs with audits (so the first lives here are a warm-up)."""
    parities: set[int] = set()
    while True:
        rows, ticket = _audited_task_life(b, submitter)
        if ticket // EPOCH % 2 in parities:
            return rows
        parities.add(ticket // EPOCH % 2)


def _audited_task_life(b: Bench, submitter: str) -> tuple[list[tuple[str, int]], int]:
    """A task of a job audited at 100 %: the audit draw settled from the future, the
    auditor's commit and reveal, the worker's reveal, finalize; and the audit's ticket."""
    job_id, _ = b.create_job(submitter, 1, audit_bps=10_000)
    task, worker, draw_gas = b.draw(job_id, submitter)
    rows = [("drawTask (asks for the offer ticket)", b.ask_gas)] if b.ask_gas else []
    rows += [("drawTask", draw_gas), ("acceptTask", b.send(b.market.functions.acceptTask(task), worker)),
            ("commitResult", b.send(b.market.functions.commitResult(task, commitment(task, worker)), worker))]
    committed = TaskView.read(b.market, task)
    ticket = committed.deadline - JobView.read(b.market, job_id).reveal_window
    b.mine_past(ticket)
    rows.append(("settleAudit (auditor drawn)", b.send(b.market.functions.settleAudit(task), submitter)))
    auditor = b.market.functions.taskOf(task).call()[4]
    sealed = audit_commitment(task, auditor, ROOT)
    rows.append(("commitAudit", b.send(b.market.functions.commitAudit(task, sealed), auditor)))
    rows.append(("revealResult", b.send(b.market.functions.revealResult(task, ROOT, CID, SALT), worker)))
    rows.append(("revealAudit", b.send(b.market.functions.revealAudit(task, ROOT, SALT), auditor)))
    b.mine(51)
    rows.append(("finalize", b.send(b.market.functions.finalize(task), worker)))
    return rows, ticket


def batch_life(b: Bench, submitter: str, n: int) -> list[tuple[str, int]]:
    """One job of n shards drawn by one `drawTasks` (several when n > 32), each task accepted,
    committed and revealed by its worker, and all finalized by one `finalizeMany` after the
    window: gas per task of each step (the batch calls divided by n, the others averaged)."""
    job_id, _ = b.create_job(submitter, n, windows=(100, 200, 150), challenge_window=200)
    tasks, draw_gas = [], 0
    while len(tasks) < n:
        receipt = b.draw_offers(job_id, submitter, min(32, n - len(tasks)))
        tasks += [(e["taskId"], e["worker"]) for e in b.events(receipt, b.market, "TaskDrawn")]
        draw_gas += receipt["gasUsed"] + b.ask_gas
    mean = lambda gas: round(sum(gas) / len(gas))  # noqa: E731
    rows = [("drawTasks / task", round(draw_gas / n)),
            ("acceptTask (mean)", mean([b.send(b.market.functions.acceptTask(t), w) for t, w in tasks])),
            ("commitResult (mean)", mean([b.send(b.market.functions.commitResult(t, commitment(t, w)), w) for t, w in tasks])),
            ("revealResult (mean)", mean([b.send(b.market.functions.revealResult(t, ROOT, CID, SALT), w) for t, w in tasks]))]
    b.mine(201)
    rows.append(("finalizeMany / task", round(b.send(b.market.functions.finalizeMany([t for t, _ in tasks]), submitter) / n)))
    return rows


def stage_life(b: Bench, submitter: str) -> list[tuple[str, int]]:
    """A job split into 3 stages (one shard): one drawTasks for the group (each stage kept
    off the workers of the others), each stage accepted (a later accept extends the running
    ones), committed, revealed, and the group finalized by one finalizeMany; then, in a
    second group, a stage reporting it is blocked."""
    job_id, _ = b.create_job(submitter, 3, windows=(100, 200, 150), challenge_window=200, stages=3, rounds=1)
    receipt = b.draw_offers(job_id, submitter, 3)
    tasks = [(e["taskId"], e["worker"]) for e in b.events(receipt, b.market, "TaskDrawn")]
    mean = lambda gas: round(sum(gas) / len(gas))  # noqa: E731
    rows = [("drawTasks / stage", round((receipt["gasUsed"] + b.ask_gas) / len(tasks))),
            ("acceptTask (mean; extends the running stages)",
             mean([b.send(b.market.functions.acceptTask(t), w) for t, w in tasks])),
            ("commitResult (mean)", mean([b.send(b.market.functions.commitResult(t, commitment(t, w)), w) for t, w in tasks])),
            ("revealResult (mean)", mean([b.send(b.market.functions.revealResult(t, ROOT, CID, SALT), w) for t, w in tasks]))]
    b.mine(201)
    rows.append(("finalizeMany / stage (the group at once)",
                 round(b.send(b.market.functions.finalizeMany([t for t, _ in tasks]), submitter) / len(tasks))))
    job_id, _ = b.create_job(submitter, 3, windows=(100, 200, 150), challenge_window=200, stages=3, rounds=1)
    receipt = b.draw_offers(job_id, submitter, 3)
    task, worker = next((e["taskId"], e["worker"]) for e in b.events(receipt, b.market, "TaskDrawn"))
    b.send(b.market.functions.acceptTask(task), worker)
    rows.append(("reportStalled", b.send(b.market.functions.reportStalled(task), worker)))
    return rows


def mean_rows(lives: list[list[tuple[str, int]]]) -> list[tuple[str, int]]:
    """Each call's mean gas over `lives` (a call missing from a life counts 0 there)."""
    names = list(dict.fromkeys(name for life in lives for name, _ in life))
    return [(name, round(sum(dict(life).get(name, 0) for life in lives) / len(lives))) for name in names]


def compare(title: str, rows: list[tuple[str, int]], before: dict[str, int], target: bool = False) -> None:
    """A table of gas per call, after (this code) and before (BEFORE), with their ratio."""
    total = sum(g for _, g in rows)
    rows = rows + [("total", total)]
    before = dict(before, total=sum(before.values()))
    width = max(len(name) for name, _ in rows)
    print(f"\n{title}")
    print(f"  {'':<{width}}  {'after':>10}  {'before':>10}  after/before")
    for name, gas in rows:
        old = before.get(name, 0)
        print(f"  {name:<{width}}  {gas:>10,}  {old:>10,}  {gas / old:.2f}" if old else f"  {name:<{width}}  {gas:>10,}  {'':>10}")
    if target:
        print(f"  target ≤ {LIFE_TARGET:,}: {'met' if total <= LIFE_TARGET else 'MISSED'}")


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
        print("\nDeployed bytecode (EIP-170 limit 24,576 bytes; target ≥ 10 % headroom)")
        for name, size in rows:
            old = BEFORE["sizes"].get(name)
            print(f"  {name:<18}  {size:>7,}  headroom {1 - size / limit:>6.1%}" + (f"   before {old:,}" if old else "   (new)"))

        # A worker's first task pays first-time storage writes (its history counters, its
        # credit); later tasks of the same worker do not. Show both: the later task as the
        # mean of LATER_LIVES lives (one life moves by several thousand gas with the drawn
        # worker's place in the sortition tree).
        first_worker, first = task_life(b, submitter)
        seen, later = {first_worker}, []
        while len(later) < LATER_LIVES:
            worker, life = task_life(b, submitter)
            if worker in seen:
                later.append(life)
            seen.add(worker)
        repeat = mean_rows(later)
        for key, title in (("first", "a worker's first task"), ("later", f"a later task of the same worker (mean of {LATER_LIVES})")):
            compare(f"One task's life, no audit, one call each: {title}", first if key == "first" else repeat, BEFORE[key])

        b.new_account(2)  # a verifier, to audit
        compare("One task's life, audited (audit rate 100 %), one call each", audited_task_life(b, submitter), BEFORE["audited"])

        # Batches, in a pool of their own: the ten workers above step out, ten that take 8
        # tasks at once step in. The first batch pays the new workers' first credits and
        # history writes; the second, measured, does not.
        b.unheld()
        for worker in workers:
            b.send(b.pool.functions.leavePool(), worker)
        wide = [b.new_account(1, capability=(1, 24_576, 1_000, 3, BATCH_CONCURRENCY)) for _ in range(10)]
        b.refresh_deferred(workers + wide)
        batch_life(b, submitter, BATCH)
        compare(f"One task's life in batches: a job of {BATCH} shards over 10 workers (each takes "
                f"{BATCH_CONCURRENCY} at once), one drawTasks, one finalizeMany",
                batch_life(b, submitter, BATCH), BEFORE["batch"], target=True)
        # The same at the pool's capacity: 20 tasks over the ten workers that take 2 at once.
        # Each draw that fills a worker takes it out of the sortition tree and each release
        # puts it back (fresh storage both ways), which dominates this table.
        b.unheld()
        for worker in wide:
            b.send(b.pool.functions.leavePool(), worker)
        for worker in workers:
            b.send(b.pool.functions.joinPool(), worker)
        b.refresh_deferred(workers + wide)
        batch_life(b, submitter, 20)
        compare("One task's life in batches at the pool's capacity: 20 tasks over 10 workers that take 2 at once",
                batch_life(b, submitter, 20), BEFORE["capacity"])

        table("A job split into 3 stages: one group's life", stage_life(b, submitter))
        if "--lives" in sys.argv:
            return
        creates = [(f"createJob, {n:,} shards", b.create_job(submitter, n)[1]) for n in (10, 100, 1_000)]
        spread = max(g for _, g in creates) / min(g for _, g in creates) - 1
        table("createJob by shard count", creates, f"spread {spread:.2%} (target ≤ 5%)")

        draws = []
        for size in (10, 100, 1_000):
            while len(workers) < size:
                workers.append(b.new_account(1))
            b.refresh_deferred(workers)
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
