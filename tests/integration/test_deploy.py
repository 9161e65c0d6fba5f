"""scripts/deploy.py's core: deploy the stack to a fresh Anvil, wire roles, reuse on rerun."""

from __future__ import annotations

import json

import pytest

from truetrain.chain.client import ChainClient, dev_accounts
from truetrain.chain.deploy import GRANTS, STEPS, deploy_stack
from truetrain.chain.deployment import read_deployment
from truetrain.chain.devnet import DEV_CHAIN_ID, free_port, start_anvil
from truetrain.hashing import keccak256
from truetrain.trace.kind_names import KINDS
from truetrain.errors import ContractRevert, DeploymentError


@pytest.fixture
def anvil(TrainToken):  # the brownie fixture makes sure build/contracts is compiled
    node = start_anvil(free_port())
    yield node
    node.stop()


def test_deploy_writes_file_grants_roles_seals_and_reuses_on_rerun(anvil, tmp_path):
    client, deployer = ChainClient(anvil.url), dev_accounts(1)[0]
    first = deploy_stack(client, deployer, folder=tmp_path)
    assert first.deployed == [s.key for s in STEPS] and first.reused == []
    assert len(first.granted) == len(GRANTS) + 2  # + the stake listener and the market's dispute game
    recorded = json.loads((tmp_path / f"{DEV_CHAIN_ID}.json").read_text())
    kinds = {"kinds.core", "kinds.xent", "kinds.quant", "kinds.norm", "kinds.optim", "kinds.data"}
    assert set(recorded["contracts"]) == {"token", "registry", "stake", "pool", "recovery", "book", "market", "game",
                                          "timelock", "stepgame", *kinds}
    assert recorded["contracts"]["market"]["name"] == "JobMarket"
    assert recorded["contracts"]["game"]["name"] == "DisputeGame"
    # the dispute game ends repro disputes in the StepGame, which knows every kind of the one
    # kind table, each at the kinds contract the table names
    step_game = first.deployment.address("stepgame")
    dispute = client.contract("DisputeGame", first.deployment.address("game"))
    assert client.call(dispute.functions.stepGame()) == step_game
    verifiers = client.contract("StepGame", step_game)
    for kind, spec in KINDS.items():
        address = client.call(verifiers.functions.verifierOf(keccak256(kind.encode())))
        assert address == first.deployment.address("kinds." + spec.contract.removeprefix("StepKinds").lower()), kind
    pool = client.contract("WorkerPool", first.deployment.address("pool"))
    market = first.deployment.address("market")
    assert client.call(pool.functions.hasRole(client.call(pool.functions.MARKET_ROLE()), market))
    market_contract = client.contract("JobMarket", market)
    game = first.deployment.address("game")
    assert client.call(market_contract.functions.isDisputeGame(game))
    assert client.call(market_contract.functions.wiringSealed())
    assert sorted(first.sealed) == sorted(["stake.PARAMETER_ROLE", "stake.DEFAULT_ADMIN_ROLE",
                                           "registry.DEFAULT_ADMIN_ROLE", "pool.DEFAULT_ADMIN_ROLE", "market.wiring"])

    second = deploy_stack(client, deployer, folder=tmp_path)
    assert second.deployed == [] and second.granted == [] and second.sealed == []
    assert second.deployment.address("market") == market


def test_sealedDeployment_adminCannotTakeStakes(anvil, tmp_path):
    """Finding 3's proof of concept against a real deployment: the deployer tries to grant
    itself MARKET_ROLE (to move a staker's tokens), to wire itself as a dispute game, and to
    have the timelock it proposes to grant it; each is refused."""
    client, deployer = ChainClient(anvil.url), dev_accounts(1)[0]
    report = deploy_stack(client, deployer, folder=tmp_path)
    stake = client.contract("StakeManager", report.deployment.address("stake"))
    market = client.contract("JobMarket", report.deployment.address("market"))
    timelock = client.contract("ParameterTimelock", report.deployment.address("timelock"))
    role = client.call(stake.functions.MARKET_ROLE())
    with pytest.raises(ContractRevert) as refused:
        client.transact(stake.functions.grantRole(role, deployer.address), deployer)
    assert refused.value.error == "AccessControlUnauthorizedAccount"
    with pytest.raises(ContractRevert) as refused:
        client.transact(market.functions.wireDisputeGame(deployer.address), deployer)
    assert refused.value.error == "MarketWiringClosed"
    grant = stake.encode_abi("grantRole", args=[role, deployer.address])
    zero = bytes(32)
    client.transact(timelock.functions.schedule(stake.address, 0, grant, zero, zero, 0), deployer)  # devnet delay 0
    with pytest.raises(ContractRevert) as refused:
        client.transact(timelock.functions.execute(stake.address, 0, grant, zero, zero), deployer)
    assert refused.value.error == "AccessControlUnauthorizedAccount"
    assert not client.call(stake.functions.hasRole(role, deployer.address))
    # what the timelock may do: a bounded parameter, after its delay (0 here)
    split = stake.encode_abi("setSlashSplit", args=[4_000, 2_000])
    client.transact(timelock.functions.schedule(stake.address, 0, split, zero, zero, 0), deployer)
    client.transact(timelock.functions.execute(stake.address, 0, split, zero, zero), deployer)
    assert client.call(stake.functions.slashWinnerBps()) == 4_000


def test_deploy_after_devnet_restart_deploys_afresh(anvil, tmp_path):
    client, deployer = ChainClient(anvil.url), dev_accounts(1)[0]
    deploy_stack(client, deployer, folder=tmp_path)
    anvil.stop()
    fresh = start_anvil(anvil.port)
    try:
        again = deploy_stack(ChainClient(fresh.url), deployer, folder=tmp_path)
        assert again.deployed == [s.key for s in STEPS]
    finally:
        fresh.stop()


def test_missing_deployment_file_is_a_clear_error(tmp_path):
    with pytest.raises(DeploymentError, match="no deployment for chain 31337"):
        read_deployment(DEV_CHAIN_ID, tmp_path)
