"""truetrain.market.economics: the draw probabilities and payoffs bench/economics.py prints.

The model is checked against a devnet, task by task, by bench/economics.py; these tests pin
what the model itself computes: committee seats drawn without replacement, and the sign of
every strategy at the default terms and the deployment's defaults.
"""

from fractions import Fraction

import pytest

from truetrain.chain.deploy import StackParams
from truetrain.market import economics as m
from truetrain.market.jobs import DEFAULT_TERMS

E = 10**18
DEFAULTS = m.Parameters(
    reward=DEFAULT_TERMS.reward_per_task, audit_fee=DEFAULT_TERMS.audit_fee, collateral=DEFAULT_TERMS.worker_collateral,
    audit_rate_bps=DEFAULT_TERMS.audit_rate_bps, auditor_collateral=StackParams().auditor_collateral,
    winner_bps=5_000, referee_bps=2_000, committee_size=StackParams().committee_size,
    referee_penalty=StackParams().referee_penalty)
HONEST7 = {f"h{i}": 1_000 for i in range(7)}


def colluders(share: float, identities: int) -> dict[str, int]:
    total = round(7_000 * share / (1 - share))
    return {f"c{i}": total // identities for i in range(identities)}


def test_committee_seats_areDrawnWithoutReplacement_inProportionToWeight():
    # weights 2, 1, 1: P(the heavy one seated in a committee of 1) = 1/2; of 3 = 1 (all seated)
    one = m.committee_seats({"a": 2, "b": 1, "c": 1}, {"a"}, 1)
    assert one == pytest.approx({1: 0.5, 0: 0.5})
    assert m.committee_seats({"a": 2, "b": 1, "c": 1}, {"a"}, 3) == pytest.approx({1: 1.0})
    # two colluders of weight 1 among four of weight 1, three seats: P(both seated) = 1/2
    # (the one left out is any of the four, equally likely)
    seats = m.committee_seats({"a": 1, "b": 1, "c": 1, "d": 1}, {"a", "b"}, 3)
    assert seats == pytest.approx({2: 0.5, 1: 0.5})
    assert sum(seats.values()) == pytest.approx(1.0)


def test_committee_ofEvenSize_orLargerThanThePool_isOddAndAtMostThePool():
    assert m.committee_seats({"a": 1, "b": 1}, {"a"}, 3) == pytest.approx({1: 0.5, 0: 0.5})  # one seat


def test_payoffs_followTheSlashSplit():
    assert m.payoff_caught(DEFAULTS) == -40 * E
    # a unanimous committee of 3 shares 20 % of the 40 TRAIN slash: 8/3 TRAIN a seat, in wei
    assert m.payoff_caught(DEFAULTS, 1) == -40 * E + 8 * E // 3
    # a bought verdict: the reward, half the honest auditor's 50 TRAIN, 20 % of it to 2 seats
    assert m.payoff_bought_verdict(DEFAULTS, 2) == (10 + 25 + 10) * E


def test_probabilities_ofEveryStrategy_sumToOne():
    for outcomes in (m.honest(DEFAULTS), m.wrong_result(DEFAULTS), m.self_dealing(DEFAULTS),
                     m.challenge_spam(DEFAULTS), m.never_settling(DEFAULTS),
                     m.colluding(DEFAULTS, {**HONEST7, **colluders(0.23, 3)}, {"c0", "c1", "c2"})):
        assert sum(o.probability for o in outcomes) == pytest.approx(1.0)


def test_atTheDefaults_honestEarns_andEveryDishonestStrategyLoses():
    assert m.expected(m.honest(DEFAULTS)) == 10 * E
    assert m.expected(m.wrong_result(DEFAULTS)) == -15 * E  # ½ × 10 − ½ × 40
    assert m.expected(m.self_dealing(DEFAULTS)) == -1 * E
    assert m.expected(m.challenge_spam(DEFAULTS)) == -40 * E
    assert m.expected(m.never_settling(DEFAULTS)) == -40 * E
    for identities in (1, 3, 5):
        crew = colluders(0.23, identities)
        assert m.expected(m.colluding(DEFAULTS, {**HONEST7, **crew}, set(crew))) < 0


def test_seatBuying_paysOnlyPastAboutThirtyPercentOfTheWeight():
    """Where the guarantee ends (about 30 %): with 35 % of the verifiers' weight over three identities a
    coalition buys enough committees to profit; at 25 % it does not."""
    def ev(share: float) -> float:
        crew = colluders(share, 3)
        return m.expected(m.colluding(DEFAULTS, {**HONEST7, **crew}, set(crew)))

    assert ev(0.25) < 0 < ev(0.35)


def test_theOldCollateral_letSeatBuyingPay():
    """Why the default collateral is 4 × the reward: at 2 × (the old default) 23 % of the
    weight over three identities bought enough verdicts to profit."""
    old = m.Parameters(**{**DEFAULTS.__dict__, "collateral": 20 * E})
    crew = colluders(0.23, 3)
    assert m.expected(m.colluding(old, {**HONEST7, **crew}, set(crew))) > 0
    assert Fraction(DEFAULT_TERMS.worker_collateral, DEFAULT_TERMS.reward_per_task) == 4


def test_issue27_strategies_loseAtTheDefaults_andOnTheCheapestTerms():
    """Issue 27's rows: a stage cheat replayed at the verifiers' default stage sample rate
    (1.0) loses its collateral; a false stall pays the running timeout's 10 %; a self-challenge
    and a dust game each cost the coalition the loser's bond less the winner's half; a penalty
    farmer's task costs it its reward even when the offer is ignored once."""
    from truetrain.daemon.settings import DaemonSettings

    rate = DaemonSettings.__dataclass_fields__["stage_sample_rate"].default
    assert rate == 1.0
    stage = m.Parameters(**{**DEFAULTS.__dict__, "audit_rate_bps": 0})
    assert m.expected(m.stage_cheat(stage, rate)) == -40 * E
    assert m.expected(m.stage_cheat(stage, 0.0)) == 10 * E  # unreplayed, a stage cheat is paid
    assert m.expected(m.false_stall(DEFAULTS)) == -4 * E
    cheap = m.cheapest(DEFAULTS)
    assert (cheap.reward, cheap.collateral, cheap.audit_fee, cheap.audit_rate_bps) == (E // 5, 20 * E, 0, 0)
    assert m.expected(m.self_challenge(cheap)) == m.expected(m.dust_game(cheap)) == -10 * E
    assert 3 * m.referee_pay(cheap) == 4 * E - 1  # 20 % of 20 TRAIN over 3 seats, rounded down
    assert m.expected(m.penalty_farming(cheap)) == -E // 5
    # an ignored offer's penalty is burned, not paid to the submitter: the task costs its reward
    ignored = m.penalty_farming(cheap, ignored=1.0)
    assert max(o.payoff for o in ignored) == -E // 5 and m.expected(ignored) < 0


def test_withholding_costsTheSubmitterItsDeclinersPenalties():
    """Issue 30: a submitter whose inputs nobody can fetch pays back the accept penalty of each
    of the MAX_DECLINES workers that declined (1 % of the 40 TRAIN collateral each)."""
    assert m.expected(m.withholding(DEFAULTS)) == -3 * (2 * E // 5) < 0
    assert m.expected(m.withholding(m.cheapest(DEFAULTS))) < 0


def test_stageCheat_losesWheneverMoreThanAFifthOfStagesAreReplayed():
    """reward × (1 − r) − collateral × r < 0 ⟺ r > reward / (reward + collateral) = 1/5 at the defaults."""
    stage = m.Parameters(**{**DEFAULTS.__dict__, "audit_rate_bps": 0})
    assert m.expected(m.stage_cheat(stage, 0.19)) > 0 > m.expected(m.stage_cheat(stage, 0.21))


def test_probabilities_ofIssue27Strategies_sumToOne():
    cheap = m.cheapest(DEFAULTS)
    for outcomes in (m.stage_cheat(DEFAULTS, 0.3), m.false_stall(DEFAULTS), m.self_challenge(cheap),
                     m.dust_game(cheap), m.penalty_farming(cheap), m.penalty_farming(cheap, 0.4),
                     m.withholding(DEFAULTS)):
        assert sum(o.probability for o in outcomes) == pytest.approx(1.0)
