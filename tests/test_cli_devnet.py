"""`truetrain devnet up/status/down` against a real Anvil and a real IPFS dev node."""

from __future__ import annotations

import json
import socket

import pytest
from click.testing import CliRunner

from truetrain import devnet
from truetrain.chain.client import ChainClient, dev_accounts
from truetrain.chain.devnet import free_port, port_is_free, start_anvil
from truetrain.cli import main


@pytest.fixture
def state_dir(tmp_path, monkeypatch, TrainToken):  # TrainToken: brownie has compiled build/
    monkeypatch.setattr(devnet, "STATE_DIR", tmp_path)
    monkeypatch.setattr(devnet, "STATE_FILE", tmp_path / "devnet.json")
    monkeypatch.setattr(devnet, "DEPLOYMENTS_DIR", tmp_path / "deployments")
    yield tmp_path
    if (tmp_path / "devnet.json").exists():
        try:
            devnet.devnet_down()
        except Exception:
            pass


def test_devnet_up_deploys_funds_and_is_idempotent_then_down_stops_both(state_dir):
    """A second `up` keeps what runs and the deployment, and mints nothing: an account that
    spent some of its TRAIN keeps what it has left (funded accounts are not funded again)."""
    runner = CliRunner()
    port, ipfs_port = free_port(), free_port()
    up = runner.invoke(main, ["devnet", "up", "--port", str(port), "--ipfs-port", str(ipfs_port), "--json"])
    assert up.exit_code == 0, up.output
    state = json.loads(up.output)
    assert state["anvil"]["url"] == f"http://127.0.0.1:{port}"
    assert state["ipfs"]["api_addr"] == f"/ip4/127.0.0.1/tcp/{ipfs_port}"
    kinds = ["kinds.core", "kinds.xent", "kinds.quant", "kinds.norm", "kinds.optim", "kinds.data"]
    assert state["deployed"] == ["token", "registry", "stake", "pool", "recovery", "book", "market", *kinds, "stepgame",
                                 "game", "timelock"]
    assert len(state["funded"]) == devnet.FUNDED_ACCOUNTS
    client = ChainClient(state["anvil"]["url"])
    token = client.contract("TrainToken", state["contracts"]["token"])
    spender = dev_accounts(2)[1]
    assert client.call(token.functions.balanceOf(spender.address)) == devnet.FUND_WEI
    assert (state_dir / "deployments" / "31337.json").exists()
    client.transact(token.functions.burn(3 * 10**18), spender)  # spends 3 TRAIN
    minted = client.call(token.functions.totalMinted())

    second = runner.invoke(main, ["devnet", "up", "--port", str(port), "--ipfs-port", str(ipfs_port)])
    assert second.exit_code == 0, second.output
    assert second.output == (
        f"devnet up: chain {state['anvil']['url']} (pid {state['anvil']['pid']}, chain id 31337), "
        f"IPFS {state['ipfs']['url']} (pid {state['ipfs']['pid']}); JobMarket at {state['contracts']['market']}; "
        "dev accounts funded before (not again)\n")
    again = json.loads(runner.invoke(main, ["devnet", "up", "--port", str(port), "--ipfs-port", str(ipfs_port),
                                            "--json"]).output)
    assert again["anvil"]["pid"] == state["anvil"]["pid"] and again["ipfs"]["pid"] == state["ipfs"]["pid"]
    assert again["deployed"] == [] and again["funded"] == []
    assert again["contracts"] == state["contracts"]
    assert client.call(token.functions.balanceOf(spender.address)) == devnet.FUND_WEI - 3 * 10**18
    assert client.call(token.functions.totalMinted()) == minted

    status = runner.invoke(main, ["devnet", "status", "--json"])
    assert status.exit_code == 0 and json.loads(status.output)["running"] is True
    down = runner.invoke(main, ["devnet", "down"])
    assert down.exit_code == 0, down.output
    assert port_is_free(port) and port_is_free(ipfs_port)
    assert runner.invoke(main, ["devnet", "status"]).exit_code == 3


def test_devnet_down_without_devnet_is_one_line_error(state_dir):
    result = CliRunner().invoke(main, ["devnet", "down"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == ["error: no devnet is running (start one with `truetrain devnet up`)"]


def test_devnet_up_on_taken_port_is_one_line_error_and_starts_nothing(state_dir):
    ipfs_port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = CliRunner().invoke(main, ["devnet", "up", "--port", str(port), "--ipfs-port", str(ipfs_port)])
    assert result.exit_code == 1
    assert result.output.strip() == (f"error: Anvil port {port} is already in use: stop what listens there, "
                                     "pick another port, or pass --port 0 for a free one")
    assert not (state_dir / "devnet.json").exists()
    assert port_is_free(ipfs_port)


def test_devnet_up_port0_takesFreePorts_andSaysWhich(state_dir):
    runner = CliRunner()
    up = runner.invoke(main, ["devnet", "up", "--port", "0", "--ipfs-port", "0", "--json"])
    assert up.exit_code == 0, up.output
    state = json.loads(up.output)
    port, ipfs_port = state["anvil"]["port"], int(state["ipfs"]["api_addr"].rsplit("/", 1)[1])
    assert port > 0 and ipfs_port > 0 and port != ipfs_port
    assert state["anvil"]["url"] == f"http://127.0.0.1:{port}"
    assert ChainClient(state["anvil"]["url"]).chain_id == 31337
    status = json.loads(runner.invoke(main, ["devnet", "status", "--json"]).output)
    assert status["running"] is True and status["anvil"]["port"] == port
    assert runner.invoke(main, ["devnet", "down"]).exit_code == 0
    assert port_is_free(port) and port_is_free(ipfs_port)


def test_every_command_has_help_text():
    def walk(group, path):
        for name, command in group.commands.items():
            assert command.help, f"{' '.join(path + [name])} has no help text"
            if hasattr(command, "commands"):
                walk(command, path + [name])

    walk(main, ["truetrain"])


def test_devnet_up_with_ipfs_port_taken_leaves_no_anvil_running(state_dir):
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        ipfs_port = sock.getsockname()[1]
        result = CliRunner().invoke(main, ["devnet", "up", "--port", str(port), "--ipfs-port", str(ipfs_port)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"error: IPFS API port {ipfs_port} is already in use: stop what listens there, pick another port, "
        "or pass --ipfs-port 0 for a free one"]
    assert port_is_free(port)
    assert not (state_dir / "devnet.json").exists()


def test_fundDevAccounts_fundsOnlyAccountsTheTokenNeverMintedTo(TrainToken):
    node = start_anvil(free_port())
    try:
        client = ChainClient(node.url)
        deployer, *others = dev_accounts(devnet.FUNDED_ACCOUNTS + 1)
        token, _ = client.deploy("TrainToken", True, [], [], sender=deployer)
        client.transact(token.functions.mint(others[2].address, 5), deployer)  # say, a run cut short
        funded = devnet.fund_dev_accounts(client, token.address)
        assert funded == [a.address for i, a in enumerate(others) if i != 2]
        assert [client.call(token.functions.balanceOf(a.address)) for a in others] == [
            5 if i == 2 else devnet.FUND_WEI for i in range(len(others))]
        assert devnet.fund_dev_accounts(client, token.address) == []
    finally:
        node.stop()
