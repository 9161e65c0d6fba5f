"""Fixtures shared by every test folder."""

from tests.ipfs_nodes import start_node  # noqa: F401  (fixture)
