"""invariant_disputes_tokensConserved: seeded random interleavings of challenges, audit mismatches,
honest and stalling moves, clock expiries, committee draws, honest, lying and silent
referees, verdicts, finalizations and withdrawals over several tasks at once. After every
step: tokens are conserved (Σ balances + burned == minted), the StakeManager and the market
hold exactly what they account for, the game holds nothing, no task is paid twice, and a
settled game leaves no stake locked for it."""

import random
from collections import Counter

from brownie import accounts, chain
from brownie.exceptions import TransactionError, VirtualMachineError

from tests.contracts.dispute_setup import *  # noqa: F401,F403
from truetrain.dispute import opening_claims
from truetrain.market.randomness import last_block

HONEST = trace()
CHEAT = diverged(HONEST, 3)
TRACES = {root_of(HONEST): HONEST, root_of(CHEAT): CHEAT}
#: Seeded random walks: each seed is one sequence of OPS random actions (deterministic, so the
#: coverage check at the end cannot flake). The market-wide hypothesis state machine
#: (test_market_stateful.py) also routes its disputes through the game.
SEEDS = (1, 2, 3, 4)
OPS = 45


def _try(fn, *args):
    try:
        return fn(*args)
    except VirtualMachineError:
        return None
    except TransactionError:
        # brownie 1.22 now and then reports a mined tx as dropped on a busy Anvil (see
        # test_market_gas.py); the invariants read the chain, so the walk goes on
        return None


def test_invariant_disputes_tokensConserved(job_market, game, token, stake_manager, pool, registry, submitter, deployer, w1, w2, v1, v2, referees, challenger, market_isolation):
    pool.joinPool({"from": w2})
    holders = [submitter, w1, w2, v1, v2, challenger, deployer, job_market, stake_manager, pool, game] + referees
    stakers = [w1, w2, v1, v2, challenger] + referees
    seen = Counter()

    class Disputes:
        def __init__(self):
            self.tasks = []
            self.paid = Counter()
            self.beat = chain.height

        @property
        def games(self):
            return list(range(1, game.gameCount() + 1))

        def _tx(self, fn, *args):
            tx = _try(fn, *args)
            if tx is not None:
                for ev in tx.events:
                    seen[ev.name] += 1
                    if ev.name == "TaskFinalized":
                        self.paid[ev["taskId"]] += 1
            return tx

        def _revealed(self, honest, audit):
            job = self._tx(job_market.createJob, job_params(challengeWindow=40, auditRateBps=10_000 if audit else 0), {"from": submitter})
            if job is None:
                return None
            drawn = self._tx(draw_task, job_market, job.return_value, {"from": submitter})
            if drawn is None:
                return None
            tid, worker = drawn.return_value, accounts.at(drawn.events["TaskDrawn"]["worker"], force=True)
            root = root_of(HONEST if honest else CHEAT)
            self._tx(job_market.acceptTask, tid, {"from": worker})
            self._tx(job_market.commitResult, tid, commitment(tid, root, CID, SALT, worker), {"from": worker})
            if audit:  # the audit draw settles from a later block's hash
                mine_past_ticket(job_market, tid)
                self._tx(job_market.settleAudit, tid, {"from": submitter})
            auditor = job_market.taskOf(tid)[4]
            if int(auditor, 16):
                # the auditor is honest: it disagrees exactly with a cheating worker
                auditor = accounts.at(auditor, force=True)
                self._tx(job_market.commitAudit, tid, audit_commitment(tid, root_of(HONEST), SALT, auditor), {"from": auditor})
                self._tx(job_market.revealResult, tid, root, CID, SALT, {"from": worker})
                self._tx(job_market.revealAudit, tid, root_of(HONEST), SALT, {"from": auditor})
            else:
                self._tx(job_market.revealResult, tid, root, CID, SALT, {"from": worker})
            self.tasks.append(tid)
            return tid

        def directed_game(self):
            """A cheating worker's task challenged and played straight to its committee, whose
            first referee stays silent: whatever the walks' draws gave (their block hashes
            follow the wall clock), every phase of a game is reached at least once."""
            for seat_owner in [w1, w2, v1, v2] + referees:
                registry.heartbeat({"from": seat_owner})
            tid = self._revealed(False, False)
            assert tid is not None
            self.challenge(self.tasks.index(tid), challenger)
            gid = game.gameOfTask(tid)
            for _ in range(40):  # bisection moves, then the draw, the votes and the verdict
                g = view(game, gid)
                if g.status in (GS.RESOLVED, GS.VOIDED):
                    break
                self._step(gid, 1 if g.status in (GS.COMMITTING, GS.REVEALING) else 0)
                self.tokens_conserved()
            assert view(game, gid).status == GS.RESOLVED

        def new_task(self, honest, audit):
            self._revealed(honest, audit)

        def advance(self, i, honest):
            """Progress: step an open game, else challenge a task in its window, else add a
            cheating worker's task (so even all-zero actions play whole disputes)."""
            if any(view(game, g).status not in (GS.RESOLVED, GS.VOIDED) for g in self.games):
                self.play(i, honest)
                return
            waiting = [t for t in self.tasks if job_market.taskOf(t)[1] in (TS.CHALLENGE, TS.DISPUTED)]
            if waiting:
                self.challenge(self.tasks.index(waiting[0]), stakers[(i + honest) % len(stakers)])
            else:
                self.new_task(False, False)

        def challenge(self, i, who):
            if not self.tasks:
                return
            tid = self.tasks[i % len(self.tasks)]
            t = job_market.taskOf(tid)
            if t[1] == TS.DISPUTED and game.gameOfTask(tid) == 0 or t[1] == TS.DISPUTED and view(game, game.gameOfTask(tid)).status in (GS.RESOLVED, GS.VOIDED):
                self._tx(game.openAuditDispute, tid, {"from": who})
                return
            if t[1] != TS.CHALLENGE:
                return
            mine = CHEAT if TRACES[hx(t[5])] is HONEST else HONEST
            opening = [c.as_tuple() for c in opening_claims(mine, cids(mine))]
            self._tx(game.challenge, tid, root_of(mine), opening, {"from": who})

        def play(self, i, honest):
            """One step of each of the last three open games; ``honest`` 1 stalls (or stays
            silent), 2 lies (referees), 0 and 3 play straight."""
            live = [g for g in self.games if view(game, g).status not in (GS.RESOLVED, GS.VOIDED)][-3:]
            for n, gid in enumerate(live):
                self._step(gid, (honest + n * (i % 2)) % 4)

        def _step(self, gid, honest):
            step_game(game, gid, TRACES, HONEST, self._tx, submitter, {1: "stall", 2: "lie"}.get(honest, "straight"))

        def finalize(self, i):
            if self.tasks:
                chain.mine(41)
                self._tx(job_market.finalize, self.tasks[i % len(self.tasks)], {"from": submitter})

        def withdraw(self, who):
            self._tx(stake_manager.withdraw, {"from": who})
            self._tx(job_market.withdraw, {"from": who})

        def walk(self, rng):
            """OPS random actions, the invariants checked after each one."""
            ops = [(rng.randrange(10), rng.randrange(21), rng.randrange(4), rng.choice(stakers)) for _ in range(OPS)]
            for action, i, honest, who in ops:
                if action == 0:
                    self.advance(i, honest)
                elif action == 1:
                    self.new_task(honest > 1, i % 2 == 1)
                elif action == 2:
                    self.challenge(i, who)
                elif action < 7:
                    self.play(i, honest)
                elif action == 7:
                    self.finalize(i)
                elif action == 8:
                    self.withdraw(who)
                else:
                    self.new_task(False, True)
                self.keep_alive()
                self.keep_drawing(honest)
                self.tokens_conserved()
                self.no_task_paid_twice()
                self.settled_games_release_their_stakes()

        def keep_alive(self):
            """The members heartbeat as their daemons would: draws' tickets and windows move the
            chain on by hundreds of blocks, past the pool's liveness window."""
            if chain.height - self.beat >= LIVENESS // 2:
                for member in [w1, w2, v1, v2] + referees:
                    registry.heartbeat({"from": member})
                self.beat = chain.height

        def keep_drawing(self, honest):
            """A keeper settles a committee draw once its ticket can be read and the referees
            vote at once, as their daemons do (each as this step's ``honest`` says): a step
            that mines on (a finalize, a clock run out) would otherwise carry the draw past
            its epoch's end, or the vote past its window, and every committee would fail."""
            for gid in self.games:
                g = view(game, gid)
                if g.status == GS.AWAITING_REFEREES and g.deadline <= chain.height < last_block(g.deadline):
                    for _ in range(3):  # the draw, the commitments, the reveals and the verdict
                        self._step(gid, honest)

        def tokens_conserved(self):
            assert sum(token.balanceOf(h) for h in holders) + token.totalBurned() == token.totalMinted()
            assert token.balanceOf(stake_manager) >= stake_manager.totalStaked() + stake_manager.totalCredits()
            assert token.balanceOf(job_market) >= job_market.totalEscrow() + job_market.totalCredits()
            assert token.balanceOf(game) == 0

        def no_task_paid_twice(self):
            assert all(n == 1 for n in self.paid.values())

        def settled_games_release_their_stakes(self):
            # every task here is its account's only one: once nothing is open, nothing is locked
            every_task = [t for j in range(1, job_market.jobCount() + 1) for t in job_market.tasksOf(j, 0, 8)]
            open_tasks = [t for t in every_task if job_market.taskOf(t)[1] not in (TS.FINALIZED, TS.PENDING, TS.NONE)]
            open_games = [g for g in self.games if view(game, g).status not in (GS.RESOLVED, GS.VOIDED)]
            if not open_tasks and not open_games:
                assert all(stake_manager.stakeOf(a)[1] == 0 for a in stakers)

    walker = Disputes()  # one world: each seed's walk goes on from where the last one left it
    for seed in SEEDS:
        walker.walk(random.Random(seed))
    walker.directed_game()
    # Every phase of the game was reached.
    assert all(seen[name] > 0 for name in ("TaskChallenged", "TaskDisputed", "DisputeBisected", "ClockExpired", "RefereesDrawn", "VoteRevealed", "RefereePenalized", "DisputeSettled")), sorted(seen.items())
