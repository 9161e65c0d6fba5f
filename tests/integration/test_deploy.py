"""scripts/deploy.py's core: deploy the stack to a fresh Anvil, wire roles, reuse on rerun."""

from __future__ import annotations

import json

import pytest

from truetrain.chain.client import ChainClient, dev_accounts
from truetrain.chain.deploy import GRANTS, STEPS, deploy_stack
from truetrain.chain.deployment import read_deployment
from truetrain.chain.devnet import DEV_CHAIN_ID, free_port, start_anvil
from truetrain.errors import DeploymentError


@pytest.fixture
def anvil(TrainToken):  # the brownie fixture makes sure build/contracts is compiled
    node = start_anvil(free_port())
    yield node
    node.stop()


def test_deploy_writes_file_grants_roles_and_reuses_on_rerun(anvil, tmp_path):
    client, deployer = ChainClient(anvil.url), dev_accounts(1)[0]
    first = deploy_stack(client, deployer, folder=tmp_path)
    assert first.deployed == [s.key for s in STEPS] and first.reused == []
    assert len(first.granted) == len(GRANTS)
    recorded = json.loads((tmp_path / f"{DEV_CHAIN_ID}.json").read_text())
    assert set(recorded["contracts"]) == {"token", "registry", "stake", "pool", "market", "game"}
    assert recorded["contracts"]["market"]["name"] == "JobMarket"
    assert recorded["contracts"]["game"]["name"] == "DisputeGame"
    pool = client.contract("WorkerPool", first.deployment.address("pool"))
    market = first.deployment.address("market")
    assert client.call(pool.functions.hasRole(client.call(pool.functions.MARKET_ROLE()), market))
    market_contract = client.contract("JobMarket", market)
    game = first.deployment.address("game")
    assert client.call(market_contract.functions.hasRole(client.call(market_contract.functions.DISPUTE_ROLE()), game))

    second = deploy_stack(client, deployer, folder=tmp_path)
    assert second.deployed == [] and second.granted == []
    assert second.deployment.address("market") == market


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
