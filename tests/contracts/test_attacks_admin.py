"""Issue 12, finding 3: no admin can take stakes.

The proof of concept: the deployer kept DEFAULT_ADMIN_ROLE, granted itself MARKET_ROLE and
moved 1,000 TRAIN of a staker's stake. After the deployment's wiring, the deployer renounces
every role it held; the only parameter power left (slash split, unbonding delay) sits behind
the ParameterTimelock, whose delay every staker sees, and which cannot grant any role.
"""

import brownie
import pytest
from brownie import ParameterTimelock, chain

from tests.contracts.conftest import DEFAULT_ADMIN_ROLE, MARKET_ROLE, STAKE
from tests.contracts.helpers import lo

DELAY = 3_600
ZERO = "0x" + "00" * 32


@pytest.fixture
def sealed(stake_manager, token, deployer, market, staked):
    """The StakeManager wired as the deployment wires it: PARAMETER_ROLE to a timelock with
    a one-hour delay (the deployer proposes), then every deployer role renounced."""
    timelock = ParameterTimelock.deploy(DELAY, [deployer], {"from": deployer})
    parameter = stake_manager.PARAMETER_ROLE()
    stake_manager.grantRole(parameter, timelock, {"from": deployer})
    stake_manager.renounceRole(parameter, deployer, {"from": deployer})
    stake_manager.renounceRole(DEFAULT_ADMIN_ROLE, deployer, {"from": deployer})
    return timelock


def test_adminTakesStakes_attackFails_afterWiring(stake_manager, token, deployer, alice, sealed):
    admin = bytes.fromhex(DEFAULT_ADMIN_ROLE[2:])
    with brownie.reverts(f"AccessControlUnauthorizedAccount: {lo(deployer)}, {admin!r}"):
        stake_manager.grantRole(MARKET_ROLE, deployer, {"from": deployer})
    market = bytes.fromhex(MARKET_ROLE[2:])
    with brownie.reverts(f"AccessControlUnauthorizedAccount: {lo(deployer)}, {market!r}"):
        stake_manager.slash(alice, STAKE, deployer, [], {"from": deployer})
    assert stake_manager.stakeOf(alice)[0] == STAKE


def test_timelock_cannotGrantItselfAMarketRole(stake_manager, deployer, alice, sealed):
    data = stake_manager.grantRole.encode_input(MARKET_ROLE, sealed.address)
    sealed.schedule(stake_manager, 0, data, ZERO, ZERO, DELAY, {"from": deployer})
    chain.sleep(DELAY + 1)
    chain.mine()
    admin = bytes.fromhex(DEFAULT_ADMIN_ROLE[2:])
    with brownie.reverts(f"AccessControlUnauthorizedAccount: {lo(sealed)}, {admin!r}"):
        sealed.execute(stake_manager, 0, data, ZERO, ZERO, {"from": alice})
    assert not stake_manager.hasRole(MARKET_ROLE, sealed)


def test_timelock_changesAParameter_onlyAfterItsDelay_andOnlyByAProposer(stake_manager, deployer, alice, sealed):
    data = stake_manager.setSlashSplit.encode_input(4_000, 2_000)
    proposer = bytes.fromhex(sealed.PROPOSER_ROLE().hex().removeprefix("0x"))
    with brownie.reverts(f"AccessControlUnauthorizedAccount: {lo(alice)}, {proposer!r}"):
        sealed.schedule(stake_manager, 0, data, ZERO, ZERO, DELAY, {"from": alice})
    with brownie.reverts(f"TimelockUnauthorizedCaller: {lo(deployer)}"):
        sealed.updateDelay(0, {"from": deployer})  # only a delayed operation of its own changes its delay
    with brownie.reverts(f"TimelockInsufficientDelay: {DELAY - 1}, {DELAY}"):
        sealed.schedule(stake_manager, 0, data, ZERO, ZERO, DELAY - 1, {"from": deployer})
    tx = sealed.schedule(stake_manager, 0, data, ZERO, ZERO, DELAY, {"from": deployer})
    op = tx.events["CallScheduled"]["id"]
    ready = (1 << 2).to_bytes(32, "big")  # the bitmap of OperationState.Ready
    with brownie.reverts(f"TimelockUnexpectedOperationState: {bytes.fromhex(str(op)[2:])!r}, {ready!r}"):
        sealed.execute(stake_manager, 0, data, ZERO, ZERO, {"from": alice})
    chain.sleep(DELAY + 1)
    chain.mine()
    then = stake_manager.setUnbondingDelay.encode_input(30)
    sealed.schedule(stake_manager, 0, then, op, ZERO, DELAY, {"from": deployer})  # after the split only
    chain.sleep(DELAY + 1)
    chain.mine()
    with brownie.reverts(f"TimelockUnexecutedPredecessor: {bytes.fromhex(str(op)[2:])!r}"):
        sealed.execute(stake_manager, 0, then, op, ZERO, {"from": alice})
    with brownie.reverts("TimelockInvalidOperationLength: 1, 1, 0"):
        sealed.executeBatch([stake_manager], [], [data], ZERO, ZERO, {"from": alice})
    sealed.execute(stake_manager, 0, data, ZERO, ZERO, {"from": alice})  # anyone executes a ready change
    assert (stake_manager.slashWinnerBps(), stake_manager.slashRefereeBps()) == (4_000, 2_000)
    sealed.execute(stake_manager, 0, then, op, ZERO, {"from": alice})
    assert stake_manager.unbondingDelayBlocks() == 30
