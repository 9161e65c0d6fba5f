"""The ``truetrain`` command: one click group that mounts the roles' commands.

Errors the project raises on purpose (:class:`TruetrainError`) become one line on stderr
and a non-zero exit code, never a traceback; so do a command's usage errors (a bad flag or
argument), which exit 2. The roles' groups are mounted by import path
and imported only when named, so ``truetrain --help`` stays fast (no torch, no web3) and
a role whose module fails to import breaks only its own command.
"""

from __future__ import annotations

import importlib
import json
import sys

import click

from truetrain import __version__
from truetrain.errors import TruetrainError


class TruetrainGroup(click.Group):
    """A click group that prints project errors as one line and exits with their code."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except TruetrainError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.NoArgsIsHelpError:
            raise  # a group named alone prints its help
        except click.UsageError as exc:
            # A bad flag or argument of a command is one line too (click would add its usage
            # and a "Try --help" line); exit code 2 as click's.
            click.echo(f"Error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)


#: Mounted groups: name → ("module:attribute", the one-line help `truetrain --help` shows).
LAZY_COMMANDS = {
    "job": ("submitter.cli:job", "Submit training jobs, follow them, cancel them, fetch their results."),
    "identity": ("submitter.cli:identity", "Register and inspect participant identities."),
    "token": ("submitter.cli:token", "TRAIN balances and the devnet faucet."),
    "worker": ("worker.cli:worker", "Stake, unstake, inspect and run a worker."),
    "verifier": ("verifier.cli:verifier", "Run the verifier daemon."),
    "demo": ("truetrain.demo_cli:demo", "Run one job's whole life on a local devnet."),
    "challenge": ("submitter.challenge:challenge", "Challenge a revealed result: replay it, bond, open a dispute game."),
    "explorer": ("truetrain.explorer.cli:explorer", "Serve the read-only web explorer (jobs, workers, disputes, token flows)."),
}


def _unavailable(name: str, target: str, error: BaseException) -> click.Command:
    """A stand-in for a group whose module does not import: it says why and exits 1."""

    def fail() -> None:
        raise TruetrainError(f"`truetrain {name}` is unavailable: cannot import {target}: "
                             f"{type(error).__name__}: {error}")

    return click.Command(name, callback=fail, help=f"(unavailable: cannot import {target}: {error})",
                         context_settings={"ignore_unknown_options": True, "allow_extra_args": True})


class LazyGroup(TruetrainGroup):
    """A :class:`TruetrainGroup` that imports the commands of :data:`LAZY_COMMANDS` on demand."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if command is not None or name not in LAZY_COMMANDS:
            return command
        target = LAZY_COMMANDS[name][0]
        module, _, attribute = target.partition(":")
        try:
            return getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError) as exc:
            return _unavailable(name, target, exc)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Help text of the lazy groups comes from LAZY_COMMANDS, so listing imports nothing.
        rows = []
        for name in self.list_commands(ctx):
            if name in LAZY_COMMANDS and name not in self.commands:
                rows.append((name, LAZY_COMMANDS[name][1]))
            else:
                rows.append((name, self.commands[name].get_short_help_str(formatter.width)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="truetrain")
def main() -> None:
    """truetrain: an open market for ML training compute whose rules live in smart contracts."""


@main.group()
def devnet() -> None:
    """Start, stop and inspect the local Anvil devnet."""


def _emit(payload: dict, as_json: bool, human: str) -> None:
    click.echo(json.dumps(payload) if as_json else human)


@devnet.command("up")
@click.option("--port", type=click.IntRange(0, 65535), default=8545, show_default=True,
              help="Anvil RPC port on 127.0.0.1 (0: a free one).")
@click.option("--ipfs-port", type=click.IntRange(0, 65535), default=5001, show_default=True,
              help="IPFS dev node API port on 127.0.0.1 (0: a free one).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def devnet_up(port: int, ipfs_port: int, as_json: bool) -> None:
    """Start Anvil and an IPFS dev node, deploy the contracts, fund the dev accounts once (idempotent)."""
    from truetrain.devnet import FUND_WEI, devnet_up as up

    state = up(port, ipfs_port)
    anvil, ipfs = state["anvil"], state["ipfs"]
    human = (f"devnet up: chain {anvil['url']} (pid {anvil['pid']}, chain id {anvil['chain_id']}), "
             f"IPFS {ipfs['url']} (pid {ipfs['pid']}); JobMarket at {state['contracts']['market']}; "
             + (f"{len(state['funded'])} accounts funded with {FUND_WEI // 10**18:,} TRAIN each" if state["funded"]
                else "dev accounts funded before (not again)"))
    _emit(state, as_json, human)


@devnet.command("down")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def devnet_down(as_json: bool) -> None:
    """Stop the Anvil and IPFS node started by `devnet up` (and the explorer `make demo` started)."""
    from truetrain.devnet import devnet_down as down

    state = down()
    stopped = [f"{name} pid {part['pid']}" for name, part in state.items() if part]
    _emit(state, as_json, f"devnet down ({', '.join(stopped)} stopped)")


@devnet.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def devnet_status(as_json: bool) -> None:
    """Say whether the devnet is running and at which block."""
    from truetrain.devnet import devnet_status as status

    state = status()
    human = (
        f"devnet running: chain {state['anvil']['url']} at block {state['block']}, IPFS {state['ipfs']['url']}"
        + (f", explorer {state['explorer']['url']}" if state.get("explorer") else "")
        if state["running"] else "devnet not running"
    )
    _emit(state, as_json, human)
    if not state["running"]:
        sys.exit(3)
