"""pytest plugin, loaded early (``-p tests.brownie_network``): tunes the Anvil brownie launches.

brownie 1.22 fails to merge ``networks.development.cmd_settings`` from brownie-config.yaml
(its compiled ``_recursive_update`` meets the default ``None``), so the settings are put
into brownie's in-memory network table here, before brownie's own plugin connects. Tests
get their own port (``TT_ANVIL_PORT``, default 18545) so they never attach to a devnet the
user left running on 8545.

brownie attaches to whatever already answers on its port instead of starting its Anvil: a
run beside a devnet on 18545 once sent its transactions to that node and failed 11 tests
('max fee per gas less than block base fee'). So a session whose port is taken stops at its
start with one line, and brownie's attach is refused outright (the port could be taken
between that check and brownie's launch).
"""

from __future__ import annotations

import os

import pytest
from brownie._config import CONFIG
from brownie.network.rpc import Rpc

from truetrain.chain.devnet import port_is_free

TEST_ANVIL_PORT = int(os.environ.get("TT_ANVIL_PORT", "18545"))


def port_taken(port: int) -> str:
    """The one line a session stops with when another process holds its Anvil port."""
    return f"port {port} is taken by another process: set TT_ANVIL_PORT to a free port"


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    # tryfirst: before the terminal's header, so the refusal is the session's only line
    if not port_is_free(TEST_ANVIL_PORT):
        raise pytest.UsageError(port_taken(TEST_ANVIL_PORT))


def _refuse_attach(self, laddr):
    port = laddr[1] if isinstance(laddr, tuple) else laddr.rsplit(":", 1)[-1]
    raise pytest.UsageError(port_taken(int(port)))


Rpc.attach = _refuse_attach

# Anvil writes every state older than its in-memory window to ~/.foundry/anvil/tmp and only
# removes them when it exits cleanly: a long walk wrote gigabytes, and killed runs left them
# behind (74 GB on this machine once). Tests read state at most one block back, so keeping the
# last 256 states in memory and none on disk costs nothing (the flag rides on the command,
# brownie has no setting for it).
CONFIG.networks["development"]["cmd"] = f"{CONFIG.networks['development']['cmd']} --prune-history 256"
CONFIG.networks["development"]["cmd_settings"] = {
    "port": TEST_ANVIL_PORT,
    "accounts": 20,
    "gas_limit": 30_000_000,
    "base_fee": 0,
    "default_balance": 10_000,
}

# brownie decides a transaction was dropped when the sender's nonce has moved past it but its
# receipt is not found yet. Anvil mines on its own task and bumps the account nonce a moment
# before the receipt is readable, so on a loaded 2-core machine a mined transaction was now
# and then reported as "Tx dropped without known replacement" (seen once in a full CI run).
# Waiting for the receipt first (bounded, 30 s) closes that window; it also spares brownie's
# 1-second sleep when the first receipt query comes too early.
import time as _time

from brownie.network.transaction import TransactionReceipt as _Receipt
from brownie.network.web3 import web3 as _web3
from hexbytes import HexBytes as _HexBytes
from web3.exceptions import TransactionNotFound as _NotFound

_brownie_await_confirmation = _Receipt._await_confirmation


def _await_receipt_then_confirm(self, block_number=None, required_confs=1):
    deadline = _time.monotonic() + 30.0
    while block_number is None and _time.monotonic() < deadline:
        try:
            receipt = _web3.eth.get_transaction_receipt(_HexBytes(self.txid))
        except _NotFound:
            receipt = None
        if receipt is not None and receipt["blockHash"] is not None:
            break
        _time.sleep(0.01)
    return _brownie_await_confirmation(self, block_number, required_confs)


_Receipt._await_confirmation = _await_receipt_then_confirm

# brownie's chain.mine(n) sends one evm_mine a block, about 20 ms of CPU each (a 200-block
# mine took 3.9 CPU-s; the contract tests mine thousands of blocks past windows, clocks and
# epochs). Anvil's own anvil_mine mines n blocks in one call (the same blocks: empty, at the
# node's current time, as evm_mine gives them); brownie's bookkeeping after a mine is kept.
# A mine with a timestamp or timedelta still goes through brownie.
from brownie.network.state import Chain as _Chain

_brownie_mine = _Chain.mine


def _mine_in_one_call(self, blocks: int = 1, timestamp=None, timedelta=None):
    if timestamp is not None or timedelta is not None or not isinstance(blocks, int) or blocks < 2:
        return _brownie_mine(self, blocks, timestamp, timedelta)
    with self._undo_lock:
        _web3.provider.make_request("anvil_mine", [hex(blocks)])
        self._set_time_offset_from_block()
        self._redo_buffer.clear()
        self._current_id = self._take_snapshot()
        return _web3.eth.block_number


_Chain.mine = _mine_in_one_call

# Before every call and transaction web3's validation asks the node for its chain id: in the
# dispute walk that was 4,490 of its 7,767 requests and a third of its CPU. A chain's id does
# not change, so brownie's provider asks once (as truetrain.chain.client's does), and its
# requests session skips reading proxy settings from the environment (none applies to a
# loopback node).
import requests as _requests
from brownie.network.web3 import Web3 as _BrownieWeb3
from web3.providers.rpc import HTTPProvider as _HTTPProvider
from web3.types import RPCEndpoint as _RPCEndpoint

_brownie_connect = _BrownieWeb3.connect


def _connect_caching_chain_id(self, uri: str, timeout: int = 30) -> None:
    _brownie_connect(self, uri, timeout)
    if isinstance(self.provider, _HTTPProvider):
        self.provider.cache_allowed_requests = True
        self.provider.cacheable_requests = {_RPCEndpoint("eth_chainId")}
        session = _requests.Session()
        session.trust_env = False
        self.provider._request_session_manager.cache_and_return_session(self.provider.endpoint_uri, session)


_BrownieWeb3.connect = _connect_caching_chain_id
