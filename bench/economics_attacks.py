"""Issue 27's strategies for bench/economics.py: split jobs and the cheapest terms.

Each plays on the economy of bench/economy.py and returns its row (a ``Result``):

- a stage that cheats in a split job at the default settings: stages draw no audits, an
  honest verifier replays a stage with its default ``stage_sample_rate`` and challenges a
  wrong one;
- a free stall: a stage worker accepts, reports itself stalled at once and does nothing;
- reputation by self-challenge: its own job, challenged by its sybil with a root of the same
  result;
- dust-collateral referee griefing: a coalition plays games down to the referees at the
  least collateral the contracts allow (a dust collateral is refused first);
- reward-0 penalty farming: a job paying nothing is refused; the cheapest one is run by
  workers that accept.

Each ``str`` the contracts answer a refused call with is the custom error's name, as the
devstack decodes it.
"""

from __future__ import annotations

import random

from devstack import ROLE_SUBMITTER, ROLE_WORKER, Bench, E  # sets sys.path
from economy import Economy, Result, wealth
from players import CHEAT_ROOT, HONEST, HONEST_ROOT, LEAVES, SAME_END, Players
from truetrain.daemon.settings import DaemonSettings
from truetrain.market import economics as model

STATUS_PENDING, STATUS_OFFERED = 1, 2  # IJobMarket.TaskStatus
#: The verifier's default share of stage tasks it replays (``--stage-sample-rate``).
STAGE_SAMPLE_RATE = DaemonSettings.__dataclass_fields__["stage_sample_rate"].default
STAGES = 2


def _cheapest_terms(eco: Economy) -> dict:
    p = model.cheapest(eco.params)
    return {**eco.job_terms(), "reward": p.reward, "audit_fee": p.audit_fee, "collateral": p.collateral, "audit_bps": 0}


def _refused(b: Bench, sender: str, shards: int = 1, **terms) -> str:
    """The custom error createJob reverts with for ``terms`` (stops the bench if it does not)."""
    call = b.market.functions.createJob(b.job_params(shards, **terms))
    why = b._why(call, sender)
    if why.startswith("out of gas"):
        raise SystemExit(f"createJob accepted {terms}")
    return why.split("(")[0]


def _stage_job(eco: Economy, players: Players) -> tuple[int, dict[int, str]]:
    """A one-round job of one group of STAGES stages (default terms, no audits: the
    contracts refuse an audit rate on a split job), every stage drawn: (job, task → worker)."""
    job_id, _ = eco.b.create_job(eco.keeper, STAGES, rounds=1, leaves=LEAVES, stages=STAGES,
                                 **{**eco.job_terms(), "audit_bps": 0})
    drawn: dict[int, str] = {}
    for _ in range(5):  # a stage draw that lands on a sibling's worker misses; it is called again
        receipt = eco.b.draw_offers(job_id, eco.keeper, STAGES - len(drawn))
        drawn |= {e["taskId"]: e["worker"] for e in eco.b.events(receipt, eco.b.market, "TaskDrawn")}
        if len(drawn) == STAGES:
            for task_id, worker in drawn.items():
                eco.b.send(players.m.acceptTask(task_id), worker)
            return job_id, drawn
    raise RuntimeError(f"job {job_id}: only {len(drawn)} of {STAGES} stages drawn")


def _stop(eco: Economy, job_id: int, submitter: str, shards: int) -> None:
    """Cancel the job and close what it still offers or waits to draw, so no worker keeps
    collateral or a pool slot for it and its submitter gets back what was not spent."""
    m = eco.b.market.functions
    eco.b.send(m.cancelJob(job_id), submitter)
    for index in range(shards + 1):
        task_id = m.taskId(job_id, 0, index).call()
        if eco.b.task(task_id)["status"] in (STATUS_PENDING, STATUS_OFFERED):
            eco.b.send(m.closeTask(task_id), eco.keeper)


def _run(players: Players, task_id: int, worker: str, root: bytes) -> None:
    players.commit(task_id, worker, root)
    players.reveal(task_id, worker, root)


# ---------------------------------------------------------------- the strategies


def stage_cheat(eco: Economy, n: int) -> Result:
    """A stage worker reveals a wrong result beside an honest one; an honest verifier
    replays the stage with the default stage sample rate and challenges it when wrong."""
    cast, _ = eco.cast()
    cheater, partner = eco.worker(), eco.worker()
    players, t, seen, rng = Players(eco.b, cast), eco.terms, [], random.Random(27)
    replayer = cast.verifiers[0]
    for _ in range(n):
        before = eco.b.wealth(cheater)
        job_id, drawn = _stage_job(eco, players)
        ours = next(task_id for task_id, w in drawn.items() if w == cheater)
        for task_id, worker in drawn.items():
            _run(players, task_id, worker, CHEAT_ROOT if worker == cheater else HONEST_ROOT)
        if rng.random() < STAGE_SAMPLE_RATE:
            settled = players.play(players.challenge(ours, replayer, HONEST))
            outcome = "replayed: challenged, won the game" if settled["workerWon"] else "replayed: challenged, lost the game"
        else:
            eco.b.mine(t.challenge_window + 1)
            eco.b.send(players.m.finalizeMany(sorted(drawn)), eco.keeper)
            outcome = "not replayed: paid"
        _stop(eco, job_id, eco.keeper, STAGES)
        seen.append((outcome, eco.b.wealth(cheater) - before))
    p = model.Parameters(**{**eco.params.__dict__, "audit_rate_bps": 0})
    return Result("stage cheat (split job, defaults)", "stage worker", model.stage_cheat(p, STAGE_SAMPLE_RATE),
                  seen, note=f"{STAGES} stages a job, no audits; the verifiers' default stage sample rate is "
                             f"{STAGE_SAMPLE_RATE:g}")


def free_stall(eco: Economy, n: int) -> Result:
    """A stage worker accepts, reports itself stalled at once and does nothing; its sibling
    commits and reveals; the keeper times the staller out at its deadline."""
    cast, _ = eco.cast()
    staller, partner = eco.worker(), eco.worker()
    players, seen, reset = Players(eco.b, cast), [], 0
    for _ in range(n):
        before = eco.b.wealth(staller)
        job_id, drawn = _stage_job(eco, players)
        ours = next(task_id for task_id, w in drawn.items() if w == staller)
        eco.b.send(players.m.reportStalled(ours), staller)
        for task_id, worker in drawn.items():
            if worker != staller:
                _run(players, task_id, worker, HONEST_ROOT)
        eco.b.mine_past(eco.b.task(ours)["deadline"])
        receipt = eco.b.receipt(players.m.timeoutTask(ours), eco.keeper)
        timed_out = eco.b.events(receipt, eco.b.market, "TaskTimedOut")
        reset += len(eco.b.events(receipt, eco.b.market, "StageReset"))
        outcome = ("stall not borne out: timeout penalty" if any(e["account"] == staller for e in timed_out)
                   else "stall excused: free")
        _stop(eco, job_id, eco.keeper, STAGES)
        seen.append((outcome, eco.b.wealth(staller) - before))
    return Result("free stall (report, then idle)", "stage worker", model.false_stall(eco.params), seen,
                  note=f"the honest sibling sent back unpaid and unpenalised {reset} times in {n}")


def self_challenge(eco: Economy, n: int) -> Result:
    """A worker's own cheapest job; its sybil challenges the result with a root of the same
    result hash and the worker's first move wins."""
    cast, _ = eco.cast()
    worker = eco.worker(ROLE_WORKER | ROLE_SUBMITTER)
    sybil = eco.b.new_account(ROLE_SUBMITTER, 5_000 * E, join=False)
    b, players, seen = eco.b, Players(eco.b, cast), []
    b.send(b.token.functions.mint(worker, 1_000 * E), b.deployer.address)
    b.send(b.token.functions.approve(b.market.address, 2**256 - 1), worker)
    refused = (_refused(b, worker, reward=0, audit_fee=0, collateral=1),
               _refused(b, worker, reward=1, audit_fee=0, collateral=1))
    terms = _cheapest_terms(eco)
    b.send(b.pool.functions.refresh(worker), worker)
    before_rep = (b.registry.functions.reputationOf(worker).call(), b.pool.functions.weightOf(worker, False).call())
    for _ in range(n):
        before = wealth(b, [worker, sybil])
        task_id = players.new_task(worker, worker, **terms)
        b.send(players.m.acceptTask(task_id), worker)
        _run(players, task_id, worker, HONEST_ROOT)
        settled = players.play(players.challenge(task_id, sybil, SAME_END))
        outcome = "won its own game: no reputation" if settled["workerWon"] else "lost its own game"
        players.finalize(task_id, terms["challenge_window"])
        b.send(players.m.cancelJob(task_id >> 64), worker)
        seen.append((outcome, wealth(b, [worker, sybil]) - before))
    b.send(b.pool.functions.refresh(worker), worker)
    after_rep = (b.registry.functions.reputationOf(worker).call(), b.pool.functions.weightOf(worker, False).call())
    note = (f"the finding's terms refused (reward 0: {refused[0]}; a 1-wei collateral: {refused[1]}); on the "
            f"cheapest job: reputation "
            f"{before_rep[0]} -> {after_rep[0]}, draw weight {before_rep[1]} -> {after_rep[1]}")
    if after_rep != before_rep:
        raise SystemExit(f"self-challenge moved reputation or draw weight: {note}")
    return Result("reputation by self-challenge", "worker + sybil", model.self_challenge(model.cheapest(eco.params)),
                  seen, note)


def dust_referees(eco: Economy, n: int) -> Result:
    """A submitter, worker and challenger (sybils, unlinked on chain) play games down to the
    referees on the least collateral allowed, to make referees lock stake."""
    cast, _ = eco.cast()
    verifiers = list(cast.verifiers)  # (the cast's list grows with the workers after it)
    b, players, seen = eco.b, Players(eco.b, cast), []
    submitter, worker = b.new_submitter(), eco.worker()
    challenger = b.new_account(ROLE_SUBMITTER, 5_000 * E, join=False)
    coalition = [submitter, worker, challenger]
    refused = _refused(b, submitter, reward=1, audit_fee=0, collateral=1)
    terms, locked, paid, seats = _cheapest_terms(eco), b.game.functions.refereeStake().call(), 0, 0
    for _ in range(n):
        before, referees = wealth(b, coalition), {v: b.wealth(v) for v in verifiers}
        task_id = players.new_task(worker, submitter, **terms)
        b.send(players.m.acceptTask(task_id), worker)
        _run(players, task_id, worker, CHEAT_ROOT)
        game_id = players.challenge(task_id, challenger, HONEST)
        settled = players.play(game_id)
        seated = [s[0] for s in players.g.committeeOf(game_id).call()]
        _stop(eco, job_id=task_id >> 64, submitter=submitter, shards=1)
        gained = {v: b.wealth(v) - w for v, w in referees.items()}
        if min(gained.values()) < 0:
            raise SystemExit(f"an honest referee lost in a dust game: {gained}")
        seats, paid = seats + len(seated), paid + sum(gained.values())
        outcome = "game down to the referees: lost its bond" if not settled["workerWon"] else "worker won"
        seen.append((outcome, wealth(b, coalition) - before))
    p = model.cheapest(eco.params)
    note = (f"a 1-wei collateral refused ({refused}); at the least ({p.collateral / E:g} TRAIN, reward "
            f"{p.reward / E:g}): {seats} referee seats locked {locked / E:g} TRAIN each while they voted, paid "
            f"{paid / E / max(seats, 1):.4f} TRAIN a seat (model {model.referee_pay(p) / E:.4f}); no honest referee lost")
    return Result("dust-collateral referee griefing", "submitter + worker + challenger", model.dust_game(p), seen, note)


def penalty_farming(eco: Economy, n: int) -> Result:
    """A submitter tries a job that pays nothing, then runs the cheapest one again and again,
    hoping for accept penalties; its workers accept and are paid."""
    cast, _ = eco.cast()
    b, players, seen = eco.b, Players(eco.b, cast), []
    farmer = b.new_submitter()
    workers = [eco.worker(), eco.worker()]
    refused = _refused(b, farmer, reward=0)
    terms = _cheapest_terms(eco)
    for _ in range(n):
        before = b.wealth(farmer)
        job_id, _ = b.create_job(farmer, 1, rounds=1, leaves=LEAVES, **terms)
        task_id, worker, _ = b.draw(job_id, eco.keeper)
        assert worker in workers
        b.send(players.m.acceptTask(task_id), worker)
        _run(players, task_id, worker, HONEST_ROOT)
        players.finalize(task_id, terms["challenge_window"])
        _stop(eco, job_id, farmer, 1)
        seen.append(("offer accepted: reward paid", b.wealth(farmer) - before))
    p = model.cheapest(eco.params)
    return Result("reward-0 penalty farming", "submitter", model.penalty_farming(p), seen,
                  note=f"reward 0 refused ({refused}); cheapest job: reward {p.reward / E:g}, collateral "
                       f"{p.collateral / E:g}: an ignored offer's penalty ({p.penalty(p.accept_penalty_bps) / E:g}) "
                       f"is burned, not paid to the farmer, and the task is offered again")


#: By --only name, in the order bench/economics.py plays them.
STRATEGIES = {
    "stage-cheat": stage_cheat,
    "free-stall": free_stall,
    "self-challenge": self_challenge,
    "dust-referees": dust_referees,
    "penalty-farming": penalty_farming,
}
