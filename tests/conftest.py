"""Fixtures shared by every test folder, and the CPU log of `make test`'s lanes."""

import os

import pytest

from tests.ipfs_nodes import start_node  # noqa: F401  (fixture)

#: `scripts/run_tests.py` names a file per lane: each test appends the CPU seconds it took,
#: its own and its finished child processes' (devnets, daemons, IPFS nodes), with its id. A
#: module's fixtures are torn down in its last test, so that test carries their daemons.
CPU_LOG = os.environ.get("TT_CPU_LOG")

# transformers (the export tests load GPT-2 folders with it) never asks the Hub: what a test
# loads is a folder it wrote.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


if CPU_LOG:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        before = _cpu_seconds()
        yield
        with open(CPU_LOG, "a") as sink:
            sink.write(f"{_cpu_seconds() - before:.2f}\t{item.nodeid}\n")
