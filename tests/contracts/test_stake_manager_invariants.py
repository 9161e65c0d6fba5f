"""Stateful property test of StakeManager and TrainToken together: random stakes, unstakes,
withdrawals, locks, unlocks, slashes and penalties, with the conservation invariants checked
after every step (hypothesis' own RuleBasedStateMachine; brownie's state_machine is broken)."""

from __future__ import annotations

from brownie import chain
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from tests.contracts.conftest import STAKE, UNBONDING_DELAY_BLOCKS
from tests.contracts.helpers import fixed_draws

ACTORS = st.integers(min_value=0, max_value=2)
AMOUNTS = st.integers(min_value=0, max_value=2 * STAKE)


class StakeMachine(RuleBasedStateMachine):
    """Drives one StakeManager; `market` is the MARKET_ROLE account."""

    token = stake_manager = market = None
    stakers: list = []
    everyone: list = []

    def __init__(self):
        super().__init__()
        self.snapshot = chain.snapshot()

    def teardown(self):
        chain.revert()

    @rule(who=ACTORS, amount=AMOUNTS)
    def stake(self, who, amount):
        account = self.stakers[who]
        amount = min(amount, self.token.balanceOf(account))
        if amount == 0:
            return
        self.token.approve(self.stake_manager, amount, {"from": account})
        self.stake_manager.stake(amount, {"from": account})

    @rule(who=ACTORS, amount=AMOUNTS)
    def request_unstake(self, who, amount):
        account = self.stakers[who]
        amount = min(amount, self.stake_manager.freeStake(account))
        if amount:
            self.stake_manager.requestUnstake(amount, {"from": account})

    @rule(who=ACTORS)
    def withdraw_unstaked(self, who):
        account = self.stakers[who]
        if self.stake_manager.stakeOf(account)[2] == 0:
            return
        chain.mine(UNBONDING_DELAY_BLOCKS)
        self.stake_manager.withdrawUnstaked({"from": account})

    @rule(who=ACTORS, amount=AMOUNTS)
    def lock(self, who, amount):
        account = self.stakers[who]
        amount = min(amount, self.stake_manager.freeStake(account))
        self.stake_manager.lockCollateral(account, amount, {"from": self.market})

    @rule(who=ACTORS, amount=AMOUNTS)
    def unlock(self, who, amount):
        account = self.stakers[who]
        amount = min(amount, self.stake_manager.stakeOf(account)[1])
        self.stake_manager.unlockCollateral(account, amount, {"from": self.market})

    @rule(who=ACTORS, winner=ACTORS, amount=AMOUNTS, referees=st.integers(min_value=0, max_value=3))
    def slash(self, who, winner, amount, referees):
        self.stake_manager.slash(
            self.stakers[who], amount, self.stakers[winner], self.everyone[:referees], {"from": self.market}
        )

    @rule(who=ACTORS, beneficiary=ACTORS, amount=AMOUNTS)
    def penalize(self, who, beneficiary, amount):
        self.stake_manager.penalize(self.stakers[who], amount, self.stakers[beneficiary], {"from": self.market})

    @rule(who=ACTORS)
    def withdraw_credits(self, who):
        account = self.stakers[who]
        if self.stake_manager.credits(account):
            self.stake_manager.withdraw({"from": account})

    @invariant()
    def balance_equals_staked_plus_credits(self):
        sm = self.stake_manager
        assert self.token.balanceOf(sm) == sm.totalStaked() + sm.totalCredits()

    @invariant()
    def totals_equal_sums_and_locked_within_active(self):
        sm = self.stake_manager
        staked = credits = 0
        for account in self.everyone:
            active, locked, unbonding, _ = sm.stakeOf(account)
            assert locked <= active
            staked += active + unbonding
            credits += sm.credits(account)
        assert staked == sm.totalStaked()
        assert credits == sm.totalCredits()

    @invariant()
    def tokens_conserved(self):
        held = sum(self.token.balanceOf(a) for a in self.everyone) + self.token.balanceOf(self.stake_manager)
        assert held == self.token.totalSupply()
        assert held + self.token.totalBurned() == self.token.totalMinted()


def test_invariant_stakeManager_conservesTokens(token, stake_manager, funded, market, accounts):
    StakeMachine.token, StakeMachine.stake_manager, StakeMachine.market = token, stake_manager, market
    StakeMachine.stakers = list(funded)
    StakeMachine.everyone = list(funded) + [accounts[5], accounts[6]]
    run_state_machine_as_test(
        StakeMachine,
        settings=fixed_draws(max_examples=12, stateful_step_count=15),
    )
