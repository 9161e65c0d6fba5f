"""A worker's network figures: measured against a real Anvil and a real IPFS dev node, and
declared in its CHAIN identity when due (truetrain.network, truetrain.daemon.network)."""

from __future__ import annotations

import time

import pytest

from tests.ipfs_nodes import client_for, start_node  # noqa: F401 - fixture
from truetrain.chain.client import ChainClient, dev_accounts
from truetrain.chain.deploy import StackParams, deploy_stack
from truetrain.chain.devnet import free_port, start_anvil, stop_pid
from truetrain.chain.handles import connect_deployment
from truetrain.daemon.network import NetworkDeclarer
from truetrain.errors import ConfigError, ContentMismatch
from truetrain.market.jobs import JobTerms
from truetrain.network import (MAX_FETCH_KIBPS, MAX_RPC_RTT_MS, FetchMeter, NetworkFigures, kibps, measure,
                               measure_fetch_kibps, measure_rpc_rtt_ms)

WINDOW = 40  # the pool's liveness window in this deployment (blocks)
ZERO = "0x" + "00" * 20


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """A real Anvil with the whole contract stack deployed; account 1 a registered worker."""
    node = start_anvil(free_port())
    try:
        client = ChainClient(node.url, receipt_timeout_s=20)
        deployer, worker = dev_accounts(2)
        folder = tmp_path_factory.mktemp("deployments")
        deploy_stack(client, deployer, StackParams(liveness_window_blocks=WINDOW), folder=folder)
        contracts = connect_deployment(client, folder)
        client.transact(contracts.registry.functions.register(1, "bafyprofile", b"\x01" * 32, (1, 4096, 1, 0, 1)),
                        worker)
        yield client, contracts, worker
    finally:
        stop_pid(node.pid)


def mine(client, blocks: int) -> None:
    client.w3.provider.make_request("anvil_mine", [hex(blocks)])


def test_measure_realNodes_givesBoundedFiguresAtTheCurrentBlock(stack, start_node):
    client, _, _ = stack
    store = client_for(start_node())
    figures = measure(client.w3, store)
    assert 0 < figures.fetch_kibps <= MAX_FETCH_KIBPS
    assert 1 <= figures.rpc_rtt_ms <= MAX_RPC_RTT_MS
    assert figures.measured_at == client.w3.eth.block_number
    assert 1 <= measure_rpc_rtt_ms(client.w3, samples=1) <= MAX_RPC_RTT_MS


def test_measureFetch_ofAShard_checksItsHash(start_node):
    store = client_for(start_node())
    shard = store.add_bytes(b"shard bytes " * 20_000)
    assert measure_fetch_kibps(store, shard.cid, shard.hash) > 0
    with pytest.raises(ContentMismatch):
        measure_fetch_kibps(store, shard.cid, b"\x02" * 32)
    with pytest.raises(ValueError):
        measure_fetch_kibps(store, shard.cid)


def test_fetchMeter_timesVerifiedFetchesOfShardSize(start_node):
    store = client_for(start_node())
    meter = FetchMeter(store, min_bytes=64 * 1024)
    small, large = store.add_bytes(b"x" * 1_000), store.add_bytes(b"y" * 200_000)
    meter.fetch(small.cid, small.hash, max_size=1 << 20)
    assert meter.take(60) is None  # too small to say anything about throughput
    assert meter.fetch(large.cid, large.hash, max_size=1 << 20) == b"y" * 200_000
    assert 0 < meter.take(60) <= MAX_FETCH_KIBPS
    meter.last_at = time.monotonic() - 120
    assert meter.take(60) is None  # too old
    assert meter.id()  # everything else passes through to the store


def test_figures_boundsAndMaterialChange():
    assert kibps(1024 * 1000, 1.0) == 1000 and kibps(0, 1.0) == 0 and kibps(1 << 40, 1e-9) == MAX_FETCH_KIBPS
    with pytest.raises(ValueError):
        NetworkFigures(MAX_FETCH_KIBPS + 1, 0, 1)
    with pytest.raises(ValueError):
        NetworkFigures(0, MAX_RPC_RTT_MS + 1, 1)
    base = NetworkFigures(10_000, 20, 5)
    assert not base.differs_materially(NetworkFigures(14_000, 24, 9))
    assert base.differs_materially(NetworkFigures(6_000, 20, 9))  # 10,000 > 1.5 × 6,000
    assert base.differs_materially(NetworkFigures(10_000, 31, 9))
    assert not NetworkFigures(1, 1, 5).differs_materially(NetworkFigures(1, 4, 9))  # a few ms of jitter


def test_jobTerms_networkTerms_reachTheParamsAndAreBounded():
    terms = JobTerms(1, 0, 1, min_fetch_kibps=4_096, max_rpc_rtt_ms=250)
    assert terms.min_fetch_kibps == 4_096 and terms.max_rpc_rtt_ms == 250
    for bad in ({"min_fetch_kibps": MAX_FETCH_KIBPS + 1}, {"max_rpc_rtt_ms": MAX_RPC_RTT_MS + 1},
                {"min_fetch_kibps": -1}):
        with pytest.raises(ConfigError):
            JobTerms(1, 0, 1, **bad)


def test_declarer_reasons():
    d = NetworkDeclarer(None, None, None, ZERO, None, window_blocks=WINDOW, check_blocks=5)
    fig = NetworkFigures(10_000, 20, 100)
    assert d.reason(NetworkFigures(0, 0, 0), 0, fig, 100) == "first"
    assert d.reason(fig, 0, fig, 119) is None
    assert d.reason(fig, 0, fig, 100 + WINDOW // 2) == "ageing"
    assert d.reason(fig, 0, NetworkFigures(1_000, 20, 110), 110) == "changed"
    # Timed out at 105: figures measured at 100 no longer count, and a re-measurement counts
    # only from block 145 on: that is when the declarer sends one.
    assert d.reason(fig, 105, fig, 119) is None
    assert d.reason(fig, 105, fig, 145) == "cool-down over"
    assert d.reason(NetworkFigures(10_000, 20, 145), 105, fig, 150) is None
    with pytest.raises(ValueError):
        NetworkDeclarer(None, None, None, ZERO, None, window_blocks=1, check_blocks=5)


def test_declarer_declaresOnChain_firstThenWhenChangedOrAgeing(stack, start_node):
    client, contracts, worker = stack
    registry = contracts.registry
    store = client_for(start_node())
    meter = FetchMeter(store)
    meter.last_kibps, meter.last_at = 10_000, time.monotonic()  # as if a shard had just been fetched
    sent = []

    def send(name, call):
        sent.append(name)
        return client.transact(call, worker)

    declarer = NetworkDeclarer(registry, client.w3, store, worker.address, send, window_blocks=WINDOW,
                               check_blocks=5, meter=meter)
    first = declarer.tick(client.w3.eth.block_number)
    assert sent == ["declareNetwork"] and first.fetch_kibps == 10_000
    on_chain, last_timeout = NetworkFigures.read(registry, worker.address)
    assert on_chain == first and last_timeout == 0
    assert registry.functions.lastSeenBlock(worker.address).call() == client.w3.eth.block_number  # a heartbeat too
    assert declarer.tick(client.w3.eth.block_number) is None  # not due: checked this block
    # (Unchanged figures are not re-declared: test_declarer_reasons. Here the round-trip is
    # measured for real, and on a loaded machine it can move past the 1.5x / 5 ms bound.)
    meter.last_kibps, meter.last_at = 30_000, time.monotonic()
    mine(client, 5)
    assert declarer.tick(client.w3.eth.block_number).fetch_kibps == 30_000
    mine(client, WINDOW // 2)
    assert declarer.tick(client.w3.eth.block_number) is not None  # ageing
    assert sent == ["declareNetwork"] * 3
    meter.last_at = time.monotonic() - 3600  # no recent shard fetch: a probe block is timed
    mine(client, WINDOW // 2)
    probed = declarer.tick(client.w3.eth.block_number)
    assert probed is not None and probed.fetch_kibps > 0
    assert NetworkFigures.read(registry, worker.address)[0] == probed
    # The pool counts these figures for a job with network terms.
    pool = contracts.pool
    pool_terms = (1, 1024, 0, 0, ZERO, 1, MAX_RPC_RTT_MS)
    client.transact(pool.functions.joinPool(), worker)
    assert pool.functions.isEligible(worker.address, pool_terms, False).call()
