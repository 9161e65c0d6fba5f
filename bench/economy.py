"""The devnet economy bench/economics.py plays its strategies in, and the checks of a row.

One deployed stack (bench/devstack.py) with a keeper; each strategy gets a cast of fresh
honest verifiers (and colluders), its own workers, and returns a ``Result``: the model's
outcomes for it (``truetrain.market.economics``) and the outcome and measured change of
wealth of each task it played. Shared by bench/economics.py (issue 12's strategies, the
table) and bench/economics_attacks.py (issue 27's).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from devstack import ROLE_VERIFIER, ROLE_WORKER, Bench, E  # sets sys.path
from players import Cast
from truetrain.market import economics as model
from truetrain.market.jobs import DEFAULT_TERMS
from truetrain.market.randomness import EPOCH

HONEST_VERIFIERS = 7
VERIFIER_STAKE = 1_000 * E
COLLUDER_SHARE = 0.23  # of the verifiers' total weight


@dataclass
class Result:
    name: str
    party: str
    outcomes: list[model.Outcome]
    seen: list[tuple[str, int]] = field(default_factory=list)  # (outcome, measured payoff) per task
    note: str = ""
    dishonest: bool = True  # must lose, in the model and on the devnet

    @property
    def expected(self) -> float:
        return model.expected(self.outcomes) / E

    @property
    def measured(self) -> float:
        return sum(p for _, p in self.seen) / len(self.seen) / E

    def mismatches(self) -> list[str]:
        """Tasks whose measured payoff is not the model's payoff for the outcome seen."""
        payoffs = {o.name: o.payoff for o in self.outcomes}
        return [f"{name}: measured {p / E:+.4f}, model {payoffs.get(name, 0) / E:+.4f}"
                for name, p in self.seen if payoffs.get(name) != p]

    def frequency_ok(self) -> bool:
        """Each outcome's count within 3 standard deviations of n × its probability."""
        n, counts = len(self.seen), Counter(name for name, _ in self.seen)
        probability = Counter()
        for o in self.outcomes:
            probability[o.name] += o.probability
        return all(abs(counts[k] - n * q) <= 3 * math.sqrt(n * q * (1 - q)) + 1e-9 for k, q in probability.items())


class Economy:
    """One devnet stack; each strategy gets its own cast of fresh members."""

    def __init__(self, bench: Bench):
        self.b = bench
        self.terms = DEFAULT_TERMS
        game = bench.game.functions
        self.params = model.Parameters(
            reward=self.terms.reward_per_task, audit_fee=self.terms.audit_fee,
            collateral=self.terms.worker_collateral, audit_rate_bps=self.terms.audit_rate_bps,
            auditor_collateral=bench.market.functions.auditorCollateral().call(),
            winner_bps=bench.stake.functions.slashWinnerBps().call(),
            referee_bps=bench.stake.functions.slashRefereeBps().call(),
            committee_size=game.committeeSize().call(), referee_penalty=game.refereePenalty().call(),
            timeout_penalty_bps=bench.market.functions.timeoutPenaltyBps().call(),
            accept_penalty_bps=bench.market.functions.acceptPenaltyBps().call())
        self.keeper = bench.new_submitter()
        self._members: list[str] = []

    def job_terms(self) -> dict:
        t = self.terms
        return dict(reward=t.reward_per_task, audit_fee=t.audit_fee, collateral=t.worker_collateral,
                    audit_bps=t.audit_rate_bps, challenge_window=t.challenge_window,
                    windows=(t.accept_window, t.compute_window, t.reveal_window))

    def cast(self, colluder_identities: int = 0) -> tuple[Cast, dict[str, int]]:
        """Fresh honest verifiers (and colluders holding COLLUDER_SHARE of the weight, split
        over ``colluder_identities``) in the pool; every earlier member leaves it."""
        for member in self._members:
            self.b.send(self.b.pool.functions.leavePool(), member)
        honest = [self.b.new_account(ROLE_VERIFIER, VERIFIER_STAKE) for _ in range(HONEST_VERIFIERS)]
        colluders = []
        if colluder_identities:
            total = round(HONEST_VERIFIERS * VERIFIER_STAKE * COLLUDER_SHARE / (1 - COLLUDER_SHARE))
            colluders = [self.b.new_account(ROLE_VERIFIER, total // colluder_identities) for _ in range(colluder_identities)]
        self._settle_weights(self._members + honest + colluders)
        self._members = honest + colluders
        weights = {v: self.b.pool.functions.weightOf(v, True).call() for v in self._members}
        return Cast(self.keeper, self._members, set(colluders)), weights

    def _settle_weights(self, members: list[str]) -> None:
        """Verifier weights move only outside a draw's hold (WorkerPool.holdDraws): wait for
        the next epoch if one is on, then refresh every member, leavers and newcomers."""
        if self.b.pool.functions.verifiersHeld().call():
            self.b.mine(EPOCH - self.b.height % EPOCH)
        for member in members:
            self.b.send(self.b.pool.functions.refresh(member), self.keeper, wait=False)
        self.b.send(self.b.pool.functions.refresh(self.keeper), self.keeper)

    def worker(self, roles: int = ROLE_WORKER) -> str:
        address = self.b.new_account(roles, 5_000 * E)
        self._members.append(address)
        return address


def wealth(b: Bench, parties: list[str]) -> int:
    return sum(b.wealth(p) for p in parties)


def deploy_contract(eco: Economy, owner: str, name: str, *args):
    from truetrain.chain.artifacts import load_artifact

    art = load_artifact(name)
    factory = eco.b.w3.eth.contract(abi=art.abi, bytecode=art.bytecode)
    receipt = eco.b.receipt(factory.constructor(*args), owner)
    return eco.b.w3.eth.contract(address=receipt["contractAddress"], abi=art.abi)
