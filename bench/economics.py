"""Expected profit per task of each strategy, from the contracts' parameters, checked on a devnet.

For every strategy issue 12 names (honest; wrong result; wrong result then silent when
audited; audit peeking; auditor collusion; referee seat buying; self-dealing for
reputation; challenge spam; griefing by never settling) and issue 27's (audit-draw grinding
by stake top-up, here; the seat buyer also tries top-ups before each committee draw; and in
bench/economics_attacks.py: a stage that cheats in a split job at the default settings, a
free stall, reputation by self-challenge, dust-collateral referee griefing, reward-0 penalty
farming) and issue 30's (a submitter that withholds or corrupts its data, in
bench/economics_withholding.py), this prints the expected profit per task at the default job terms (the submitter
CLI's; issue 27's cheap-terms rows at the cheapest terms the contracts allow) and the
deployment's defaults, as ``truetrain.market.economics`` computes it from the parameters
read off the deployed contracts, then plays the strategy for --tasks tasks on a fresh Anvil
with the real contracts and checks, task by task, that the party's measured change of
wealth (wallet + stake + credits) is exactly the payoff the model gives the outcome the
devnet drew, and that the outcomes came about as often as the model says (a 3-sigma band).
It exits 1 unless every dishonest row loses (model and devnet) and every payoff is exact.

Colluders hold 23 % of the verifiers' weight (the seat buyer of the issue's finding 2): one
identity for auditor collusion, three for seat buying. Gas and computing are left out (a
cheater saves the computing, so cheating must lose tokens even when computing is free).
The economy (cast, keeper, a row's checks) is bench/economy.py.

    .venv/bin/python bench/economics.py [--tasks 50] [--only NAME[,NAME]]
"""

from __future__ import annotations

import argparse
from collections import Counter

import economics_attacks
import economics_withholding
from devstack import CID, ROLE_SUBMITTER, ROLE_VERIFIER, ROLE_WORKER, SALT, Bench, E, commitment  # sets sys.path
from economy import HONEST_VERIFIERS, VERIFIER_STAKE, Economy, Result, deploy_contract, wealth
from players import CHEAT_ROOT, HONEST_ROOT, SPAM, TOP_UPS, Players
from truetrain.chain.artifacts import decode_error
from truetrain.chain.deploy import StackParams
from truetrain.chain.devnet import free_port, start_anvil
from truetrain.market import economics as model
from web3.exceptions import ContractCustomError


def run_worker_strategy(eco: Economy, players: Players, worker: str, parties: list[str], n: int, *,
                        root: bytes, silent_when_audited: bool = False, peeker=None, owner: str | None = None,
                        submitter: str | None = None) -> list[tuple[str, int]]:
    """``n`` one-task jobs run by ``worker``: commit ``root``; the audit draw settled by the
    keeper; an honest auditor's mismatch goes to the game; a colluder confirms."""
    t, seen = eco.terms, []
    sender = owner or worker
    for _ in range(n):
        before = wealth(eco.b, parties)
        if peeker is not None:
            task_id = players.new_task(worker, submitter, **eco.job_terms())
            players.b.send(peeker.accept(task_id), sender)
            _peek(players, peeker, task_id, root, sender)
        else:
            task_id = players.new_task(worker, submitter, **eco.job_terms())
            players.b.send(players.m.acceptTask(task_id), worker)
        players.commit(task_id, worker, root, sender, via=peeker)
        auditor = players.settle_audit(task_id, t.reveal_window)
        outcome = "not audited: paid" if root != HONEST_ROOT else "not audited"
        if auditor is not None:
            audit_root = players.audit_commit(task_id, auditor, root)
            if silent_when_audited:
                players.time_out(task_id)
                seen.append(("audited: lost the game", wealth(eco.b, parties) - before))
                continue
            players.reveal(task_id, sender, root, via=peeker)
            players.b.send(players.m.revealAudit(task_id, audit_root, SALT), auditor)
            if audit_root == root:
                outcome = "colluder audited: confirmed" if auditor in players.cast.colluders else "audited, confirmed"
            else:
                outcome = _audit_game(eco, players, task_id)
                if submitter:
                    eco.b.send(eco.b.market.functions.cancelJob(task_id >> 64), submitter)
                seen.append((outcome, wealth(eco.b, parties) - before))
                continue
        else:
            players.reveal(task_id, sender, root, via=peeker)
        players.finalize(task_id, t.challenge_window)
        if submitter:
            eco.b.send(eco.b.market.functions.cancelJob(task_id >> 64), submitter)
        seen.append((outcome, wealth(eco.b, parties) - before))
    return seen


def _audit_game(eco: Economy, players: Players, task_id: int) -> str:
    game_id = players.open_audit_game(task_id)
    seats_probe = bool(players.cast.colluders)
    settled = players.play(game_id, probe=seats_probe)
    seated = [s[0] for s in players.g.committeeOf(game_id).call()]
    k = sum(1 for r in seated if r in players.cast.colluders)
    if not players.cast.colluders:
        return "audited: lost the game" if not settled["workerWon"] else "audited: won the game"
    verdict = "verdict bought" if settled["workerWon"] else "lost the game"
    return f"honest audit, colluders on {k} of {len(seated)} seats: {verdict}"


def _peek(players: Players, peeker, task_id: int, root: bytes, sender: str) -> None:
    """The attacker contract tries to learn its audit draw inside its own commit; count how
    each try ended (the error it reverted with, or "succeeded")."""
    sealed = commitment(task_id, peeker.address, root)
    for call in (peeker.commitAndPeekBySettling(task_id, sealed),
                 peeker.commitAndPeekByRevealing(task_id, sealed, root, CID, SALT)):
        try:
            call.call({"from": sender})
            PEEKS["succeeded"] += 1
        except ContractCustomError as exc:
            PEEKS[decode_error(bytes.fromhex(str(exc.data)[2:]))[0]] += 1


PEEKS: Counter = Counter()


# ---------------------------------------------------------------- the strategies


def honest(eco: Economy, n: int) -> Result:
    cast, _ = eco.cast()
    worker = eco.worker()
    seen = run_worker_strategy(eco, Players(eco.b, cast), worker, [worker], n, root=HONEST_ROOT)
    return Result("honest", "worker", model.honest(eco.params), seen, dishonest=False)


def wrong_result(eco: Economy, n: int) -> Result:
    cast, _ = eco.cast()
    worker = eco.worker()
    seen = run_worker_strategy(eco, Players(eco.b, cast), worker, [worker], n, root=CHEAT_ROOT)
    return Result("wrong result", "worker", model.wrong_result(eco.params), seen)


def wrong_then_silent(eco: Economy, n: int) -> Result:
    cast, _ = eco.cast()
    worker = eco.worker()
    seen = run_worker_strategy(eco, Players(eco.b, cast), worker, [worker], n, root=CHEAT_ROOT,
                               silent_when_audited=True)
    return Result("wrong result, silent when audited", "worker", model.wrong_result(eco.params), seen)


def audit_peeking(eco: Economy, n: int) -> Result:
    cast, _ = eco.cast()
    owner = eco.b.new_submitter()  # the account that runs the attacker contract
    peeker = _deploy_peeker(eco, owner)
    seen = run_worker_strategy(eco, Players(eco.b, cast), peeker.address, [peeker.address], n, root=CHEAT_ROOT,
                               silent_when_audited=True, peeker=peeker.functions, owner=owner)
    return Result("audit peeking (worker is a contract)", "worker contract", model.wrong_result(eco.params), seen,
                  note=f"peeks: {dict(PEEKS)}")


def audit_grinding(eco: Economy, n: int) -> Result:
    """A worker holding verifier stake (a contract: StakeGrinder) commits wrong results and,
    once each ticket's hash is public, tries every top-up in TOP_UPS (``eth_call`` of the
    top-up and the settlement in one call) for one that waives its audit or moves it;
    audited, it goes silent. The draw reads weights held since the ticket: no top-up moves it."""
    cast, _ = eco.cast()
    owner = eco.b.new_submitter()
    grinder = deploy_contract(eco, owner, "StakeGrinder", eco.b.market.address, eco.b.stake.address, eco.b.token.address)
    eco.b.send(eco.b.token.functions.mint(grinder.address, 6_000 * E), eco.b.deployer.address)
    eco.b.send(grinder.functions.enlist(eco.b.registry.address, eco.b.pool.address, ROLE_WORKER | ROLE_VERIFIER,
                                        5_000 * E), owner)
    eco._settle_weights([grinder.address])
    players, t, seen, steered = Players(eco.b, cast), eco.terms, [], 0
    for _ in range(n):
        before = eco.b.wealth(grinder.address)
        task_id = players.new_task(grinder.address, **eco.job_terms())
        eco.b.send(grinder.functions.accept(task_id), owner)
        players.commit(task_id, grinder.address, CHEAT_ROOT, owner, via=grinder.functions)
        eco.b.mine_past(eco.b.task(task_id)["deadline"] - t.reveal_window)
        tried = {grinder.functions.topUpAndSettle(task_id, x).call({"from": owner}) for x in [0, *TOP_UPS]}
        steered += len(tried) > 1
        auditor = players.settle_audit(task_id, t.reveal_window)
        if auditor is not None:
            players.audit_commit(task_id, auditor, CHEAT_ROOT)
            players.time_out(task_id)
            seen.append(("audited: lost the game", eco.b.wealth(grinder.address) - before))
            continue
        players.reveal(task_id, owner, CHEAT_ROOT, via=grinder.functions)
        players.finalize(task_id, t.challenge_window)
        seen.append(("not audited: paid", eco.b.wealth(grinder.address) - before))
    eco.b.send(grinder.functions.leave(eco.b.pool.address), owner)
    share = 5_000 / (5_000 + HONEST_VERIFIERS * VERIFIER_STAKE / E)
    return Result("audit-draw grinding by stake top-up", "worker contract", model.wrong_result(eco.params), seen,
                  note=f"the grinder holds {share:.0%} of the verifier stake; draws a top-up of {len(TOP_UPS)} "
                       f"tried would have moved or waived: {steered} of {n}")


def _deploy_peeker(eco: Economy, owner: str):
    peeker = deploy_contract(eco, owner, "AuditPeeker", eco.b.market.address)
    eco.b.send(eco.b.token.functions.mint(peeker.address, 5_000 * E), eco.b.deployer.address)
    eco.b.send(peeker.functions.enlist(eco.b.registry.address, eco.b.stake.address, eco.b.pool.address,
                                       eco.b.token.address, 5_000 * E), owner)
    return peeker


def collusion(eco: Economy, n: int, identities: int, name: str) -> Result:
    cast, weights = eco.cast(identities)
    worker = eco.worker()
    players = Players(eco.b, cast)
    seen = run_worker_strategy(eco, players, worker, [worker, *cast.colluders], n, root=CHEAT_ROOT)
    outcomes = model.colluding(eco.params, weights, cast.colluders)
    share = sum(weights[c] for c in cast.colluders) / sum(weights.values())
    note = f"colluders hold {share:.1%} of the verifier weight in {identities} identit{'y' if identities == 1 else 'ies'}"
    if identities > 1:
        steer = sum(cast.steerable_draws)
        note += (f"; referee draws that calling at another block or a colluder's top-up ({len(TOP_UPS)} tried) "
                 f"would have changed: {steer} of {len(cast.steerable_draws)}")
    return Result(name, "worker + colluders", outcomes, seen, note)


def self_dealing(eco: Economy, n: int) -> Result:
    cast, _ = eco.cast()
    dealer = eco.worker(ROLE_WORKER | ROLE_SUBMITTER)
    eco.b.send(eco.b.token.functions.mint(dealer, 10_000 * E), eco.b.deployer.address)
    eco.b.send(eco.b.token.functions.approve(eco.b.market.address, 2**256 - 1), dealer)
    before = (eco.b.registry.functions.reputationOf(dealer).call(), eco.b.pool.functions.weightOf(dealer, False).call())
    seen = run_worker_strategy(eco, Players(eco.b, cast), dealer, [dealer], n, root=HONEST_ROOT, submitter=dealer)
    seen = [("audited: fee paid to the auditor" if o.startswith("audited") else "not audited", p) for o, p in seen]
    after = (eco.b.registry.functions.reputationOf(dealer).call(), eco.b.pool.functions.weightOf(dealer, False).call())
    note = f"reputation {before[0]} -> {after[0]}, draw weight {before[1]} -> {after[1]}"
    if after != before:
        raise SystemExit(f"self-dealing moved reputation or draw weight: {note}")
    return Result("self-dealing for reputation", "worker = submitter", model.self_dealing(eco.params), seen, note)


def challenge_spam(eco: Economy, n: int) -> Result:
    cast, _ = eco.cast()
    worker = eco.worker()
    spammer = eco.b.new_account(ROLE_SUBMITTER, 5_000 * E, join=False)
    players, t, seen = Players(eco.b, cast), eco.terms, []
    for _ in range(n):
        task_id = players.new_task(worker, **eco.job_terms())
        players.b.send(players.m.acceptTask(task_id), worker)
        players.commit(task_id, worker, HONEST_ROOT)
        auditor = players.settle_audit(task_id, t.reveal_window)
        if auditor is not None:
            players.audit_commit(task_id, auditor, HONEST_ROOT)
        players.reveal(task_id, worker, HONEST_ROOT)
        if auditor is not None:
            players.b.send(players.m.revealAudit(task_id, HONEST_ROOT, SALT), auditor)
        before = eco.b.wealth(spammer)
        settled = players.play(players.challenge(task_id, spammer, SPAM))
        seen.append(("challenge lost" if settled["workerWon"] else "challenge won", eco.b.wealth(spammer) - before))
        players.finalize(task_id, t.challenge_window)
    return Result("challenge spam", "challenger", model.challenge_spam(eco.params), seen)


def never_settling(eco: Economy, n: int) -> Result:
    cast, _ = eco.cast()
    worker = eco.worker()
    players, seen = Players(eco.b, cast), []
    for _ in range(n):
        before = eco.b.wealth(worker)
        task_id = players.new_task(worker, **eco.job_terms())
        players.b.send(players.m.acceptTask(task_id), worker)
        players.commit(task_id, worker, CHEAT_ROOT)
        players.time_out(task_id)  # nobody settled the draw; its deadline passed
        seen.append(("timed out after its commitment", eco.b.wealth(worker) - before))
    return Result("griefing: never settling", "worker", model.never_settling(eco.params), seen)


#: By --only name, in the issues' order, except audit peeking last: its worker is a contract
#: with no way to leave the pool, so it would be drawn for the strategies after it.
STRATEGIES = {
    "honest": honest, "wrong": wrong_result, "silent": wrong_then_silent,
    "collusion": lambda eco, n: collusion(eco, n, 1, "auditor collusion"),
    "seat-buying": lambda eco, n: collusion(eco, n, 3, "referee seat buying (+ collusion)"),
    "self-dealing": self_dealing, "spam": challenge_spam, "never-settling": never_settling,
    "grinding": audit_grinding,
    **economics_attacks.STRATEGIES,
    **economics_withholding.STRATEGIES,
    "peeking": audit_peeking,
}


def table(results: list[Result], p: model.Parameters, n: int) -> None:
    print(f"\nExpected profit per task (TRAIN), default terms: reward {p.reward / E:g}, audit fee {p.audit_fee / E:g}, "
          f"collateral {p.collateral / E:g}, audit rate {p.audit_rate:.0%}, auditor collateral "
          f"{p.auditor_collateral / E:g}, committee {p.committee_size}, slash split {p.winner_bps / 100:g} % winner / "
          f"{p.referee_bps / 100:g} % referees; devnet: {n} tasks per strategy\n")
    a, b = max(len(r.name) for r in results), max(len(r.party) for r in results)
    print(f"| {'strategy':<{a}} | {'who':<{b}} | {'model':>8} | {'devnet':>8} | payoffs | outcomes |")
    print(f"|{'-' * (a + 2)}|{'-' * (b + 2)}|{'-' * 9}:|{'-' * 9}:|---|---|")
    for r in results:
        exact = "exact" if not r.mismatches() else f"{len(r.mismatches())} differ"
        freq = "as drawn" if r.frequency_ok() else "OFF (>3σ)"
        print(f"| {r.name:<{a}} | {r.party:<{b}} | {r.expected:>+8.2f} | {r.measured:>+8.2f} | {exact} | {freq} |")
    for r in results:
        counts = Counter(name for name, _ in r.seen)
        print(f"\n{r.name}: " + "; ".join(f"{k} ×{v}" for k, v in sorted(counts.items())) + (f"\n  {r.note}" if r.note else ""))
        for line in r.mismatches()[:5]:
            print("  MISMATCH " + line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50, help="tasks per strategy on the devnet (default 50)")
    parser.add_argument("--only", metavar="NAME[,NAME]", help=f"play only these strategies: {', '.join(STRATEGIES)}")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(STRATEGIES)
    if unknown := [name for name in names if name not in STRATEGIES]:
        parser.error(f"no strategy {', '.join(unknown)}; the strategies: {', '.join(STRATEGIES)}")
    n = args.tasks
    devnet = start_anvil(free_port())
    try:
        eco = Economy(Bench(devnet.url, StackParams(liveness_window_blocks=10_000_000)))
        results = [strategy(eco, n) for name, strategy in STRATEGIES.items() if name in names]
    finally:
        devnet.stop()
    table(results, eco.params, n)
    ok = (all(r.expected < 0 and r.measured < 0 for r in results if r.dishonest)
          and all(r.expected > 0 for r in results if not r.dishonest)
          and all(not r.mismatches() for r in results) and PEEKS["succeeded"] == 0)
    print("\nevery dishonest strategy loses:", "yes" if ok else "NO")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
