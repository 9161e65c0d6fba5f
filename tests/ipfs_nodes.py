"""Real IPFS dev nodes (Helia, over HTTP) on free loopback ports, for any test folder.

Every node started through the ``start_node`` fixture is stopped by pid at teardown,
even when its test fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from truetrain.chain.devnet import free_port
from truetrain.storage import DevNode, StorageClient, StorageSettings, start_devnode, stop_devnode


def client_for(node: DevNode, **overrides: object) -> StorageClient:
    settings = {"api_addr": node.api_addr, "timeout_s": 10.0, "retries": 2, "backoff_s": 0.05, **overrides}
    return StorageClient(StorageSettings(**settings))  # type: ignore[arg-type]


StartNode = Callable[..., DevNode]


@pytest.fixture
def start_node(tmp_path: Path) -> Iterator[StartNode]:
    """Start dev nodes for one test: ``start_node("a")`` puts repo "a" under tmp_path."""
    started: list[int] = []

    def start(name: str = "node", *, api_port: int | None = None, repo: Path | None = None) -> DevNode:
        node = start_devnode(repo or tmp_path / name, api_port or free_port())
        started.append(node.pid)
        return node

    yield start
    for pid in started:
        stop_devnode(pid)


