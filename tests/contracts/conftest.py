"""Shared fixtures for the contract tests: a devnet TrainToken, the IdentityRegistry and the
StakeManager, with a real test account standing in for the market (it holds MARKET_ROLE and
RECORDER_ROLE). Every test runs in its own snapshot (brownie's ``fn_isolation``)."""

from __future__ import annotations

import pytest
from brownie import web3

UNBONDING_DELAY_BLOCKS = 20
STAKE = 1_000 * 10**18
WORKER_CAPABILITY = (1, 24_576, 1_000, 3, 2)  # GPU class 1, 24 GiB, throughput, region 3, 2 at once
PROFILE_CID = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
PROFILE_HASH = "0x" + "ab" * 32


def role_id(name: str) -> str:
    """The AccessControl role id ``keccak256(name)`` as hex."""
    return "0x" + web3.keccak(text=name).hex().removeprefix("0x")


MARKET_ROLE = role_id("MARKET_ROLE")
RECORDER_ROLE = role_id("RECORDER_ROLE")
DEFAULT_ADMIN_ROLE = "0x" + "00" * 32


@pytest.fixture(scope="module", autouse=True)
def module_snapshot(module_isolation):
    """Revert the chain after every module."""


@pytest.fixture(autouse=True)
def isolation(fn_isolation):
    """Revert the chain after every test."""


@pytest.fixture(scope="module")
def deployer(accounts):
    return accounts[0]


@pytest.fixture(scope="module")
def market(accounts):
    """A plain account granted MARKET_ROLE and RECORDER_ROLE: it stands in for JobMarket."""
    return accounts[1]


@pytest.fixture(scope="module")
def alice(accounts):
    return accounts[2]


@pytest.fixture(scope="module")
def bob(accounts):
    return accounts[3]


@pytest.fixture(scope="module")
def carol(accounts):
    return accounts[4]


@pytest.fixture(scope="module")
def outsider(accounts):
    return accounts[9]


@pytest.fixture(scope="module")
def token(TrainToken, deployer):
    return TrainToken.deploy(True, [], [], {"from": deployer})


@pytest.fixture(scope="module")
def registry(IdentityRegistry, deployer, market):
    contract = IdentityRegistry.deploy({"from": deployer})
    contract.grantRole(RECORDER_ROLE, market, {"from": deployer})
    return contract


@pytest.fixture(scope="module")
def stake_manager(StakeManager, token, deployer, market):
    contract = StakeManager.deploy(token, UNBONDING_DELAY_BLOCKS, {"from": deployer})
    contract.grantRole(MARKET_ROLE, market, {"from": deployer})
    return contract


@pytest.fixture
def funded(token, deployer, alice, bob, carol):
    """alice, bob and carol each hold 10 × STAKE tokens."""
    for account in (alice, bob, carol):
        token.mint(account, 10 * STAKE, {"from": deployer})
    return (alice, bob, carol)


@pytest.fixture
def staked(funded, token, stake_manager):
    """alice and bob have each staked STAKE."""
    alice, bob, _ = funded
    for account in (alice, bob):
        token.approve(stake_manager, STAKE, {"from": account})
        stake_manager.stake(STAKE, {"from": account})
    return (alice, bob)


@pytest.fixture(scope="module")
def sortition(SortitionHarness, deployer):
    return SortitionHarness.deploy({"from": deployer})


@pytest.fixture(scope="module")
def merkle(MerkleHarness, deployer):
    return MerkleHarness.deploy({"from": deployer})
