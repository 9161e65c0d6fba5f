"""`truetrain devnet up/status/down` against a real Anvil on a free port."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from truetrain.chain import devnet_state
from truetrain.chain.devnet import free_port, port_is_free
from truetrain.cli import main


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(devnet_state, "STATE_DIR", tmp_path)
    monkeypatch.setattr(devnet_state, "STATE_FILE", tmp_path / "anvil.json")
    yield tmp_path
    if (tmp_path / "anvil.json").exists():
        devnet_state.devnet_down()


def test_devnet_up_status_down_roundtrip(state_dir):
    runner = CliRunner()
    port = free_port()
    up = runner.invoke(main, ["devnet", "up", "--port", str(port), "--json"])
    assert up.exit_code == 0, up.output
    assert json.loads(up.output)["url"] == f"http://127.0.0.1:{port}"
    status = runner.invoke(main, ["devnet", "status", "--json"])
    assert status.exit_code == 0
    assert json.loads(status.output)["running"] is True
    again = runner.invoke(main, ["devnet", "up", "--port", str(port), "--json"])
    assert json.loads(again.output)["pid"] == json.loads(up.output)["pid"]  # idempotent
    down = runner.invoke(main, ["devnet", "down"])
    assert down.exit_code == 0
    assert port_is_free(port)
    assert runner.invoke(main, ["devnet", "status"]).exit_code == 3


def test_devnet_down_without_devnet_is_one_line_error(state_dir):
    result = CliRunner().invoke(main, ["devnet", "down"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == ["error: no devnet is running (start one with `truetrain devnet up`)"]


def test_devnet_up_on_taken_port_is_one_line_error(state_dir):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = CliRunner().invoke(main, ["devnet", "up", "--port", str(port)])
    assert result.exit_code == 1
    assert result.output.strip() == f"error: port {port} is already in use: stop what listens there or pick another port"


def test_every_command_has_help_text():
    def walk(group, path):
        for name, command in group.commands.items():
            assert command.help, f"{' '.join(path + [name])} has no help text"
            if hasattr(command, "commands"):
                walk(command, path + [name])

    walk(main, ["truetrain"])
