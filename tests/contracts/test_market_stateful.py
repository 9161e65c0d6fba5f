"""invariant_market_tokensConserved: generated sequences of stake / unstake / withdraw / create /
draw / accept / decline / commit / audit / reveal / timeout / finalize / challenge / dispute moves,
clocks, referee draws, votes and verdicts / cancel / close across several accounts; after
every step tokens are conserved (tracked totals ≤ balances: tokens are also sent straight to
the contracts) and no task is paid twice. Disputes run through the real DisputeGame with real
Merkle roots over two checkpoint traces (honest and cheating); audit and referee draws are
settled from the hashes of later blocks, as the contracts require. The sequences are
Hypothesis's derandomized draws (the same on every run, see ``fixed_draws``), and the test
checks which outcomes they reached."""

from collections import Counter

from brownie import chain
from brownie.exceptions import VirtualMachineError
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from tests.contracts.dispute_setup import *  # noqa: F401,F403
from tests.contracts.helpers import fixed_draws
from truetrain.dispute import opening_claims

HONEST = trace()
CHEAT = diverged(HONEST, 3)
TRACES = {root_of(HONEST): HONEST, root_of(CHEAT): CHEAT}
ROOT_H, ROOT_X = root_of(HONEST), root_of(CHEAT)



def _try(fn, *args):
    try:
        return fn(*args)
    except VirtualMachineError:
        return None


def test_invariant_market_tokensConserved(job_market, game, token, stake_manager, pool, registry, submitter, deployer, w1, w2, v1, v2, referees, market_isolation):
    pool.joinPool({"from": w2})
    pool.joinPool({"from": v2})
    actors = [submitter, w1, w2, v1, v2] + referees
    stakers = [w1, w2, v1, v2] + referees

    reached = Counter()  # every event the walk's transactions emitted, over all its examples

    class Market(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.snap = chain.snapshot()
            self.jobs = []
            self.tasks = []
            self.paid = Counter()
            self.roots = {}

        def teardown(self):
            chain.revert()

        def _tx(self, fn, *args):
            tx = _try(fn, *args)
            if tx is not None:
                for ev in tx.events:
                    reached[ev.name] += 1
                    if ev.name == "TaskDrawn" and ev["taskId"] not in self.tasks:
                        self.tasks.append(ev["taskId"])
                    if ev.name == "TaskFinalized":
                        self.paid[ev["taskId"]] += 1
            return tx

        def _task(self, i):
            return self.tasks[i % len(self.tasks)] if self.tasks else None

        @initialize(audit=st.sampled_from([0, 10_000]), donation=st.integers(0, 3))
        def first_job(self, audit, donation):
            if donation:  # tokens nobody is owed, sent straight to the contracts
                token.mint(deployer, 2 * donation * E, {"from": deployer})
                token.transfer(job_market, donation * E, {"from": deployer})
                token.transfer(stake_manager, donation * E, {"from": deployer})
            self.create(2, 2, audit)
            self.draw(0)

        def create(self, shards, rounds, audit):
            tx = self._tx(job_market.createJob, job_params(shards=shards, rounds=rounds, auditRateBps=audit, expiryBlock=chain.height + 300), {"from": submitter})
            if tx is not None:
                self.jobs.append(tx.return_value)

        def draw(self, i):
            if self.jobs:
                self._tx(draw_task, job_market, self.jobs[i % len(self.jobs)], {"from": submitter})

        def accept(self, i):
            tid = self._task(i)
            if tid is not None:
                self._tx(job_market.acceptTask, tid, {"from": job_market.taskOf(tid)[0]})

        def decline(self, i):
            tid = self._task(i)
            if tid is not None:
                self._tx(job_market.declineTask, tid, {"from": job_market.taskOf(tid)[0]})

        def commit(self, i, honest=True):
            tid = self._task(i)
            if tid is not None:
                worker = job_market.taskOf(tid)[0]
                root = ROOT_H if honest else ROOT_X
                if self._tx(job_market.commitResult, tid, commitment(tid, root, CID, SALT, worker), {"from": worker}):
                    self.roots[tid] = root

        def audit_commit(self, i, honest):
            tid = self._task(i)
            if tid is not None:
                auditor = job_market.taskOf(tid)[4]
                if int(auditor, 16):
                    self._tx(job_market.commitAudit, tid, audit_commitment(tid, ROOT_H if honest else ROOT_X, SALT, auditor), {"from": auditor})

        def reveal(self, i):
            tid = self._task(i)
            if tid is not None:
                self._tx(job_market.revealResult, tid, self.roots.get(tid, ROOT_H), CID, SALT, {"from": job_market.taskOf(tid)[0]})

        def audit_reveal(self, i, root):
            tid = self._task(i)
            if tid is not None:
                auditor = job_market.taskOf(tid)[4]
                if int(auditor, 16):
                    self._tx(job_market.revealAudit, tid, root, SALT, {"from": auditor})

        def mine(self, n):
            chain.mine(n)

        def timeout(self, i):
            tid = self._task(i)
            if tid is not None:
                self._tx(job_market.timeoutTask, tid, {"from": submitter})

        def finalize(self, i):
            tid = self._task(i)
            if tid is not None:
                self._tx(job_market.finalize, tid, {"from": submitter})

        def challenge(self, i, who):
            """``who`` challenges task i's result with the other trace."""
            tid = self._task(i)
            if tid is not None and job_market.taskOf(tid)[1] == TS.CHALLENGE:
                theirs = TRACES[self.roots.get(tid, ROOT_H)]
                mine = CHEAT if theirs is HONEST else HONEST
                opening = [c.as_tuple() for c in opening_claims(mine, cids(mine))]
                self._tx(game.challenge, tid, root_of(mine), opening, {"from": who})

        def dispute(self, i, play_on):
            """Move task i's dispute on: open it, move (or let the clock run out), draw
            referees, vote, resolve."""
            tid = self._task(i)
            if tid is None or job_market.taskOf(tid)[1] != TS.DISPUTED:
                return
            gid = game.gameOfTask(tid)
            if gid == 0 or view(game, gid).status in (GS.RESOLVED, GS.VOIDED):
                self._tx(game.openAuditDispute, tid, {"from": submitter})
                return
            step_game(game, gid, TRACES, HONEST, self._tx, submitter, "straight" if play_on else "stall")

        def cancel(self, i):
            if self.jobs:
                self._tx(job_market.cancelJob, self.jobs[i % len(self.jobs)], {"from": submitter})

        def expire(self, i):
            if self.jobs:
                self._tx(job_market.expireJob, self.jobs[i % len(self.jobs)], {"from": submitter})

        def close(self, i):
            tid = self._task(i)
            if tid is not None:
                self._tx(job_market.closeTask, tid, {"from": submitter})

        def surplus(self, i):
            if self.jobs:
                self._tx(job_market.refundSurplus, self.jobs[i % len(self.jobs)], {"from": submitter})

        def stake_more(self, a, amount):
            token.mint(a, amount * E, {"from": deployer})
            token.approve(stake_manager, amount * E, {"from": a})
            self._tx(stake_manager.stake, amount * E, {"from": a})

        def unstake(self, a, amount):
            self._tx(stake_manager.requestUnstake, amount * E, {"from": a})
            self._tx(pool.refresh, a, {"from": a})

        def withdraw_unstaked(self, a):
            self._tx(stake_manager.withdrawUnstaked, {"from": a})

        def withdraw(self, a):
            # An actor with nothing credited only reverts: take the first that has something
            # (rewards, refunds, repaid declines; penalties are burned, so credits are rarer).
            owed = [x for x in [a, *actors] if job_market.credits(x) or stake_manager.credits(x)]
            a = owed[0] if owed else a
            self._tx(job_market.withdraw, {"from": a})
            self._tx(stake_manager.withdraw, {"from": a})

        def advance(self, i, honest):
            """Move task i one natural step on (accept, commit, audit, reveal, finalize)."""
            tid = self._task(i)
            if tid is None:
                return
            status, auditor, flags = job_market.taskOf(tid)[1], job_market.taskOf(tid)[4], job_market.taskOf(tid)[3]
            if status == TS.OFFERED:
                self.accept(i) if honest else self.decline(i)  # cannot fetch the inputs
            elif status == TS.RUNNING:
                self.commit(i, honest)
            elif status == TS.COMMITTED and int(auditor, 16) and not flags & 1:
                self.audit_commit(i, honest)
            elif status == TS.COMMITTED and not int(auditor, 16) and not flags & 8 and (
                    flags & 16 or job_market.jobOf(tid >> 64).dict()["auditRateBps"]):
                mine_past_ticket(job_market, tid)  # the audit draw settles from a later block's hash
                if self._tx(job_market.settleAudit, tid, {"from": submitter}) is None:
                    self.reveal(i)
            elif status == TS.COMMITTED:
                self.reveal(i) if honest or flags & 2 else self.audit_reveal(i, ROOT_H)
            elif status == TS.REVEALED:
                self.audit_reveal(i, ROOT_H)
            elif status == TS.CHALLENGE and not honest:
                self.challenge(i, stakers[i % len(stakers)])
            elif status == TS.CHALLENGE:
                chain.mine(21)
                self.finalize(i)
            elif status == TS.DISPUTED:
                self.dispute(i, honest)

        @rule(action=st.integers(0, 19), i=st.integers(0, 50), flag=st.booleans(), n=st.integers(1, 25),
              a=st.sampled_from(stakers), b=st.sampled_from(actors))
        def step(self, action, i, flag, n, a, b):
            """One random action; half of the draws advance some task along its life."""
            if action < 8:
                for _ in range(1 + n % 6):  # several steps of one task's life in a row
                    self.advance(i, flag or action < 6)
                return
            [
                lambda: self.create(1 + i % 3, 1 + n % 2, [0, 5_000, 10_000][i % 3]),
                lambda: self.draw(i),
                lambda: self.mine(n),
                lambda: self.timeout(i),
                lambda: self.cancel(i) if n == 1 else self.mine(n),
                lambda: self.expire(i),
                lambda: self.close(i),
                lambda: self.surplus(i),
                lambda: self.stake_more(a, n * 10),
                lambda: self.unstake(a, n * 30),
                lambda: self.withdraw_unstaked(a),
                lambda: self.withdraw(b),
            ][action - 8]()

        @invariant()
        def tokens_conserved(self):
            holders = actors + [job_market, stake_manager, pool, game, deployer]
            assert sum(token.balanceOf(h) for h in holders) + token.totalBurned() == token.totalMinted()
            assert token.balanceOf(job_market) >= job_market.totalEscrow() + job_market.totalCredits()
            assert token.balanceOf(game) == 0
            assert token.balanceOf(stake_manager) >= stake_manager.totalStaked() + stake_manager.totalCredits()
            assert sum(job_market.jobOf(j).dict()["escrow"] for j in self.jobs) == job_market.totalEscrow()

        @invariant()
        def no_task_paid_twice(self):
            assert all(n == 1 for n in self.paid.values())

    # 20 fixed examples (derandomized). Hypothesis's choices are fixed, but the chain's are not:
    # audit and referee draws follow block hashes, which follow Anvil's wall-clock timestamps,
    # and since draws wait for tickets inside epochs (issue 27) a run reaches a cancellation,
    # a round's end or a whole dispute in some runs and not in others. What every run reaches
    # is asserted here; the dispute phases are asserted by the seeded dispute walk
    # (test_dispute_stateful.py) and a cancellation by test_market_jobs.py.
    run_state_machine_as_test(Market, settings=fixed_draws(max_examples=20, stateful_step_count=50))
    want = {"TaskFinalized", "TaskTimedOut", "Withdrawn"}
    assert want <= set(reached), want - set(reached)
