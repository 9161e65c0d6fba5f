"""What the client does when the node misbehaves (FaultyNode) or is not there at all."""

from __future__ import annotations

import time

import pytest

from truetrain.errors import ContentMismatch, ContentTooLarge, StorageTimeout, StorageUnavailable
from truetrain.hashing import keccak256
from truetrain.storage import StorageClient, StorageSettings

from tests.ipfs_nodes import free_port
from .faulty_node import Fault, FaultyNode

SOME_CID = "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o"
HELLO_HASH = keccak256(b"hello world\n")


def client_at(addr: str, sleeps: list[float] | None = None, **overrides: object) -> StorageClient:
    settings = StorageSettings(**{"api_addr": addr, "timeout_s": 5.0, "retries": 2, "backoff_s": 0.05, **overrides})
    return StorageClient(settings, sleep=(lambda s: (sleeps.append(s), time.sleep(s))) if sleeps is not None else time.sleep)


def test_nothing_listening_gives_storage_unavailable_after_bounded_retries():
    sleeps: list[float] = []
    client = client_at(f"/ip4/127.0.0.1/tcp/{free_port()}", sleeps, retries=3)
    with pytest.raises(StorageUnavailable, match="unreachable for version after 4 attempt\\(s\\)"):
        client.version()
    assert len(sleeps) == 3
    # exponential: each wait lies in [step/2, step] for step = 0.05, 0.1, 0.2
    for wait, step in zip(sleeps, (0.05, 0.1, 0.2)):
        assert step / 2 <= wait <= step


def test_dropped_connections_are_retried_until_the_node_answers():
    with FaultyNode(Fault.DROP_FIRST, drops=2) as node:
        assert client_at(node.api_addr, retries=2).version() == "0.30.0-faulty"
        assert node.requests == 3


def test_dropped_connections_beyond_the_retry_budget_give_storage_unavailable():
    with FaultyNode(Fault.DROP_FIRST, drops=5) as node:
        with pytest.raises(StorageUnavailable, match="after 2 attempt"):
            client_at(node.api_addr, retries=1).version()
        assert node.requests == 2


def test_a_busy_node_is_retried_then_reported_unavailable():
    with FaultyNode(Fault.BUSY) as node:
        with pytest.raises(StorageUnavailable, match="dev node is starting"):
            client_at(node.api_addr, retries=2).fetch(SOME_CID, HELLO_HASH, max_size=100)
        assert node.requests == 3


def test_a_lying_node_is_caught_by_the_hash_check():
    with FaultyNode(Fault.LIE) as node:
        with pytest.raises(ContentMismatch):
            client_at(node.api_addr).fetch(SOME_CID, HELLO_HASH, max_size=100)


def test_a_node_that_ignores_length_is_cut_off_at_max_size():
    with FaultyNode(Fault.ENDLESS) as node:
        with pytest.raises(ContentTooLarge):
            client_at(node.api_addr).fetch(SOME_CID, HELLO_HASH, max_size=200_000)


def test_a_stalled_stream_gives_storage_timeout():
    with FaultyNode(Fault.STALL) as node:
        started = time.monotonic()
        with pytest.raises(StorageTimeout):
            client_at(node.api_addr).fetch(SOME_CID, HELLO_HASH, max_size=100, timeout=0.5)
        assert time.monotonic() - started < 3
