"""Deployment files: ``deployments/<chain id>.json`` records what was deployed where.

A deployment is reused only when the chain id matches and every recorded address still
holds the code whose hash was recorded (a restarted devnet has none, so it is redeployed).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from web3 import Web3

from truetrain.errors import DeploymentError
from truetrain.paths import DEPLOYMENTS


@dataclass
class DeployedContract:
    name: str
    address: str
    codehash: str


@dataclass
class Deployment:
    chain_id: int
    block: int
    contracts: dict[str, DeployedContract] = field(default_factory=dict)

    def address(self, key: str) -> str:
        try:
            return self.contracts[key].address
        except KeyError:
            raise DeploymentError(f"deployment for chain {self.chain_id} has no {key}") from None

    def to_json(self) -> str:
        return json.dumps(
            {"chain_id": self.chain_id, "block": self.block,
             "contracts": {k: asdict(v) for k, v in self.contracts.items()}},
            indent=2, sort_keys=True,
        ) + "\n"


def deployment_path(chain_id: int, folder: Path = DEPLOYMENTS) -> Path:
    return folder / f"{chain_id}.json"


def read_deployment(chain_id: int, folder: Path = DEPLOYMENTS) -> Deployment:
    """Load the deployment of ``chain_id``; raise :class:`DeploymentError` when absent or malformed."""
    path = deployment_path(chain_id, folder)
    if not path.exists():
        raise DeploymentError(f"no deployment for chain {chain_id} ({path}): run scripts/deploy.py")
    try:
        data = json.loads(path.read_text())
        contracts = {k: DeployedContract(**v) for k, v in data["contracts"].items()}
        deployment = Deployment(int(data["chain_id"]), int(data["block"]), contracts)
    except (ValueError, KeyError, TypeError) as exc:
        raise DeploymentError(f"malformed deployment file {path}: {exc}") from None
    if deployment.chain_id != chain_id:
        raise DeploymentError(f"{path} is for chain {deployment.chain_id}, not {chain_id}")
    return deployment


def write_deployment(deployment: Deployment, folder: Path = DEPLOYMENTS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = deployment_path(deployment.chain_id, folder)
    path.write_text(deployment.to_json())
    return path


def codehash(w3: Web3, address: str) -> str:
    return "0x" + Web3.keccak(w3.eth.get_code(Web3.to_checksum_address(address))).hex().removeprefix("0x")


def is_live(w3: Web3, deployment: Deployment) -> bool:
    """True when every recorded contract still has its recorded code on this chain."""
    if w3.eth.chain_id != deployment.chain_id:
        return False
    return all(codehash(w3, c.address) == c.codehash for c in deployment.contracts.values())
