"""Deploy the truetrain contracts to an EVM chain and write ``deployments/<chain id>.json``.

    python scripts/deploy.py --rpc http://127.0.0.1:8545            # a devnet: Anvil's key 0
    python scripts/deploy.py --rpc URL --key-env DEPLOYER_KEY --live --distribution holders.json
                                                                     # any chain: fixed supply, 2-day timelock

Running it twice against the same chain reuses what is there.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eth_account import Account  # noqa: E402
from web3 import Web3  # noqa: E402

from truetrain.chain.client import ChainClient, dev_accounts  # noqa: E402
from truetrain.chain.deploy import StackParams, deploy_stack  # noqa: E402
from truetrain.chain.deployment import deployment_path  # noqa: E402
from truetrain.errors import ConfigError, TruetrainError  # noqa: E402


#: Two days: a staker sees a parameter change coming and can leave before it applies.
LIVE_TIMELOCK_DELAY = 2 * 24 * 3600


def read_distribution(path: str) -> tuple[tuple[str, int], ...]:
    """The initial distribution from a JSON object {address: whole tokens}."""
    try:
        data = json.loads(Path(path).read_text())
        holders = tuple((Web3.to_checksum_address(a), int(v) * 10**18) for a, v in data.items())
    except (ValueError, AttributeError, TypeError) as exc:
        raise ConfigError(f"{path}: not a JSON object of address to whole tokens ({exc})") from None
    if any(v <= 0 for _, v in holders):
        raise ConfigError(f"{path}: every amount must be a positive number of tokens")
    return holders


@click.command()
@click.option("--rpc", default="http://127.0.0.1:8545", show_default=True, help="JSON-RPC URL of the chain.")
@click.option("--key-env", default=None, help="Environment variable holding the deployer's private key "
              "(default: Anvil's well-known key 0, devnets only).")
@click.option("--live", is_flag=True, help="Not a devnet: the token can never be minted; needs --distribution.")
@click.option("--distribution", type=click.Path(exists=True, dir_okay=False), default=None,
              help="JSON file {address: whole TRAIN} of the token's initial distribution (docs/token.md).")
@click.option("--timelock-delay", type=click.IntRange(min=0), default=None,
              help="Seconds a parameter change waits in the timelock [default: 0 on a devnet, 172800 live].")
def main(rpc: str, key_env: str | None, live: bool, distribution: str | None, timelock_delay: int | None) -> None:
    """Deploy (or reuse) the contract stack, wire it once, seal it and print what was done."""
    try:
        if key_env:
            if not os.environ.get(key_env):
                raise ConfigError(f"environment variable {key_env} is empty")
            deployer = Account.from_key(os.environ[key_env])
        elif live:
            raise ConfigError("--live needs --key-env: Anvil's public dev keys are for devnets only")
        else:
            deployer = dev_accounts(1)[0]
        holders = read_distribution(distribution) if distribution else ()
        if live and not holders:
            raise ConfigError("--live needs --distribution: a live token can never mint, so its supply is that list")
        delay = timelock_delay if timelock_delay is not None else (LIVE_TIMELOCK_DELAY if live else 0)
        client = ChainClient(rpc)
        report = deploy_stack(client, deployer, StackParams(devnet=not live, distribution=holders,
                                                            timelock_delay_seconds=delay))
    except TruetrainError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    for key in report.deployed + report.reused:
        contract = report.deployment.contracts[key]
        state = "deployed" if key in report.deployed else "reused"
        click.echo(f"{state:9} {contract.name:17} {contract.address}")
    for grant in report.granted:
        click.echo(f"granted   {grant}")
    for power in report.sealed:
        click.echo(f"renounced {power}")
    click.echo(f"wrote {deployment_path(report.deployment.chain_id)}")


if __name__ == "__main__":
    main()
