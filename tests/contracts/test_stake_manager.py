"""StakeManager: stake (also by permit), unbonding, collateral locks, slash and penalty
order and split, pull withdrawals, admin parameters, access control and reentrancy."""

from __future__ import annotations

import brownie
import pytest
from brownie import ZERO_ADDRESS, chain

from tests.contracts.conftest import MARKET_ROLE, STAKE, UNBONDING_DELAY_BLOCKS
from tests.contracts.helpers import dev_key, lo, permit_signature

MARKET = bytes.fromhex(MARKET_ROLE[2:])
ADMIN = bytes(32)
ALICE_INDEX = 2  # alice is accounts[2] (see conftest)


def info(stake_manager, account):
    """(active, locked, unbonding, readyAt) of ``account``."""
    return tuple(stake_manager.stakeOf(account))


def assert_conserved(token, stake_manager):
    """invariant_stakeManager_balanceCovers: balance == totalStaked + totalCredits."""
    assert token.balanceOf(stake_manager) == stake_manager.totalStaked() + stake_manager.totalCredits()


# ------------------------------------------------------------------ deployment


def test_deploy_setsDefaults_andRoles(stake_manager, token, deployer, market):
    assert stake_manager.token() == token
    assert stake_manager.slashWinnerBps() == 5_000
    assert stake_manager.slashRefereeBps() == 2_000
    assert stake_manager.unbondingDelayBlocks() == UNBONDING_DELAY_BLOCKS
    assert stake_manager.MAX_REFEREES() == 16
    assert stake_manager.hasRole(ADMIN, deployer)
    assert stake_manager.hasRole(MARKET_ROLE, market)
    assert stake_manager.MARKET_ROLE() == MARKET_ROLE


def test_deploy_zeroToken_reverts(StakeManager, deployer):
    with brownie.reverts("StakeInvalidToken: "):
        StakeManager.deploy(ZERO_ADDRESS, 10, {"from": deployer})


@pytest.mark.parametrize("delay", [0, 2_000_001])
def test_deploy_invalidDelay_reverts(StakeManager, token, deployer, delay):
    with brownie.reverts(f"StakeInvalidUnbondingDelay: {delay}"):
        StakeManager.deploy(token, delay, {"from": deployer})


# ------------------------------------------------------------------ staking


def test_stake_pullsTokens_andEmits(stake_manager, token, funded, alice):
    token.approve(stake_manager, STAKE, {"from": alice})
    tx = stake_manager.stake(STAKE, {"from": alice})
    assert tx.events["Staked"]["account"] == alice
    assert tx.events["Staked"]["amount"] == STAKE
    assert tx.events["Staked"]["active"] == STAKE
    assert info(stake_manager, alice) == (STAKE, 0, 0, 0)
    assert stake_manager.freeStake(alice) == STAKE
    assert stake_manager.totalStaked() == STAKE
    assert token.balanceOf(alice) == 9 * STAKE
    assert_conserved(token, stake_manager)


def test_stake_zero_reverts(stake_manager, funded, alice):
    with brownie.reverts("StakeZeroAmount: "):
        stake_manager.stake(0, {"from": alice})


def test_stake_pastUint128_reverts(stake_manager, token, deployer, funded, alice):
    # active + unbonding share packed uint128 fields: a stake that would overflow them reverts
    big = 2**128
    token.mint(alice, big, {"from": deployer})
    token.approve(stake_manager, 2**256 - 1, {"from": alice})
    with brownie.reverts(f"StakeAmountTooLarge: {big}"):
        stake_manager.stake(big, {"from": alice})
    stake_manager.stake(STAKE, {"from": alice})
    assert stake_manager.stakeOf(alice)[0] == STAKE


def test_stake_withoutAllowance_reverts(stake_manager, funded, alice):
    with brownie.reverts(f"ERC20InsufficientAllowance: {lo(stake_manager)}, 0, {STAKE}"):
        stake_manager.stake(STAKE, {"from": alice})


def test_stake_moreThanBalance_reverts(stake_manager, token, funded, alice):
    token.approve(stake_manager, 11 * STAKE, {"from": alice})
    with brownie.reverts(f"ERC20InsufficientBalance: {lo(alice)}, {10 * STAKE}, {11 * STAKE}"):
        stake_manager.stake(11 * STAKE, {"from": alice})


def test_stake_tokenWithoutCode_reverts(StakeManager, deployer, outsider, alice):
    # A StakeManager pointed at an address with no code (a misdeployment) cannot take stakes.
    broken = StakeManager.deploy(outsider, 10, {"from": deployer})
    with brownie.reverts(f"SafeERC20FailedOperation: {lo(outsider)}"):
        broken.stake(STAKE, {"from": alice})


def test_stakeWithPermit_realSignature_stakes(stake_manager, token, funded, alice):
    deadline = chain.time() + 3_600
    v, r, s = permit_signature(token, dev_key(ALICE_INDEX), stake_manager, STAKE, deadline)
    tx = stake_manager.stakeWithPermit(STAKE, deadline, v, r, s, {"from": alice})
    assert tx.events["Staked"]["amount"] == STAKE
    assert "Approval" in tx.events
    assert info(stake_manager, alice)[0] == STAKE
    assert token.nonces(alice) == 1
    assert token.allowance(alice, stake_manager) == 0
    assert_conserved(token, stake_manager)


def test_stakeWithPermit_frontRunPermit_stillStakes(stake_manager, token, funded, alice, outsider):
    deadline = chain.time() + 3_600
    v, r, s = permit_signature(token, dev_key(ALICE_INDEX), stake_manager, STAKE, deadline)
    token.permit(alice, stake_manager, STAKE, deadline, v, r, s, {"from": outsider})  # someone got there first
    stake_manager.stakeWithPermit(STAKE, deadline, v, r, s, {"from": alice})
    assert info(stake_manager, alice)[0] == STAKE


def test_stakeWithPermit_badSignatureNoAllowance_reverts(stake_manager, token, funded, alice):
    deadline = chain.time() + 3_600
    v, r, s = permit_signature(token, dev_key(5), stake_manager, STAKE, deadline, owner=alice)
    with brownie.reverts(f"StakePermitFailed: {lo(alice)}, {STAKE}, 0"):
        stake_manager.stakeWithPermit(STAKE, deadline, v, r, s, {"from": alice})


def test_stakeWithPermit_expiredNoAllowance_reverts(stake_manager, token, funded, alice):
    deadline = chain[-1].timestamp - 1  # behind the last block: expired whenever it is mined
    v, r, s = permit_signature(token, dev_key(ALICE_INDEX), stake_manager, STAKE, deadline)
    with brownie.reverts(f"StakePermitFailed: {lo(alice)}, {STAKE}, 0"):
        stake_manager.stakeWithPermit(STAKE, deadline, v, r, s, {"from": alice})


# ------------------------------------------------------------------ unbonding


def test_requestUnstake_movesFreeToUnbonding(stake_manager, token, staked, alice):
    tx = stake_manager.requestUnstake(STAKE // 4, {"from": alice})
    ready_at = tx.block_number + UNBONDING_DELAY_BLOCKS
    event = tx.events["UnstakeRequested"]
    assert (event["account"], event["amount"], event["unbonding"], event["readyAtBlock"]) == (
        alice,
        STAKE // 4,
        STAKE // 4,
        ready_at,
    )
    assert info(stake_manager, alice) == (STAKE - STAKE // 4, 0, STAKE // 4, ready_at)
    assert stake_manager.totalStaked() == 2 * STAKE  # unbonding still counts as staked
    assert_conserved(token, stake_manager)


def test_requestUnstake_secondRequest_addsAndRestartsDelay(stake_manager, staked, alice):
    stake_manager.requestUnstake(100, {"from": alice})
    chain.mine(5)
    tx = stake_manager.requestUnstake(50, {"from": alice})
    assert info(stake_manager, alice)[2:] == (150, tx.block_number + UNBONDING_DELAY_BLOCKS)
    assert tx.events["UnstakeRequested"]["unbonding"] == 150


def test_requestUnstake_zero_reverts(stake_manager, staked, alice):
    with brownie.reverts("StakeZeroAmount: "):
        stake_manager.requestUnstake(0, {"from": alice})


def test_requestUnstake_lockedPart_reverts(stake_manager, staked, market, alice):
    stake_manager.lockCollateral(alice, STAKE // 2, {"from": market})
    free = STAKE - STAKE // 2
    with brownie.reverts(f"StakeInsufficientFree: {lo(alice)}, {free + 1}, {free}"):
        stake_manager.requestUnstake(free + 1, {"from": alice})
    stake_manager.requestUnstake(free, {"from": alice})


def test_withdrawUnstaked_beforeReady_reverts_thenPays(stake_manager, token, staked, alice):
    tx = stake_manager.requestUnstake(STAKE, {"from": alice})
    ready_at = tx.block_number + UNBONDING_DELAY_BLOCKS
    with brownie.reverts(f"StakeUnbondingNotReady: {lo(alice)}, {ready_at}"):
        stake_manager.withdrawUnstaked({"from": alice})
    chain.mine(ready_at - chain.height - 1)  # the next transaction lands in block ready_at
    before = token.balanceOf(alice)
    tx = stake_manager.withdrawUnstaked({"from": alice})
    assert tx.block_number == ready_at
    assert tx.events["UnstakeWithdrawn"]["account"] == alice
    assert tx.events["UnstakeWithdrawn"]["amount"] == STAKE
    assert token.balanceOf(alice) == before + STAKE
    assert info(stake_manager, alice) == (0, 0, 0, 0)
    assert stake_manager.totalStaked() == STAKE
    assert_conserved(token, stake_manager)


def test_withdrawUnstaked_nothing_reverts(stake_manager, staked, alice):
    with brownie.reverts(f"StakeNothingUnbonding: {lo(alice)}"):
        stake_manager.withdrawUnstaked({"from": alice})


# ------------------------------------------------------------------ collateral


def test_lockAndUnlock_moveLocked_andEmit(stake_manager, staked, market, alice):
    tx = stake_manager.lockCollateral(alice, 300, {"from": market})
    assert tx.events["CollateralLocked"]["account"] == alice
    assert tx.events["CollateralLocked"]["amount"] == 300
    assert tx.events["CollateralLocked"]["locked"] == 300
    assert stake_manager.freeStake(alice) == STAKE - 300
    tx = stake_manager.unlockCollateral(alice, 100, {"from": market})
    assert tx.events["CollateralUnlocked"]["amount"] == 100
    assert tx.events["CollateralUnlocked"]["locked"] == 200
    assert info(stake_manager, alice)[:2] == (STAKE, 200)


def test_lockCollateral_zero_isAllowed(stake_manager, staked, market, alice):
    tx = stake_manager.lockCollateral(alice, 0, {"from": market})
    assert tx.events["CollateralLocked"]["locked"] == 0


def test_lockCollateral_moreThanFree_reverts(stake_manager, staked, market, alice):
    stake_manager.lockCollateral(alice, STAKE - 10, {"from": market})
    with brownie.reverts(f"StakeInsufficientFree: {lo(alice)}, 11, 10"):
        stake_manager.lockCollateral(alice, 11, {"from": market})


def test_unlockCollateral_moreThanLocked_reverts(stake_manager, staked, market, alice):
    stake_manager.lockCollateral(alice, 5, {"from": market})
    with brownie.reverts(f"StakeInsufficientLocked: {lo(alice)}, 6, 5"):
        stake_manager.unlockCollateral(alice, 6, {"from": market})


@pytest.mark.parametrize(
    "call",
    [
        lambda sm, a, s: sm.lockCollateral(a, 1, s),
        lambda sm, a, s: sm.unlockCollateral(a, 1, s),
        lambda sm, a, s: sm.slash(a, 1, a, [], s),
        lambda sm, a, s: sm.penalize(a, 1, a, s),
    ],
    ids=["lock", "unlock", "slash", "penalize"],
)
def test_marketCalls_byNonMarket_revert(stake_manager, staked, alice, call):
    with brownie.reverts(f"AccessControlUnauthorizedAccount: {lo(alice)}, {MARKET!r}"):
        call(stake_manager, alice, {"from": alice})


# ------------------------------------------------------------------ slash


def test_slash_takesLockedFirst_andSplits(stake_manager, token, staked, market, alice, bob, accounts):
    referees = [accounts[5], accounts[6]]
    stake_manager.lockCollateral(alice, 400, {"from": market})
    burned_before = token.totalBurned()
    tx = stake_manager.slash(alice, 400, bob, referees, {"from": market})
    assert tx.return_value == 400
    deducted = tx.events["StakeDeducted"]
    assert (deducted["fromLocked"], deducted["fromFree"], deducted["fromUnbonding"]) == (400, 0, 0)
    slashed = tx.events["StakeSlashed"]
    assert (slashed["account"], slashed["winner"]) == (alice, bob)
    assert (slashed["slashed"], slashed["toWinner"], slashed["toReferees"], slashed["burned"]) == (400, 200, 80, 120)
    credited = [(e["account"], e["amount"], e["credits"]) for e in tx.events["Credited"]]
    assert credited == [(bob, 200, 200), (referees[0], 40, 40), (referees[1], 40, 40)]
    assert tx.events["TokensBurned"]["amount"] == 120
    assert token.totalBurned() == burned_before + 120
    assert info(stake_manager, alice)[:3] == (STAKE - 400, 0, 0)
    assert stake_manager.credits(bob) == 200
    assert stake_manager.totalCredits() == 280
    assert stake_manager.totalStaked() == 2 * STAKE - 400
    assert_conserved(token, stake_manager)


def test_slash_order_lockedThenFreeThenUnbonding(stake_manager, token, staked, market, alice, bob):
    stake_manager.requestUnstake(STAKE // 2, {"from": alice})  # unbonding cannot escape a slash
    stake_manager.lockCollateral(alice, 100, {"from": market})
    tx = stake_manager.slash(alice, STAKE - 50, bob, [], {"from": market})
    free = STAKE // 2 - 100
    deducted = tx.events["StakeDeducted"]
    assert (deducted["fromLocked"], deducted["fromFree"], deducted["fromUnbonding"]) == (
        100,
        free,
        STAKE - 50 - 100 - free,
    )
    assert info(stake_manager, alice)[:3] == (0, 0, 50)
    assert_conserved(token, stake_manager)


def test_slash_moreThanHeld_takesEverything(stake_manager, token, staked, market, alice, bob):
    tx = stake_manager.slash(alice, 10 * STAKE, bob, [], {"from": market})
    assert tx.return_value == STAKE
    assert info(stake_manager, alice)[:3] == (0, 0, 0)
    # no referees: their share is burned with the rest
    assert tx.events["StakeSlashed"]["toReferees"] == 0
    assert tx.events["StakeSlashed"]["burned"] == STAKE - STAKE // 2
    assert_conserved(token, stake_manager)


def test_slash_refereeDust_isBurned(stake_manager, token, staked, market, alice, bob, accounts):
    referees = [accounts[5], accounts[6], accounts[7]]
    tx = stake_manager.slash(alice, 1_001, bob, referees, {"from": market})
    # winner 500 (floor of 500.5), referee pool floor(200.2) = 200 → 66 each (198), burn 303
    event = tx.events["StakeSlashed"]
    assert (event["toWinner"], event["toReferees"], event["burned"]) == (500, 198, 303)
    assert all(stake_manager.credits(r) == 66 for r in referees)
    assert_conserved(token, stake_manager)


def test_slash_accountWithNothing_takesZero(stake_manager, market, outsider, bob):
    tx = stake_manager.slash(outsider, 100, bob, [], {"from": market})
    assert tx.return_value == 0
    assert "Credited" not in tx.events
    assert "TokensBurned" not in tx.events


def test_slash_tooManyReferees_reverts(stake_manager, staked, market, alice, bob, accounts):
    referees = [accounts[5]] * 17
    with brownie.reverts("StakeTooManyReferees: 17, 16"):
        stake_manager.slash(alice, 100, bob, referees, {"from": market})
    stake_manager.slash(alice, 100, bob, referees[:16], {"from": market})


def test_slash_zeroWinner_reverts(stake_manager, staked, market, alice):
    with brownie.reverts(f"StakeInvalidRecipient: {ZERO_ADDRESS.lower()}"):
        stake_manager.slash(alice, 100, ZERO_ADDRESS, [], {"from": market})


def test_slash_zeroReferee_reverts(stake_manager, staked, market, alice, bob):
    with brownie.reverts(f"StakeInvalidRecipient: {ZERO_ADDRESS.lower()}"):
        stake_manager.slash(alice, 100, bob, [bob, ZERO_ADDRESS], {"from": market})


# ------------------------------------------------------------------ penalize and credits


def test_penalize_creditsBeneficiary_inOrder(stake_manager, token, staked, market, alice, bob):
    stake_manager.lockCollateral(alice, 30, {"from": market})
    tx = stake_manager.penalize(alice, 50, bob, {"from": market})
    assert tx.return_value == 50
    deducted = tx.events["StakeDeducted"]
    assert (deducted["fromLocked"], deducted["fromFree"], deducted["fromUnbonding"]) == (30, 20, 0)
    assert tx.events["StakePenalized"]["account"] == alice
    assert tx.events["StakePenalized"]["beneficiary"] == bob
    assert tx.events["StakePenalized"]["taken"] == 50
    assert tx.events["Credited"]["amount"] == 50
    assert stake_manager.credits(bob) == 50
    assert info(stake_manager, alice)[:2] == (STAKE - 50, 0)
    assert_conserved(token, stake_manager)


def test_penalize_reachesUnbonding(stake_manager, staked, market, alice, bob):
    stake_manager.requestUnstake(STAKE, {"from": alice})
    tx = stake_manager.penalize(alice, 70, bob, {"from": market})
    assert tx.events["StakeDeducted"]["fromUnbonding"] == 70
    assert info(stake_manager, alice)[2] == STAKE - 70


def test_penalize_zeroBeneficiary_reverts(stake_manager, staked, market, alice):
    with brownie.reverts(f"StakeInvalidRecipient: {ZERO_ADDRESS.lower()}"):
        stake_manager.penalize(alice, 1, ZERO_ADDRESS, {"from": market})


def test_withdraw_paysCredits_once(stake_manager, token, staked, market, alice, bob):
    stake_manager.penalize(alice, 500, bob, {"from": market})
    before = token.balanceOf(bob)
    tx = stake_manager.withdraw({"from": bob})
    assert tx.events["CreditsWithdrawn"]["account"] == bob
    assert tx.events["CreditsWithdrawn"]["amount"] == 500
    assert token.balanceOf(bob) == before + 500
    assert stake_manager.credits(bob) == 0
    assert stake_manager.totalCredits() == 0
    assert_conserved(token, stake_manager)
    with brownie.reverts(f"StakeNoCredits: {lo(bob)}"):
        stake_manager.withdraw({"from": bob})


# ------------------------------------------------------------------ admin


def test_setSlashSplit_updates_andApplies(stake_manager, staked, deployer, market, alice, bob, accounts):
    tx = stake_manager.setSlashSplit(6_000, 3_000, {"from": deployer})
    assert tx.events["SlashSplitUpdated"]["winnerBps"] == 6_000
    assert tx.events["SlashSplitUpdated"]["refereeBps"] == 3_000
    tx = stake_manager.slash(alice, 1_000, bob, [accounts[5]], {"from": market})
    event = tx.events["StakeSlashed"]
    assert (event["toWinner"], event["toReferees"], event["burned"]) == (600, 300, 100)


def test_setSlashSplit_burningLessThanTheFloor_reverts(stake_manager, deployer):
    assert stake_manager.MIN_BURN_BPS() == 1_000
    with brownie.reverts("StakeInvalidSplit: 9000, 1"):
        stake_manager.setSlashSplit(9_000, 1, {"from": deployer})
    with brownie.reverts("StakeInvalidSplit: 9000, 1001"):
        stake_manager.setSlashSplit(9_000, 1_001, {"from": deployer})


def test_setUnbondingDelay_updates_andAppliesToLaterRequests(stake_manager, staked, deployer, alice):
    tx = stake_manager.setUnbondingDelay(5, {"from": deployer})
    assert tx.events["UnbondingDelayUpdated"]["blocks"] == 5
    tx = stake_manager.requestUnstake(1, {"from": alice})
    assert info(stake_manager, alice)[3] == tx.block_number + 5


@pytest.mark.parametrize("delay", [0, 2_000_001])
def test_setUnbondingDelay_outOfRange_reverts(stake_manager, deployer, delay):
    with brownie.reverts(f"StakeInvalidUnbondingDelay: {delay}"):
        stake_manager.setUnbondingDelay(delay, {"from": deployer})


@pytest.mark.parametrize(
    "call",
    [lambda sm, s: sm.setSlashSplit(1, 1, s), lambda sm, s: sm.setUnbondingDelay(3, s)],
    ids=["split", "delay"],
)
def test_parameterCalls_withoutParameterRole_revert(stake_manager, market, call):
    role = bytes.fromhex(stake_manager.PARAMETER_ROLE().hex().removeprefix("0x"))
    with brownie.reverts(f"AccessControlUnauthorizedAccount: {lo(market)}, {role!r}"):
        call(stake_manager, {"from": market})


def test_setListener_onlyOnce_andByAdmin(stake_manager, deployer, market, alice):
    with brownie.reverts(f"AccessControlUnauthorizedAccount: {lo(alice)}, {ADMIN!r}"):
        stake_manager.setListener(alice, {"from": alice})
    stake_manager.setListener(market, {"from": deployer})
    with brownie.reverts(f"StakeListenerAlreadySet: {lo(market)}"):
        stake_manager.setListener(alice, {"from": deployer})


def test_forfeit_burnsFromStake_creditsNobody(stake_manager, token, staked, market, alice):
    burned = token.totalBurned()
    tx = stake_manager.forfeit(alice, 300, {"from": market})
    assert tx.events["StakeForfeited"]["amount"] == 300 and tx.return_value == 300
    assert token.totalBurned() - burned == 300
    assert stake_manager.totalCredits() == 0
    with brownie.reverts(f"AccessControlUnauthorizedAccount: {lo(alice)}, {MARKET!r}"):
        stake_manager.forfeit(alice, 1, {"from": alice})


def test_renounceRole_forAnotherAccount_reverts(stake_manager, market, alice):
    with brownie.reverts("AccessControlBadConfirmation: "):
        stake_manager.renounceRole(MARKET_ROLE, alice, {"from": market})


# ------------------------------------------------------------------ reentrancy


def test_withdraw_reenteredByToken_reverts(StakeManager, ReentrantToken, deployer, market, alice, bob):
    hostile = ReentrantToken.deploy({"from": deployer})
    manager = StakeManager.deploy(hostile, 10, {"from": deployer})
    manager.grantRole(MARKET_ROLE, market, {"from": deployer})
    hostile.mint(alice, STAKE, {"from": deployer})
    hostile.approve(manager, STAKE, {"from": alice})
    manager.stake(STAKE, {"from": alice})
    manager.penalize(alice, 100, bob, {"from": market})
    hostile.arm(manager, manager.withdraw.encode_input(), {"from": deployer})
    with brownie.reverts("ReentrancyGuardReentrantCall: "):
        manager.withdraw({"from": bob})
    assert manager.credits(bob) == 100  # nothing moved
