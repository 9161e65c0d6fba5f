"""The `truetrain` command tree: every command has help, `--help` is cheap, a broken role
module breaks only its own command."""

from __future__ import annotations

import subprocess
import sys

import click
from click.testing import CliRunner

from truetrain import cli
from truetrain.cli import main

GROUPS = ["challenge", "demo", "devnet", "explorer", "identity", "job", "token", "verifier", "worker"]
COMMANDS = {
    "job": {"submit", "status", "list", "cancel", "results", "sample", "export"},
    "identity": {"register", "show"},
    "token": {"balance", "faucet", "withdraw"},
    "worker": {"stake", "unstake", "status"},
}


def walk(command: click.Command, path: list[str]):
    """Yield (path, command) for ``command`` and everything under it, importing lazy groups."""
    yield path, command
    if isinstance(command, click.Group):
        ctx = click.Context(command, info_name=path[-1])
        for name in command.list_commands(ctx):
            yield from walk(command.get_command(ctx, name), path + [name])


def test_every_command_and_group_has_help_text():
    seen = {}
    for path, command in walk(main, ["truetrain"]):
        assert command is not None, " ".join(path)
        assert command.help and command.help.strip(), f"{' '.join(path)} has no help text"
        assert not command.help.startswith("(unavailable"), f"{' '.join(path)}: {command.help}"
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert param.help, f"{' '.join(path)} {param.opts[0]} has no help text"
        seen[tuple(path[1:])] = command
    for group, names in COMMANDS.items():
        assert {p[1] for p in seen if len(p) == 2 and p[0] == group} >= names


def test_truetrain_help_lists_the_groups():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    listed = [line.split()[0] for line in result.output.split("Commands:")[1].splitlines() if line.startswith("  ")
              and not line.startswith("   ")]
    assert listed == GROUPS


def test_truetrain_help_imports_no_role_module():
    code = ("import sys; from click.testing import CliRunner; from truetrain.cli import main; "
            "assert CliRunner().invoke(main, ['--help']).exit_code == 0; "
            "print(sorted(m for m in ('torch', 'web3', 'submitter.cli', 'worker.cli', 'verifier.cli') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_module_that_does_not_import_breaks_only_its_command(monkeypatch):
    monkeypatch.setitem(cli.LAZY_COMMANDS, "broken", ("no_such_module.cli:broken", "A group whose module is missing."))
    runner = CliRunner()
    listed = runner.invoke(main, ["--help"])
    assert listed.exit_code == 0 and "A group whose module is missing." in listed.output
    result = runner.invoke(main, ["broken", "anything"])
    assert result.exit_code == 1
    assert result.stderr.strip() == ("error: `truetrain broken` is unavailable: cannot import no_such_module.cli:broken: "
                                     "ModuleNotFoundError: No module named 'no_such_module'")
    assert runner.invoke(main, ["job", "--help"]).exit_code == 0


def test_unknown_command_is_a_usage_error():
    result = CliRunner().invoke(main, ["jobs"])
    assert result.exit_code == 2
    assert "No such command 'jobs'" in result.stderr
