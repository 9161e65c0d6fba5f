"""ChainWatch against real Anvil chains restarted under the same URL: it names how the node
now differs from the chain it pinned (chain id, genesis, code), and tells an absent node
from a changed one."""

from __future__ import annotations

import time

import pytest

from truetrain.chain.client import ChainClient
from truetrain.chain.deployment import DeployedContract, Deployment, codehash
from truetrain.chain.watch import ChainMark, ChainWatch
from truetrain.errors import DeploymentError, RpcUnavailable

WRONG_HASH = "0x" + "ab" * 32


def deployed_token(node, accounts, code_hash: str | None = None) -> tuple[Deployment, str]:
    """A TrainToken on ``node`` and a deployment recording it (with ``code_hash`` if given)."""
    client = ChainClient(node.url, receipt_timeout_s=20)
    token, _ = client.deploy("TrainToken", True, [], [], sender=accounts[0])
    recorded = code_hash or codehash(client.w3, token.address)
    return Deployment(31337, 0, {"token": DeployedContract("TrainToken", token.address, recorded)}), token.address


def genesis_of(node) -> str:
    return ChainClient(node.url).w3.eth.get_block(0)["hash"].to_0x_hex()


def test_watch_sameChainWithItsCode_findsNoDifference(own_devnet, accounts):
    node = own_devnet()
    deployment, _ = deployed_token(node, accounts)
    watch = ChainWatch(node.url, deployment)
    assert watch.pin() == ChainMark(31337, genesis_of(node))
    assert watch.difference() is None
    assert watch.looks == 1


def _pinned_then_stopped(own_devnet, accounts):
    """A devnet with the token deployed, a watch pinned to it, and the devnet stopped."""
    node = own_devnet()
    deployment, _ = deployed_token(node, accounts)
    watch = ChainWatch(node.url, deployment)
    before = watch.pin()
    node.stop()
    return node, watch, before


def test_watch_nodeRestartedWithAnotherChainId_saysBothChains(own_devnet, accounts):
    node, watch, before = _pinned_then_stopped(own_devnet, accounts)
    other = own_devnet(node.port, chain_id=31338)
    assert watch.difference() == (f"expected chain 31337 genesis {before.genesis}, but the node at {node.url} "
                                  f"now reports chain 31338 genesis {genesis_of(other)}")


def test_watch_nodeRestartedAsAFreshChain_saysTheNewGenesis(own_devnet, accounts):
    node, watch, before = _pinned_then_stopped(own_devnet, accounts)
    time.sleep(1.1)  # the genesis block's timestamp is the start's second: another second, another hash
    fresh = own_devnet(node.port)
    assert genesis_of(fresh) != before.genesis
    assert watch.difference() == (f"expected chain 31337 genesis {before.genesis}, but the node at {node.url} "
                                  f"now reports chain 31337 genesis {genesis_of(fresh)}")


def test_watch_sameGenesisWithoutTheDeployment_saysNoCode(own_devnet, accounts):
    # Same chain id, same genesis block (fixed timestamp): only the missing code tells them apart.
    node = own_devnet(genesis_timestamp=1_700_000_000)
    deployment, address = deployed_token(node, accounts)
    watch = ChainWatch(node.url, deployment)
    before = watch.pin()
    node.stop()
    own_devnet(node.port, genesis_timestamp=1_700_000_000)
    assert watch.difference() == (
        f"the node at {node.url} ({before}) has no code at {address} (token: TrainToken), where the "
        f"deployment recorded code {deployment.contracts['token'].codehash}")


def test_watch_otherCodeAtAnAddress_saysOtherCode(own_devnet, accounts):
    node = own_devnet()
    deployment, address = deployed_token(node, accounts, code_hash=WRONG_HASH)
    watch = ChainWatch(node.url, deployment)
    mark = watch.pin()
    assert watch.difference() == (f"the node at {node.url} ({mark}) has other code at {address} (token: TrainToken), "
                                  f"where the deployment recorded code {WRONG_HASH}")


def test_watch_nodeGone_isUnavailableNotChanged(own_devnet, accounts):
    node = own_devnet()
    deployment, _ = deployed_token(node, accounts)
    watch = ChainWatch(node.url, deployment, timeout_s=1.0)
    watch.pin()
    node.stop()
    with pytest.raises(RpcUnavailable, match=rf"^JSON-RPC node at {node.url} unavailable \(eth_chainId\): ConnectionError$"):
        watch.difference()


def test_watch_pin_nodeOfAnotherChainThanTheDeployment_refuses(own_devnet, accounts):
    node = own_devnet()
    deployment, _ = deployed_token(node, accounts)
    node.stop()
    other = own_devnet(node.port, chain_id=31338)
    with pytest.raises(DeploymentError) as caught:
        ChainWatch(other.url, deployment).pin()
    assert str(caught.value) == f"the deployment is for chain 31337, but the node at {other.url} is chain 31338"


def test_watch_pinWithRetries_survivesDroppedRequests_andWithoutThemFailsInOneLine(own_devnet, accounts):
    """A daemon starting behind a lossy link: the pin asks again for what was dropped (the
    named faulty proxy drops every third request: a pin makes two); without retries the first
    drop stands as RpcUnavailable (a proxy that drops every request: under a loaded suite a
    slow answer can time out and be asked again, which shifts which request the first proxy
    drops, so the counts there are a floor)."""
    from truetrain.chain.flaky_rpc import FlakyRpcProxy

    node = own_devnet()
    deployment, _ = deployed_token(node, accounts)
    with FlakyRpcProxy(node.url, every=3) as proxy:
        for _ in range(2):  # requests 1-2, then 3 (dropped), 4-5
            assert ChainWatch(proxy.url, deployment).pin(retries=4) == ChainMark(31337, genesis_of(node))
        assert proxy.dropped >= 1
    with FlakyRpcProxy(node.url, every=1) as proxy:
        with pytest.raises(RpcUnavailable, match="unavailable"):  # its first request is dropped
            ChainWatch(proxy.url, deployment).pin()
        assert proxy.dropped == 1
