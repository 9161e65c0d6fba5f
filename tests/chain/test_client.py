"""ChainClient against a real Anvil: nonces, confirmations, reverts, retries."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.chain.conftest import mine, rpc
from truetrain.chain.flaky_rpc import Drop, FlakyRpcProxy
from truetrain.chain import client as client_module
from truetrain.chain.client import ChainClient
from truetrain.chain.devnet import free_port
from truetrain.errors import ChainChanged, ConfigError, ContractRevert, RpcUnavailable, TransactionRejected


def tx_nonces(client: ChainClient, receipts) -> list[int]:
    return [client.w3.eth.get_transaction(r.tx_hash)["nonce"] for r in receipts]


def test_transact_twentyConcurrentSendsFromOneKey_useNonces0to19WithoutGap(client, token, fresh_account, accounts):
    sender = fresh_account()
    spenders = [a.address for a in accounts]

    def approve(i: int):
        return client.transact(token.functions.approve(spenders[i % len(spenders)], i + 1), sender)

    with ThreadPoolExecutor(max_workers=20) as pool:
        receipts = list(pool.map(approve, range(20)))
    assert all(r.raw["status"] == 1 for r in receipts)
    assert sorted(tx_nonces(client, receipts)) == list(range(20))
    assert client.w3.eth.get_transaction_count(sender.address, "pending") == 20
    assert client.nonce_manager(sender.address).peek() == 20
    assert client.nonce_manager(sender.address).resyncs == 1  # asked the node once, then counted


def test_transact_afterRejectedSend_resyncsAndLeavesNoGap(client, token, fresh_account, accounts, devnet):
    sender = fresh_account()
    for i in range(3):
        client.transact(token.functions.approve(accounts[1].address, i + 1), sender)
    manager = client.nonce_manager(sender.address)
    assert manager.peek() == 3
    rpc(devnet.url, "anvil_setBalance", sender.address, "0x0")  # the node will refuse the next send
    with pytest.raises(TransactionRejected, match="node refused transaction"):
        client.transact(token.functions.approve(accounts[1].address, 4), sender)
    assert manager.peek() is None  # the reserved nonce was not consumed; the cache is dropped
    rpc(devnet.url, "anvil_setBalance", sender.address, hex(10**20))
    receipt = client.transact(token.functions.approve(accounts[1].address, 5), sender)
    assert tx_nonces(client, [receipt]) == [3]
    assert manager.resyncs == 2


def test_transact_keyUsedBehindTheManagersBack_resyncsOnNonceTooLow(client, token, fresh_account, accounts):
    sender = fresh_account()
    client.transact(token.functions.approve(accounts[1].address, 1), sender)
    other = ChainClient(client.rpc_url)  # a second client with its own manager for the same key
    other.transact(token.functions.approve(accounts[1].address, 2), sender)
    receipt = client.transact(token.functions.approve(accounts[1].address, 3), sender)
    assert tx_nonces(client, [receipt]) == [2]


def test_transact_withTwoConfirmations_returnsOnlyAfterTwoMoreBlocks(client, token, accounts, devnet):
    confirming = ChainClient(devnet.url, confirmations=2, receipt_timeout_s=20)
    stop = threading.Event()

    def miner():
        while not stop.wait(0.3):
            mine(devnet.url)

    thread = threading.Thread(target=miner, daemon=True)
    thread.start()
    try:
        started = time.monotonic()
        receipt = confirming.transact(token.functions.mint(accounts[2].address, 7), accounts[0])
        waited = time.monotonic() - started
        head = confirming.w3.eth.block_number
    finally:
        stop.set()
        thread.join()
    assert head >= receipt.block_number + 2
    assert waited >= 0.5  # two blocks of the 0.3 s miner, not the instant automined one


def test_transact_withZeroConfirmations_returnsOnItsOwnBlock(client, token, accounts):
    receipt = client.transact(token.functions.mint(accounts[2].address, 7), accounts[0])
    assert client.w3.eth.block_number == receipt.block_number


def test_transact_mintFromNonOwner_raisesOwnableUnauthorizedAndSendsNothing(client, token, accounts):
    outsider = accounts[3]
    before = client.w3.eth.get_transaction_count(outsider.address, "pending")
    peek = client.nonce_manager(outsider.address).peek()
    with pytest.raises(ContractRevert) as caught:
        client.transact(token.functions.mint(outsider.address, 1), outsider)
    assert caught.value.error == "OwnableUnauthorizedAccount"
    assert caught.value.error_args == (outsider.address.lower(),)
    assert client.w3.eth.get_transaction_count(outsider.address, "pending") == before
    assert client.nonce_manager(outsider.address).peek() == peek


def test_transact_minedRevert_isDecodedByName(client, token, accounts):
    with pytest.raises(ContractRevert) as caught:  # a fixed gas skips the estimate, so it is mined
        client.transact(token.functions.transfer(accounts[1].address, 10**30), accounts[4], gas=100_000)
    assert caught.value.error == "ERC20InsufficientBalance"
    assert "reverted" in str(caught.value)


def test_transact_minedOutOfGas_isARevertByName(client, token, accounts):
    """A transaction mined with less gas than its path took (the block took a costlier path
    than the estimate) comes back as ContractRevert("OutOfGas"), not a raw node error."""
    with pytest.raises(ContractRevert) as caught:
        client.transact(token.functions.mint(accounts[1].address, 1), accounts[0], gas=25_000)  # a mint writes two slots
    assert caught.value.error == "OutOfGas"
    assert "ran out of its 25,000 gas" in str(caught.value)


def test_transact_whileWaitingRaises_endsTheReceiptWaitAndResyncsTheNonce(own_devnet, accounts, monkeypatch):
    monkeypatch.setattr(client_module, "WAITING_CHECK_S", 0.3)
    node = own_devnet()
    chain = ChainClient(node.url, receipt_timeout_s=60)
    token, _ = chain.deploy("TrainToken", True, [], [], sender=accounts[0])
    rpc(node.url, "evm_setAutomine", False)  # nothing is mined: the receipt never comes
    looks = []

    def look():
        looks.append(time.monotonic())
        if len(looks) == 2:
            raise ChainChanged("the node is another chain")

    chain.while_waiting = look
    started = time.monotonic()
    with pytest.raises(ChainChanged, match="^the node is another chain$"):
        chain.transact(token.functions.mint(accounts[1].address, 1), accounts[0])
    assert len(looks) == 2 and time.monotonic() - started < 5
    assert chain.nonce_manager(accounts[0].address).peek() is None  # asks the node next time


def test_gasBuffer_scalesTheEstimate(client, token, accounts, devnet):
    generous = ChainClient(devnet.url, gas_buffer=2.0)
    call = token.functions.mint(accounts[2].address, 1)
    estimate = call.estimate_gas({"from": accounts[0].address})
    receipt = generous.transact(call, accounts[0])
    assert generous.w3.eth.get_transaction(receipt.tx_hash)["gas"] == int(estimate * 2.0)


@pytest.mark.parametrize("mode", [Drop.BEFORE, Drop.AFTER])
def test_transact_throughProxyDroppingEveryThirdRequest_retriesAndKeepsNoncesConsecutive(
        devnet, client, token, fresh_account, accounts, mode):
    sender = fresh_account()
    with FlakyRpcProxy(devnet.url, every=3, mode=mode) as proxy:
        flaky = ChainClient(proxy.url, retries=4, backoff_s=0.01, backoff_max_s=0.05, receipt_timeout_s=20)
        receipts = [flaky.transact(token.functions.approve(accounts[1].address, i + 1), sender) for i in range(10)]
        assert proxy.dropped >= 10
    assert flaky.provider.retried == proxy.dropped
    assert sorted(tx_nonces(client, receipts)) == list(range(10))


def test_client_asksChainIdOnce(devnet, token, fresh_account, accounts):
    sender = fresh_account()
    with FlakyRpcProxy(devnet.url, every=0) as proxy:
        counted = ChainClient(proxy.url, receipt_timeout_s=20)
        own = counted.contract("TrainToken", token.address)
        for i in range(3):
            counted.transact(own.functions.approve(accounts[1].address, i + 1), sender)
            assert counted.call(own.functions.allowance(sender.address, accounts[1].address)) == i + 1
    # web3 validates each call and transaction against the chain's id: it was asked 16 times
    # here (a third of all requests); now once per thread that asks (web3 keys its cache so).
    assert proxy.methods["eth_chainId"] <= 2, proxy.methods
    assert proxy.methods["eth_call"] == 3 and proxy.methods["eth_sendRawTransaction"] == 3


def test_client_reachesALoopbackNodeDirectly_whateverTheProxySettings(devnet, token, fresh_account, accounts,
                                                                       monkeypatch):
    sender = fresh_account()
    # A proxy that does not exist: a client that read the environment's proxy settings
    # would send every request there and fail.
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{free_port()}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    direct = ChainClient(devnet.url, retries=1, backoff_s=0.01, receipt_timeout_s=20)
    own = direct.contract("TrainToken", token.address)
    direct.transact(own.functions.approve(accounts[2].address, 7), sender)
    assert direct.call(own.functions.allowance(sender.address, accounts[2].address)) == 7


def test_client_noNodeAtUrl_raisesRpcUnavailableAfterBoundedRetries():
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(RpcUnavailable, match=f"no Ethereum JSON-RPC node answers at {url}"):
        ChainClient(url, retries=3, backoff_s=0.05, backoff_max_s=0.1)
    assert time.monotonic() - started < 2.0
    assert RpcUnavailable.retryable


def test_client_unknownSetting_raisesConfigError(devnet):
    with pytest.raises(ConfigError, match="unknown chain client setting"):
        ChainClient(devnet.url, confirmation=2)
    with pytest.raises(ConfigError, match="gas_buffer must be >= 1"):
        ChainClient(devnet.url, gas_buffer=0.5)
