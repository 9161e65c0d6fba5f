"""Fixtures that run real Anvil devnets on free loopback ports and deploy a real TrainToken.

Every Anvil started here is stopped by pid at teardown, even when its test fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import requests
from eth_account import Account
from eth_account.signers.local import LocalAccount

from truetrain.chain.client import ChainClient, dev_accounts
from truetrain.chain.devnet import Devnet, free_port, start_anvil, stop_pid


def rpc(url: str, method: str, *params):
    """One raw JSON-RPC call (for anvil's evm_* methods)."""
    reply = requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}, timeout=10)
    body = reply.json()
    if "error" in body:
        raise RuntimeError(body["error"])
    return body["result"]


def mine(url: str, blocks: int = 1) -> None:
    for _ in range(blocks):
        rpc(url, "evm_mine")


@pytest.fixture(scope="module")
def devnet() -> Iterator[Devnet]:
    node = start_anvil(free_port())
    yield node
    stop_pid(node.pid)


@pytest.fixture(scope="module")
def accounts() -> list[LocalAccount]:
    return dev_accounts(5)


@pytest.fixture(scope="module")
def client(devnet: Devnet) -> ChainClient:
    return ChainClient(devnet.url, receipt_timeout_s=20)


@pytest.fixture
def token(client: ChainClient, accounts: list[LocalAccount]):
    """A fresh TrainToken (owner: account 0) for each test, so its events are the test's own."""
    contract, _ = client.deploy("TrainToken", True, [], [], sender=accounts[0])
    return contract


@pytest.fixture
def fresh_account(devnet: Devnet) -> Callable[[], LocalAccount]:
    """Make new random keys holding 100 ETH: their nonces start at 0."""

    def make() -> LocalAccount:
        account = Account.create()
        rpc(devnet.url, "anvil_setBalance", account.address, hex(100 * 10**18))
        return account

    return make


@pytest.fixture
def own_devnet() -> Iterator[Callable[..., Devnet]]:
    """Start (or restart, on the same port) a devnet private to one test."""
    started: list[int] = []

    def start(port: int | None = None, **options) -> Devnet:
        node = start_anvil(port or free_port(), **options)
        started.append(node.pid)
        return node

    yield start
    for pid in started:
        stop_pid(pid)
