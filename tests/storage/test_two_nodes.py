"""Two dev nodes on loopback exchange blocks over bitswap once connected."""

from __future__ import annotations

import os

from truetrain.storage import stop_devnode

from tests.ipfs_nodes import client_for


def test_content_added_on_a_is_fetched_on_b_after_connect(start_node):
    a, b = start_node("a"), start_node("b")
    data = os.urandom(1 << 20)
    with client_for(a) as on_a, client_for(b) as on_b:
        stored = on_a.add_bytes(data)
        on_b.connect(a.swarm_addr)
        assert a.peer_id in {peer.peer_id for peer in on_b.peers()}
        assert b.peer_id in {peer.peer_id for peer in on_a.peers()}
        assert on_b.fetch(stored.cid, stored.hash, max_size=len(data), timeout=10) == data


def test_pin_on_b_fetches_from_a_and_outlives_a(start_node):
    a, b = start_node("a"), start_node("b")
    with client_for(a) as on_a, client_for(b) as on_b:
        stored = on_a.add_bytes(b"replicate me " * 50_000)
        on_b.connect(a.swarm_addr)
        on_b.pin(stored.cid)
        assert stored.cid in on_b.pins()
        stop_devnode(a.pid)
        assert on_b.fetch(stored.cid, stored.hash, max_size=stored.size, timeout=5) == b"replicate me " * 50_000
