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
