"""Web3 handles on the deployed contracts, checked against ``deployments/<chain id>.json``.

:func:`connect_deployment` refuses to hand out a single handle unless the node's chain id
has a deployment file and every recorded address still holds the code whose hash was
recorded: a daemon pointed at the wrong chain, or at a devnet that restarted and lost its
contracts, stops with :class:`DeploymentError` instead of reading nothing forever.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from web3 import Web3
from web3.contract import Contract

from truetrain.chain.artifacts import load_artifact
from truetrain.chain.client import ChainClient
from truetrain.chain.deployment import Deployment, codehash, deployment_path, read_deployment
from truetrain.errors import DeploymentError
from truetrain.paths import BUILD_CONTRACTS, DEPLOYMENTS


class Contracts(Mapping):
    """The deployed contracts by key (``contracts.token`` or ``contracts["token"]``).

    Keys and contract names come from the deployment file; ``client`` sends transactions
    and ``deployment`` is what the file recorded.
    """

    def __init__(self, client: ChainClient, deployment: Deployment, handles: dict[str, Contract]):
        self.client = client
        self.deployment = deployment
        self._handles = handles

    def __getitem__(self, key: str) -> Contract:
        try:
            return self._handles[key]
        except KeyError:
            known = ", ".join(sorted(self._handles)) or "none"
            raise DeploymentError(
                f"deployment for chain {self.deployment.chain_id} has no contract {key!r} (has: {known})"
            ) from None

    def __getattr__(self, key: str) -> Contract:
        if key.startswith("_"):
            raise AttributeError(key)
        return self[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._handles)

    def __len__(self) -> int:
        return len(self._handles)

    @property
    def w3(self):
        return self.client.w3

    def verify(self) -> None:
        """Check again that the chain still holds the recorded code (call it after an RPC outage)."""
        check_deployment(self.client, self.deployment)


def check_deployment(client: ChainClient, deployment: Deployment, path: Path | None = None) -> None:
    """Raise :class:`DeploymentError` unless the node runs ``deployment``'s chain and code."""
    where = f"{path}" if path else f"deployment of chain {deployment.chain_id}"
    chain_id = client.chain_id
    if chain_id != deployment.chain_id:
        raise DeploymentError(
            f"{where} is for chain {deployment.chain_id}, but the node at {client.rpc_url} is chain {chain_id}"
        )
    for key, recorded in sorted(deployment.contracts.items()):
        actual = codehash(client.w3, recorded.address)
        if actual == recorded.codehash:
            continue
        if len(client.w3.eth.get_code(Web3.to_checksum_address(recorded.address))) == 0:
            raise DeploymentError(
                f"{where}: no code at {recorded.address} ({key}: {recorded.name}); the chain was "
                f"reset or never had this deployment: run scripts/deploy.py"
            )
        raise DeploymentError(
            f"{where}: code at {recorded.address} ({key}: {recorded.name}) has hash {actual}, "
            f"but {recorded.codehash} was recorded: run scripts/deploy.py"
        )


def connect_deployment(rpc_url: str | ChainClient, folder: Path = DEPLOYMENTS, *,
                       build_dir: Path = BUILD_CONTRACTS, **client_settings) -> Contracts:
    """Connect to the node, load its chain's deployment file, verify it, and return the handles.

    ``rpc_url`` may be a ready :class:`ChainClient`; otherwise one is made with
    ``client_settings`` (e.g. ``confirmations=2``).
    """
    client = rpc_url if isinstance(rpc_url, ChainClient) else ChainClient(rpc_url, **client_settings)
    chain_id = client.chain_id
    path = deployment_path(chain_id, folder)
    if not path.exists():
        others = sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []
        found = f" (found deployments for chain(s) {', '.join(others)})" if others else ""
        raise DeploymentError(
            f"no deployment for chain {chain_id} in {folder}{found}: the node at {client.rpc_url} "
            f"is not the chain those were made on; run scripts/deploy.py"
        )
    deployment = read_deployment(chain_id, folder)  # also refuses a file whose chain id disagrees
    check_deployment(client, deployment, path)
    handles = {
        key: client.w3.eth.contract(address=Web3.to_checksum_address(recorded.address), abi=load_artifact(recorded.name, build_dir).abi)
        for key, recorded in deployment.contracts.items()
    }
    return Contracts(client, deployment, handles)
