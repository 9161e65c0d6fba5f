"""Deploy the truetrain contracts to an EVM chain and write ``deployments/<chain id>.json``.

    python scripts/deploy.py --rpc http://127.0.0.1:8545            # a devnet: Anvil's key 0
    python scripts/deploy.py --rpc URL --key-env DEPLOYER_KEY --live  # any chain, minting off

Running it twice against the same chain reuses what is there.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eth_account import Account  # noqa: E402

from truetrain.chain.client import ChainClient, dev_accounts  # noqa: E402
from truetrain.chain.deploy import StackParams, deploy_stack  # noqa: E402
from truetrain.chain.deployment import deployment_path  # noqa: E402
from truetrain.errors import ConfigError, TruetrainError  # noqa: E402


@click.command()
@click.option("--rpc", default="http://127.0.0.1:8545", show_default=True, help="JSON-RPC URL of the chain.")
@click.option("--key-env", default=None, help="Environment variable holding the deployer's private key "
              "(default: Anvil's well-known key 0, devnets only).")
@click.option("--live", is_flag=True, help="Not a devnet: the token can never be minted.")
def main(rpc: str, key_env: str | None, live: bool) -> None:
    """Deploy (or reuse) the contract stack and print what was done."""
    try:
        if key_env:
            if not os.environ.get(key_env):
                raise ConfigError(f"environment variable {key_env} is empty")
            deployer = Account.from_key(os.environ[key_env])
        elif live:
            raise ConfigError("--live needs --key-env: Anvil's public dev keys are for devnets only")
        else:
            deployer = dev_accounts(1)[0]
        client = ChainClient(rpc)
        report = deploy_stack(client, deployer, StackParams(devnet=not live))
    except TruetrainError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    for key in report.deployed + report.reused:
        contract = report.deployment.contracts[key]
        state = "deployed" if key in report.deployed else "reused"
        click.echo(f"{state:9} {contract.name:17} {contract.address}")
    for grant in report.granted:
        click.echo(f"granted   {grant}")
    click.echo(f"wrote {deployment_path(report.deployment.chain_id)}")


if __name__ == "__main__":
    main()
