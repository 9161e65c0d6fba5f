"""A small web3.py client: locally signed transactions and reverts decoded by error name."""

from __future__ import annotations

from dataclasses import dataclass

from eth_account import Account
from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.contract import Contract
from web3.exceptions import ContractCustomError, ContractLogicError

from truetrain.chain.artifacts import decode_error, load_artifact
from truetrain.chain.devnet import DEV_MNEMONIC
from truetrain.errors import ChainError, ContractRevert


def dev_accounts(count: int = 10) -> list[LocalAccount]:
    """Anvil's well-known devnet accounts (public keys; never use them off a devnet)."""
    Account.enable_unaudited_hdwallet_features()
    return [
        Account.from_mnemonic(DEV_MNEMONIC, account_path=f"m/44'/60'/0'/0/{i}") for i in range(count)
    ]


def _revert_from(exc: Exception) -> ContractRevert:
    data = getattr(exc, "data", None)
    if isinstance(data, str) and data.startswith("0x"):
        name, args = decode_error(bytes.fromhex(data[2:]))
        return ContractRevert(name, args)
    return ContractRevert("Reverted", (), message=str(exc))


@dataclass
class Receipt:
    """What a mined transaction cost and emitted."""

    tx_hash: str
    gas_used: int
    block_number: int
    raw: dict


class ChainClient:
    """Deploys and calls contracts over JSON-RPC, signing with local keys."""

    def __init__(self, rpc_url: str, *, timeout: float = 30.0):
        self.w3 = Web3(Web3.HTTPProvider(rpc_url, request_kwargs={"timeout": timeout}))
        if not self.w3.is_connected():
            raise ChainError(f"no Ethereum JSON-RPC node answers at {rpc_url}")

    @property
    def chain_id(self) -> int:
        return self.w3.eth.chain_id

    def contract(self, name: str, address: str) -> Contract:
        """A handle on the deployed contract ``name`` at ``address``."""
        return self.w3.eth.contract(address=Web3.to_checksum_address(address), abi=load_artifact(name).abi)

    def deploy(self, name: str, *args, sender: LocalAccount) -> tuple[Contract, Receipt]:
        """Deploy ``name`` with constructor ``args``; return the handle and the receipt."""
        artifact = load_artifact(name)
        factory = self.w3.eth.contract(abi=artifact.abi, bytecode=artifact.bytecode)
        receipt = self._send(factory.constructor(*args), sender)
        address = receipt.raw["contractAddress"]
        return self.w3.eth.contract(address=address, abi=artifact.abi), receipt

    def transact(self, call, sender: LocalAccount, *, gas: int | None = None) -> Receipt:
        """Send ``call`` (a bound contract function) from ``sender`` and wait for it to be mined."""
        return self._send(call, sender, gas=gas)

    def call(self, call):
        """Run a view call; a revert becomes :class:`ContractRevert`."""
        try:
            return call.call()
        except (ContractCustomError, ContractLogicError) as exc:
            raise _revert_from(exc) from None

    def _send(self, call, sender: LocalAccount, *, gas: int | None = None) -> Receipt:
        params = {"from": sender.address, "nonce": self.w3.eth.get_transaction_count(sender.address, "pending")}
        if gas is not None:
            params["gas"] = gas
        try:
            tx = call.build_transaction(params)  # estimates gas: a revert shows up here, unsent
        except (ContractCustomError, ContractLogicError) as exc:
            raise _revert_from(exc) from None
        signed = sender.sign_transaction(tx)
        tx_hash = self.w3.eth.send_raw_transaction(signed.raw_transaction)
        raw = dict(self.w3.eth.wait_for_transaction_receipt(tx_hash, timeout=60))
        if raw["status"] != 1:
            raise ContractRevert("Reverted", (), message=f"transaction {tx_hash.hex()} reverted")
        return Receipt("0x" + tx_hash.hex().removeprefix("0x"), raw["gasUsed"], raw["blockNumber"], raw)
