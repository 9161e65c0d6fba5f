"""connect_deployment refuses a deployment file that does not match the chain."""

from __future__ import annotations

from pathlib import Path

import pytest

from truetrain.chain.deployment import DeployedContract, Deployment, codehash, write_deployment
from truetrain.chain.handles import connect_deployment
from truetrain.errors import DeploymentError

WRONG_HASH = "0x" + "ab" * 32


def record(folder: Path, chain_id: int, address: str, code_hash: str) -> Path:
    deployment = Deployment(chain_id, 0, {"token": DeployedContract("TrainToken", address, code_hash)})
    return write_deployment(deployment, folder)


def test_connectDeployment_matchingFile_givesHandlesByAttributeAndKey(client, token, tmp_path):
    record(tmp_path, 31337, token.address, codehash(client.w3, token.address))
    contracts = connect_deployment(client.rpc_url, tmp_path)
    assert list(contracts) == ["token"]
    assert contracts.token.address == token.address
    assert contracts["token"].functions.symbol().call() == "TRAIN"
    contracts.verify()
    with pytest.raises(DeploymentError, match=r"^deployment for chain 31337 has no contract 'market' \(has: token\)$"):
        contracts.market


def test_connectDeployment_onlyAnotherChainsFile_refuses(client, token, tmp_path):
    record(tmp_path, 1, token.address, codehash(client.w3, token.address))
    with pytest.raises(DeploymentError) as caught:
        connect_deployment(client.rpc_url, tmp_path)
    assert str(caught.value) == (
        f"no deployment for chain 31337 in {tmp_path} (found deployments for chain(s) 1): "
        f"the node at {client.rpc_url} is not the chain those were made on; run scripts/deploy.py"
    )


def test_connectDeployment_fileRecordingAnotherChainId_refuses(client, token, tmp_path):
    path = record(tmp_path, 1, token.address, codehash(client.w3, token.address))
    path.rename(tmp_path / "31337.json")
    with pytest.raises(DeploymentError) as caught:
        connect_deployment(client.rpc_url, tmp_path)
    assert str(caught.value) == f"{tmp_path / '31337.json'} is for chain 1, not 31337"


def test_connectDeployment_codeHashDiffers_refuses(client, token, tmp_path):
    path = record(tmp_path, 31337, token.address, WRONG_HASH)
    actual = codehash(client.w3, token.address)
    with pytest.raises(DeploymentError) as caught:
        connect_deployment(client.rpc_url, tmp_path)
    assert str(caught.value) == (
        f"{path}: code at {token.address} (token: TrainToken) has hash {actual}, "
        f"but {WRONG_HASH} was recorded: run scripts/deploy.py"
    )


def test_connectDeployment_noCodeAtAddress_refuses(client, tmp_path):
    empty = "0x000000000000000000000000000000000000dEaD"
    path = record(tmp_path, 31337, empty, WRONG_HASH)
    with pytest.raises(DeploymentError) as caught:
        connect_deployment(client, tmp_path)
    assert str(caught.value) == (
        f"{path}: no code at {empty} (token: TrainToken); the chain was reset or never had this "
        f"deployment: run scripts/deploy.py"
    )
