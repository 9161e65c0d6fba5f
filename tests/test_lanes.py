"""`make test`'s lanes (scripts/run_tests.py) run every test module exactly once, each lane
on an Anvil port nothing else holds, and a pytest run never uses a node it did not start."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from truetrain.chain.devnet import free_port, start_anvil

ROOT = Path(__file__).resolve().parent.parent


def _runner():
    spec = importlib.util.spec_from_file_location("run_tests", ROOT / "scripts" / "run_tests.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lanes_cover_every_test_module_exactly_once():
    runner = _runner()
    lanes = runner.modules(runner.LANES)
    placed = [m for lane in lanes for m in lane]
    every = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py"))
    assert sorted(placed) == every
    assert len(lanes) == len(runner.LANES) + 1  # the named lanes, then the rest


def test_every_path_a_lane_names_exists():
    runner = _runner()
    missing = [p for lane in runner.LANES for p in lane if not (ROOT / p).exists()]
    assert missing == []


def test_a_folder_leaves_modules_named_elsewhere_to_their_lane():
    runner = _runner()
    lanes = runner.modules([["tests/contracts"], ["tests/contracts/test_dispute_open.py"]])
    assert "tests/contracts/test_dispute_open.py" not in lanes[0]
    assert lanes[1] == ["tests/contracts/test_dispute_open.py"]


def test_lane_ports_pass_over_a_taken_port():
    runner = _runner()
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        ports = runner.free_ports(2, start=port)
        assert not runner.port_is_free(port)
        assert port < ports[0] < ports[1]
        # the first two free ones: every port passed over is taken, the two chosen are not
        assert [p for p in range(port, ports[1] + 1) if runner.port_is_free(p)] == ports
    assert runner.free_ports(1, start=port) == [port]


def _pytest_on_port(port: int) -> subprocess.CompletedProcess:
    """A plain pytest run (no runner) of one quick test, its Anvil port set to ``port``."""
    env = {k: v for k, v in os.environ.items() if k != "TT_CPU_LOG"} | {"TT_ANVIL_PORT": str(port)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
         "tests/test_lanes.py::test_every_path_a_lane_names_exists"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )


@pytest.fixture
def foreign_devnet():
    node = start_anvil(free_port())
    yield node
    node.stop()


def test_pytest_beside_a_devnet_on_its_port_stops_in_one_line_and_sends_it_nothing(foreign_devnet):
    result = _pytest_on_port(foreign_devnet.port)
    assert (result.stdout + result.stderr).splitlines() == [
        f"ERROR: port {foreign_devnet.port} is taken by another process: set TT_ANVIL_PORT to a free port", ""]
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    block = requests.post(foreign_devnet.url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber",
                                                    "params": []}, timeout=5).json()["result"]
    assert block == "0x0"  # brownie neither attached nor sent a transaction


def test_pytest_on_a_port_another_process_listens_on_stops_in_one_line():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = _pytest_on_port(port)
    assert (result.stdout + result.stderr).splitlines() == [
        f"ERROR: port {port} is taken by another process: set TT_ANVIL_PORT to a free port", ""]
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
