"""Expected profit of each strategy in the market, from the contracts' own parameters.

What a party gains or loses per task, in TRAIN, for the honest strategy and for each way of
cheating that issue 12 names. Each strategy is a list of outcomes: a probability (from the
audit rate and the sortition weights, the way the contracts draw) and the payoff the
contracts' rules give that outcome (``payoff_*``). ``bench/economics.py`` prints the expected
values and checks every payoff, outcome by outcome, against a devnet run.

Gas is left out (paid in ETH, the same order for every strategy) and so is the cost of
computing: a cheater saves it, so a dishonest strategy must lose tokens even when computing
is free. Nobody replays unaudited results of whole tasks here (the verifiers' default sample
rate is 0): those figures are what a cheater expects with no third party watching. The stages
of a split job draw no audits; verifiers replay them at ``stage_sample_rate`` (1.0 by
default), so that rate is the stage cheat's chance of a challenge.

Issue 27's strategies on the cheapest terms the contracts allow (``cheapest``: reward
MIN_COLLATERAL / MAX_COLLATERAL_PER_REWARD, collateral MIN_COLLATERAL, no audit fee or audit)
are priced here too: a free stall, reputation by self-challenge, referee griefing with dust,
and farming accept penalties; and issue 30's submitter that withholds or corrupts its data.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import permutations

from truetrain.market.jobs import MAX_COLLATERAL_PER_REWARD, MIN_COLLATERAL

BPS = 10_000


@dataclass(frozen=True)
class Parameters:
    """The terms that decide every payoff (wei, bps, counts), as the contracts hold them."""

    reward: int  # JobParams.rewardPerTask
    audit_fee: int  # JobParams.auditFee
    collateral: int  # JobParams.workerCollateral (also a challenger's bond)
    audit_rate_bps: int  # JobParams.auditRateBps
    auditor_collateral: int  # JobMarket.auditorCollateral
    winner_bps: int  # StakeManager.slashWinnerBps
    referee_bps: int  # StakeManager.slashRefereeBps
    committee_size: int  # DisputeGame.committeeSize
    referee_penalty: int  # DisputeGame.refereePenalty
    timeout_penalty_bps: int = 1_000  # JobMarket.timeoutPenaltyBps
    accept_penalty_bps: int = 100  # JobMarket.acceptPenaltyBps

    @property
    def audit_rate(self) -> float:
        return self.audit_rate_bps / BPS

    def winner_share(self, slashed: int) -> int:
        return slashed * self.winner_bps // BPS

    def referee_share(self, slashed: int, majority: int) -> int:
        """What each of ``majority`` referees gets from a slash (StakeManager.slash)."""
        return 0 if majority == 0 else slashed * self.referee_bps // BPS // majority

    def penalty(self, bps: int) -> int:
        """A timeout penalty of ``bps`` of the collateral, rounded up (Escrow.share)."""
        return -(-self.collateral * bps // BPS)


def cheapest(p: Parameters) -> Parameters:
    """The cheapest job the contracts accept (JobBook.validate): the least collateral, the
    least reward that collateral allows (at most MAX_COLLATERAL_PER_REWARD × the reward), no
    audit fee and no audits."""
    return replace(p, reward=MIN_COLLATERAL // MAX_COLLATERAL_PER_REWARD, audit_fee=0, collateral=MIN_COLLATERAL,
                   audit_rate_bps=0)


@dataclass(frozen=True)
class Outcome:
    name: str
    probability: float
    payoff: int  # wei, to the strategy's party (or coalition)


def expected(outcomes: list[Outcome]) -> float:
    return sum(o.probability * o.payoff for o in outcomes)


# ---------------------------------------------------------------- payoffs, one per outcome


def payoff_paid(p: Parameters, auditor_colludes: bool = False) -> int:
    """A result finalized: the reward (and, for a coalition whose member audited it, the fee)."""
    return p.reward + (p.audit_fee if auditor_colludes else 0)


def payoff_caught(p: Parameters, colluder_seats: int = 0) -> int:
    """A wrong result lost its game (or its worker went silent after committing, which costs
    the same): the whole collateral. Colluding referees that voted with the truth, each a
    seat in a unanimous committee, get their share of the slash back."""
    return -p.collateral + colluder_seats * p.referee_share(p.collateral, p.committee_size)


def payoff_bought_verdict(p: Parameters, colluder_seats: int) -> int:
    """A wrong result whose game a colluding majority of referees won: the reward, the
    winner's half of the honest auditor's collateral, the majority's referee share."""
    slashed = p.auditor_collateral
    return p.reward + p.winner_share(slashed) + colluder_seats * p.referee_share(slashed, colluder_seats)


def payoff_lost_challenge(p: Parameters) -> int:
    """A challenger whose bond (the task's collateral) a game against the truth took."""
    return -p.collateral


# ---------------------------------------------------------------- draws, as the contracts draw


def committee_seats(weights: dict[str, int], colluders: set[str], size: int) -> dict[int, float]:
    """P(k colluders seated) for a committee of ``size`` drawn one seat at a time, without
    replacement, in proportion to weight (WorkerPool.drawCommittee); ``weights`` holds the
    eligible verifiers only (the game's parties excluded)."""
    members = [m for m, w in weights.items() if w > 0]
    size = min(size, len(members))
    if size % 2 == 0:
        size -= 1  # an odd committee
    result: dict[int, float] = {}
    for order in permutations(members, size):
        prob, left = 1.0, sum(weights[m] for m in members)
        for m in order:
            prob *= weights[m] / left
            left -= weights[m]
        k = sum(1 for m in order if m in colluders)
        result[k] = result.get(k, 0.0) + prob
    return result


# ---------------------------------------------------------------- strategies


def honest(p: Parameters) -> list[Outcome]:
    a = p.audit_rate
    return [Outcome("not audited", 1 - a, payoff_paid(p)), Outcome("audited, confirmed", a, payoff_paid(p))]


def wrong_result(p: Parameters, committee: dict[int, float] | None = None) -> list[Outcome]:
    """A wrong root, defended in the game an honest auditor opens (or left silent, strategy
    'wrong then silent': the same payoff). Honest referees only."""
    a = p.audit_rate
    return [Outcome("not audited: paid", 1 - a, payoff_paid(p)), Outcome("audited: lost the game", a, payoff_caught(p))]


def colluding(p: Parameters, verifiers: dict[str, int], colluders: set[str]) -> list[Outcome]:
    """A wrong result with colluding verifiers: a colluder drawn to audit confirms it; a game
    opened by an honest auditor is won when the colluders hold a majority of the committee
    (they vote for the worker only then; otherwise they vote with the truth and take their
    referee share). One colluding identity is 'auditor collusion'; the same weight over
    several identities is 'referee seat buying'."""
    a = p.audit_rate
    total = sum(verifiers.values())
    outcomes = [Outcome("not audited: paid", 1 - a, payoff_paid(p))]
    for auditor, weight in verifiers.items():
        share = a * weight / total
        if auditor in colluders:
            outcomes.append(Outcome("colluder audited: confirmed", share, payoff_paid(p, auditor_colludes=True)))
            continue
        candidates = {m: w for m, w in verifiers.items() if m != auditor}
        for k, pk in committee_seats(candidates, colluders, p.committee_size).items():
            if 2 * k > p.committee_size:
                outcomes.append(Outcome(f"honest audit, colluders on {k} of {p.committee_size} seats: verdict bought", share * pk,
                                        payoff_bought_verdict(p, k)))
            else:
                outcomes.append(Outcome(f"honest audit, colluders on {k} of {p.committee_size} seats: lost the game", share * pk,
                                        payoff_caught(p, k)))
    return _merge(outcomes)


def self_dealing(p: Parameters) -> list[Outcome]:
    """A worker that submits a job to itself: its reward comes back, an audit fee goes to
    the auditor, the rest of the escrow is refunded; no reputation is recorded."""
    a = p.audit_rate
    return [Outcome("not audited", 1 - a, 0), Outcome("audited: fee paid to the auditor", a, -p.audit_fee)]


def challenge_spam(p: Parameters) -> list[Outcome]:
    """Challenging correct results: honest referees keep the result; the bond is lost."""
    return [Outcome("challenge lost", 1.0, payoff_lost_challenge(p))]


def never_settling(p: Parameters) -> list[Outcome]:
    """A worker that commits and then never settles its audit draw nor reveals: the draw's
    deadline passes and anyone times the task out; silence after a commitment costs the
    collateral."""
    return [Outcome("timed out after its commitment", 1.0, payoff_caught(p))]


# ---------------------------------------------------------------- issue 27's strategies


def stage_cheat(p: Parameters, replay_rate: float) -> list[Outcome]:
    """A stage of a split job that reveals a wrong result. Stages draw no audits (``p`` has
    an audit rate of 0); an honest verifier replays the stage with probability
    ``replay_rate`` (its ``stage_sample_rate``), challenges the wrong result and wins the game
    before honest referees: the whole collateral. Unreplayed, it is paid with its group."""
    return [Outcome("replayed: challenged, lost the game", replay_rate, payoff_caught(p)),
            Outcome("not replayed: paid", 1 - replay_rate, payoff_paid(p))]


def false_stall(p: Parameters) -> list[Outcome]:
    """A stage worker that accepts, reports itself stalled at once (`reportStalled`) and does
    nothing while the rest of its group runs: the group does not bear the report out, so its
    deadline costs the running timeout's penalty (TaskRecovery._stalledStage)."""
    return [Outcome("stall not borne out: timeout penalty", 1.0, -p.penalty(p.timeout_penalty_bps))]


def self_challenge(p: Parameters) -> list[Outcome]:
    """A worker's own job (it is the submitter), challenged by its sybil with a root of the
    same result: the worker's first move wins. The game is self-dealt, so no win or
    reputation is recorded; the coalition loses the sybil's bond (the task's collateral) but
    its winner's share, which goes to the worker. Its own reward comes back to it."""
    return [Outcome("won its own game: no reputation", 1.0, -p.collateral + p.winner_share(p.collateral))]


def dust_game(p: Parameters) -> list[Outcome]:
    """A coalition (submitter, worker, challenger) plays a game down to the referees on the
    cheapest job, to make referees lock stake for nothing. The worker's wrong result loses
    before honest referees: its collateral is slashed, the challenger's half comes back to the
    coalition, the referees' share and the burn do not."""
    return [Outcome("game down to the referees: lost its bond", 1.0, -p.collateral + p.winner_share(p.collateral))]


def referee_pay(p: Parameters) -> int:
    """What each honest referee of ``dust_game``'s unanimous committee is paid."""
    return p.referee_share(p.collateral, p.committee_size)


def penalty_farming(p: Parameters, ignored: float = 0.0) -> list[Outcome]:
    """A submitter of the cheapest job hoping to collect accept penalties. A worker that
    accepts is paid the reward; an offer ignored (with probability ``ignored``) costs its
    worker the accept penalty, burned (TaskRecovery.timeout: no party that can cause a
    timeout is paid for it), and the task is offered to another worker, who is paid. So no
    task pays its submitter."""
    outcomes = [Outcome("offer accepted: reward paid", 1 - ignored, -p.reward)]
    if ignored:
        outcomes.append(Outcome("offer ignored, then accepted: penalty burned, reward paid", ignored, -p.reward))
    return outcomes


#: JobMarket's MAX_DECLINES: the distinct workers that decline a task before its job ends.
MAX_DECLINES = 3


def withholding(p: Parameters) -> list[Outcome]:
    """A submitter that withholds or corrupts a task's inputs (its shard or checkpoint is
    never served, or served altered). Each offered worker fetches the inputs before it accepts,
    fails, and declines (``declineTask``): its accept penalty is burned, and the task goes to
    another worker. When MAX_DECLINES distinct workers have declined, the job ends
    (``JobInputsUnavailable``): each decliner is paid its penalty back out of the refund, the
    rest goes to the submitter. The submitter pays MAX_DECLINES accept penalties per such
    task and is paid nothing; an honest decliner gets its first decline back and loses one
    accept penalty for each further offer of the same task it declines."""
    return [Outcome("inputs unavailable: job ended, decliners repaid", 1.0,
                    -MAX_DECLINES * p.penalty(p.accept_penalty_bps))]


def _merge(outcomes: list[Outcome]) -> list[Outcome]:
    merged: dict[tuple[str, int], float] = {}
    for o in outcomes:
        merged[(o.name, o.payoff)] = merged.get((o.name, o.payoff), 0.0) + o.probability
    return [Outcome(name, prob, payoff) for (name, payoff), prob in merged.items()]
