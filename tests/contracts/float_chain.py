"""FloatHarness on a fresh Anvil, driven by web3 without brownie: for the long comparison
(scripts/float_fuzz.py, ``make fuzz``) and the gas table (bench/float_gas.py)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from web3 import Web3

from truetrain.chain.artifacts import load_artifact
from truetrain.chain.devnet import free_port, start_anvil

#: eth_call gas: a batch of a few thousand operations stays well inside it.
CALL_GAS = 30_000_000


@contextlib.contextmanager
def harness_on_devnet(port: int | None = None, name: str = "FloatHarness") -> Iterator:
    """A deployed harness ``name`` (FloatHarness, OneStepGemmHarness: a web3 contract) on an
    Anvil started here and stopped on exit; ``port``: TT_ANVIL_PORT when set, else a free one."""
    port = port or int(os.environ.get("TT_ANVIL_PORT", 0)) or free_port()
    devnet = start_anvil(port)
    try:
        w3 = Web3(Web3.HTTPProvider(devnet.url, request_kwargs={"timeout": 120}))
        artifact = load_artifact(name)
        factory = w3.eth.contract(abi=artifact.abi, bytecode=artifact.bytecode)
        tx = factory.constructor().transact({"from": w3.eth.accounts[0]})
        address = w3.eth.wait_for_transaction_receipt(tx).contractAddress
        yield w3.eth.contract(address=address, abi=artifact.abi)
    finally:
        devnet.stop()


def runner(harness):
    """``call(code, a, b)`` for :func:`tests.contracts.float_cases.check`: one eth_call."""
    return lambda code, a, b: harness.functions.run(code, a, b).call({"gas": CALL_GAS})
