"""Fixtures that run real IPFS dev nodes (Helia, over HTTP) on free loopback ports.

Every node started here is stopped by pid at teardown, even when its test fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ipfs_nodes import client_for, free_port
from truetrain.storage import DevNode, StorageClient, start_devnode, stop_devnode


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
