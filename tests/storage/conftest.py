"""Fixtures that run real IPFS dev nodes (Helia, over HTTP) on free loopback ports.

Every node started here is stopped by pid at teardown, even when its test fails.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from truetrain.storage import DevNode, StorageClient, StorageSettings, start_devnode, stop_devnode


def free_port() -> int:
    """A TCP port that was free a moment ago (the OS picks it; races are unlikely here)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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


@pytest.fixture(scope="module")
def shared_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevNode]:
    """One node for the tests of a module that do not care what else it holds."""
    node = start_devnode(tmp_path_factory.mktemp("shared-node"), free_port())
    yield node
    stop_devnode(node.pid)


@pytest.fixture
def client(shared_node: DevNode) -> Iterator[StorageClient]:
    with client_for(shared_node) as storage:
        yield storage


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # ipfshttpclient 0.7 passes urllib3 2.x a `strict` argument it only warns about; the
    # client silences that for production, pytest resets filters per test, so repeat it here.
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.filterwarnings("ignore:The 'strict' parameter:FutureWarning"))
