"""Hostile tokens: reentrancy into withdraw/cancelJob is refused, fee-on-transfer and false-returning tokens are caught."""

from pathlib import Path

import brownie
import pytest

from tests.contracts.market_setup import *  # noqa: F401,F403

SOURCE = (Path(__file__).parent / "attackers" / "ReentrantToken.sol").read_text()


@pytest.fixture(scope="module")
def attack(JobMarket, registry, stake_manager, pool, deployer, submitter, market_isolation):
    token = brownie.compile_source(SOURCE, solc_version="0.8.28").MarketAttackToken.deploy({"from": deployer})
    market = JobMarket.deploy(token, registry, stake_manager, pool, (TIMEOUT_PENALTY_BPS, ACCEPT_PENALTY_BPS, AUDITOR_COLLATERAL, AUDITOR_PENALTY), {"from": deployer})
    pool.grantRole(pool.DRAW_ROLE(), market, {"from": deployer})  # createJob asks for its first offer ticket
    token.mint(submitter, 1_000 * E, {"from": deployer})
    token.approve(market, 2**256 - 1, {"from": submitter})
    job_id = market.createJob(job_params(), {"from": submitter}).return_value
    return token, market, job_id


@pytest.mark.parametrize("mode", [1, 2])
def test_withdraw_reenteredByToken_revertsAndChangesNothing(attack, submitter, mode):
    token, market, job_id = attack
    market.cancelJob(job_id, {"from": submitter}) if mode == 1 else None
    if mode == 2:
        # credits from a second job's cancel, so the first job stays cancellable by the attack
        other = market.createJob(job_params(), {"from": submitter}).return_value
        market.cancelJob(other, {"from": submitter})
    token.arm(mode, market, job_id, {"from": submitter})
    balances = (token.balanceOf(market), token.balanceOf(submitter), market.credits(submitter), market.totalEscrow())
    with brownie.reverts("ReentrancyGuardReentrantCall: "):
        market.withdraw({"from": submitter})
    assert (token.balanceOf(market), token.balanceOf(submitter), market.credits(submitter), market.totalEscrow()) == balances
    assert token.balanceOf(market) == market.totalEscrow() + market.totalCredits()


def test_withdraw_tokenReturnsFalse_reverts(attack, submitter):
    token, market, job_id = attack
    market.cancelJob(job_id, {"from": submitter})
    token.arm(3, market, 0, {"from": submitter})
    with brownie.reverts(f"SafeERC20FailedOperation: {token.address.lower()}"):
        market.withdraw({"from": submitter})


def test_createJob_feeOnTransferToken_revertsEscrowMismatch(attack, submitter):
    token, market, _ = attack
    token.arm(4, market, 0, {"from": submitter})
    escrow = 6 * 12 * E
    with brownie.reverts(f"JobEscrowMismatch: {escrow}, {escrow - escrow // 100}"):
        market.createJob(job_params(), {"from": submitter})
