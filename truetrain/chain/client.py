"""A small web3.py client: locally signed transactions and reverts decoded by error name.

Every JSON-RPC request goes through :class:`RetryingHTTPProvider`, which retries transient
failures (connection refused or dropped, timeouts, 429/5xx) with bounded exponential
backoff and jitter and raises :class:`RpcUnavailable` once they run out. Transactions get
their nonce from one :class:`~truetrain.chain.nonce.NonceManager` per key, gas from an
estimate times a buffer, and return after the configured number of confirmations.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from urllib.parse import urlparse

import requests
from eth_account import Account
from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.contract import Contract
from web3.exceptions import ContractCustomError, ContractLogicError, TransactionNotFound, Web3RPCError
from web3.types import RPCEndpoint

from truetrain.chain.artifacts import decode_error, load_artifact
from truetrain.chain.devnet import DEV_MNEMONIC
from truetrain.chain.nonce import NonceManager, NonceRegistry
from truetrain.chain.settings import ClientSettings
from truetrain.errors import ConfigError, ContractRevert, ReceiptTimeout, RpcUnavailable, TransactionRejected
from truetrain.retry import RetriesExhausted, RetryPolicy, call_with_retries

#: HTTP statuses a healthy node behind a proxy or rate limiter answers now and then.
_RETRYABLE_STATUS = {429, 502, 503, 504}
#: Substrings of node messages that mean "the nonce we used is behind the chain's".
_STALE_NONCE = ("nonce too low", "nonce has already been used", "already known", "already imported")
#: Seconds between calls of ``ChainClient.while_waiting`` during a receipt wait.
WAITING_CHECK_S = 5.0


def dev_account(index: int) -> LocalAccount:
    """Anvil's well-known devnet account ``index`` (its key is public; never use it off a devnet)."""
    Account.enable_unaudited_hdwallet_features()
    return Account.from_mnemonic(DEV_MNEMONIC, account_path=f"m/44'/60'/0'/0/{index}")


def dev_accounts(count: int = 10) -> list[LocalAccount]:
    """Anvil's well-known devnet accounts 0 .. count - 1."""
    return [dev_account(i) for i in range(count)]


def _revert_from(exc: Exception) -> ContractRevert:
    data = getattr(exc, "data", None)
    if isinstance(data, str) and data.startswith("0x"):
        name, args = decode_error(bytes.fromhex(data[2:]))
        return ContractRevert(name, args)
    return ContractRevert("Reverted", (), message=str(exc))


def is_loopback(url: str) -> bool:
    """True when ``url`` names this machine (localhost or a loopback address)."""
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_transient(error: BaseException) -> bool:
    """True for RPC transport failures that a retry may cure (the node restarting, a dropped socket)."""
    if isinstance(error, (requests.ConnectionError, requests.Timeout)):
        return True
    if isinstance(error, requests.HTTPError) and error.response is not None:
        return error.response.status_code in _RETRYABLE_STATUS
    return False


class RetryingHTTPProvider(Web3.HTTPProvider):
    """An HTTP provider that retries transient failures of every method with backoff and jitter.

    web3's own retry only covers an allowlist of read methods and has no jitter; ours also
    retries ``eth_sendRawTransaction`` (resending the same signed bytes is harmless, and
    :meth:`ChainClient._send_raw` recognises a transaction the node already has).
    """

    def __init__(self, url: str, settings: ClientSettings):
        # Two costs of every request that a daemon polling each block pays many times a
        # second (profiled: a quarter of a worker's CPU during a job): web3's validation
        # asks the node for its chain id before each call and transaction (a chain's id
        # does not change, so it is asked once), and requests reads the proxy settings from
        # the whole environment (no proxy applies to a node on this machine).
        session = None
        if is_loopback(url):
            session = requests.Session()
            session.trust_env = False
        super().__init__(url, request_kwargs={"timeout": settings.timeout_s}, session=session,
                         exception_retry_configuration=None, cache_allowed_requests=True,
                         cacheable_requests={RPCEndpoint("eth_chainId")})
        self.settings = settings
        self.retried = 0  # transient failures seen (for tests and metrics)

    def make_request(self, method, params):
        policy = RetryPolicy(self.settings.retries, self.settings.backoff_s, self.settings.backoff_max_s)

        def transient(exc: BaseException) -> bool:
            if is_transient(exc):
                self.retried += 1
                return True
            return False

        try:
            return call_with_retries(lambda: super(RetryingHTTPProvider, self).make_request(method, params),
                                     policy, is_retryable=transient)
        except RetriesExhausted as exhausted:
            raise RpcUnavailable(
                f"JSON-RPC node at {self.endpoint_uri} unavailable ({method}, "
                f"{exhausted.attempts} attempts): {type(exhausted.last).__name__}"
            ) from exhausted.last


@dataclass
class Receipt:
    """What a mined transaction cost and emitted."""

    tx_hash: str
    gas_used: int
    block_number: int
    raw: dict


class ChainClient:
    """Deploys and calls contracts over JSON-RPC, signing with local keys.

    ``ChainClient(url)`` keeps its old meaning; settings come from ``settings`` and/or
    keyword overrides of :class:`ClientSettings` fields, e.g. ``ChainClient(url,
    confirmations=2, gas_buffer=1.3)``; ``timeout`` is the old name of ``timeout_s``.
    """

    def __init__(self, rpc_url: str, settings: ClientSettings | None = None, *,
                 timeout: float | None = None, **overrides):
        known = {f.name for f in fields(ClientSettings)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ConfigError(f"unknown chain client setting(s): {', '.join(unknown)}")
        if timeout is not None:
            overrides["timeout_s"] = timeout
        self.settings = replace(settings or ClientSettings(), **overrides)
        self.rpc_url = rpc_url
        self.provider = RetryingHTTPProvider(rpc_url, self.settings)
        self.w3 = Web3(self.provider)
        self.nonces = NonceRegistry(lambda address: self.w3.eth.get_transaction_count(address, "pending"))
        #: Called every WAITING_CHECK_S while a sent transaction is not yet mined; it may raise
        #: to stop the wait (a daemon's look at whether the node is still its chain: a node that
        #: became another chain never mines it, and the wait would last receipt_timeout_s).
        self.while_waiting: Callable[[], None] | None = None
        try:
            self.w3.eth.chain_id
        except RpcUnavailable as exc:
            raise RpcUnavailable(f"no Ethereum JSON-RPC node answers at {rpc_url}") from exc

    @property
    def chain_id(self) -> int:
        return self.w3.eth.chain_id

    def nonce_manager(self, address: str) -> NonceManager:
        """The one nonce manager this client uses for ``address``."""
        return self.nonces(Web3.to_checksum_address(address))

    def contract(self, name: str, address: str) -> Contract:
        """A handle on the deployed contract ``name`` at ``address``."""
        return self.w3.eth.contract(address=Web3.to_checksum_address(address), abi=load_artifact(name).abi)

    def deploy(self, name: str, *args, sender: LocalAccount,
               libraries: dict[str, str] | None = None) -> tuple[Contract, Receipt]:
        """Deploy ``name`` with constructor ``args`` (linked with ``libraries``: name →
        address); return the handle and the receipt."""
        artifact = load_artifact(name, libraries=libraries or {})
        factory = self.w3.eth.contract(abi=artifact.abi, bytecode=artifact.bytecode)
        receipt = self._send(factory.constructor(*args), sender)
        address = receipt.raw["contractAddress"]
        return self.w3.eth.contract(address=address, abi=artifact.abi), receipt

    def transact(self, call, sender: LocalAccount, *, gas: int | None = None,
                 confirmations: int | None = None) -> Receipt:
        """Send ``call`` (a bound contract function) from ``sender``; return once mined and confirmed.

        A revert found by gas estimation raises :class:`ContractRevert` before anything is
        sent (no nonce used); ``gas`` skips the estimate; ``confirmations`` overrides the
        client's setting for this transaction.
        """
        return self._send(call, sender, gas=gas, confirmations=confirmations)

    def estimate(self, call, sender) -> int:
        """Gas ``call`` would use from ``sender`` now; a revert becomes :class:`ContractRevert`."""
        try:
            return int(call.estimate_gas({"from": sender.address}))
        except (ContractCustomError, ContractLogicError) as exc:
            raise _revert_from(exc) from None

    def call(self, call):
        """Run a view call; a revert becomes :class:`ContractRevert`."""
        try:
            return call.call()
        except (ContractCustomError, ContractLogicError) as exc:
            raise _revert_from(exc) from None

    # --- sending ----------------------------------------------------------------------

    def _send(self, call, sender: LocalAccount, *, gas: int | None = None,
              confirmations: int | None = None) -> Receipt:
        params = {"from": sender.address}
        try:
            if gas is None:
                gas = int(call.estimate_gas(params) * self.settings.gas_buffer)
            # A placeholder nonce keeps build_transaction from asking the node; the real one
            # is set under the nonce manager's lock just before signing.
            tx = call.build_transaction({**params, "gas": gas, "nonce": 0})
        except (ContractCustomError, ContractLogicError) as exc:
            raise _revert_from(exc) from None
        manager = self.nonce_manager(sender.address)
        for attempt in (1, 2):
            try:
                with manager.reserve() as nonce:
                    tx["nonce"] = nonce
                    tx_hash = self._send_raw(sender.sign_transaction(tx))
                break
            except TransactionRejected as exc:
                # Someone else used this key (or the cache is stale): resynced, try once more.
                if attempt == 2 or not any(s in str(exc).lower() for s in _STALE_NONCE):
                    raise
        raw = self._wait(tx_hash, self.settings.confirmations if confirmations is None else confirmations, manager)
        if raw["status"] != 1:
            raise self._mined_revert(tx, raw)
        return Receipt("0x" + tx_hash.hex().removeprefix("0x"), raw["gasUsed"], raw["blockNumber"], raw)

    def _send_raw(self, signed) -> bytes:
        """Hand ``signed`` to the node; a node that already has it counts as success."""
        try:
            return bytes(self.w3.eth.send_raw_transaction(signed.raw_transaction))
        except RpcUnavailable:
            if self._known(signed.hash):  # reached the node before the connection dropped
                return bytes(signed.hash)
            raise
        except Web3RPCError as exc:
            # A retried send whose first answer was lost comes back "already known" or
            # "nonce too low" although the transaction is in: look it up by its hash.
            if self._known(signed.hash):
                return bytes(signed.hash)
            message = exc.rpc_response.get("error", {}).get("message") if exc.rpc_response else str(exc)
            raise TransactionRejected(f"node refused transaction: {message}") from None

    def _known(self, tx_hash) -> bool:
        try:
            self.w3.eth.get_transaction(tx_hash)
            return True
        except TransactionNotFound:
            return False

    def _wait(self, tx_hash: bytes, confirmations: int, manager: NonceManager) -> dict:
        """Poll for the receipt, then until ``confirmations`` blocks sit on top of its block.

        The receipt is read again after the wait: if a reorg moved the transaction, the
        confirmations count from its new block.
        """
        deadline = time.monotonic() + self.settings.receipt_timeout_s
        look_at = time.monotonic() + WAITING_CHECK_S
        while True:
            try:
                raw = dict(self.w3.eth.get_transaction_receipt(tx_hash))
                if raw.get("blockNumber") is not None:
                    if self.w3.eth.block_number >= raw["blockNumber"] + confirmations:
                        again = dict(self.w3.eth.get_transaction_receipt(tx_hash))
                        if again.get("blockHash") == raw["blockHash"]:
                            return raw
            except TransactionNotFound:
                pass
            if time.monotonic() >= deadline:
                manager.resync()  # the transaction may be gone (devnet restart): ask the node next time
                raise ReceiptTimeout(
                    f"transaction 0x{tx_hash.hex()} not mined with {confirmations} confirmation(s) "
                    f"within {self.settings.receipt_timeout_s:g} s"
                )
            if self.while_waiting is not None and time.monotonic() >= look_at:
                look_at = time.monotonic() + WAITING_CHECK_S
                try:
                    self.while_waiting()
                except BaseException:
                    manager.resync()  # the transaction may never be mined: ask the node next time
                    raise
            time.sleep(self.settings.poll_s)

    def _mined_revert(self, tx: dict, raw: dict) -> ContractRevert:
        """Decode why a mined transaction reverted by replaying it on its parent block.

        The replay misses transactions earlier in the same block, so a revert that only
        they caused shows up as plain ``Reverted``.
        """
        hash_hex = "0x" + bytes(raw["transactionHash"]).hex()
        if tx.get("to"):
            replay = {"from": tx["from"], "to": tx["to"], "data": tx.get("data", "0x"), "gas": tx["gas"]}
            try:
                self.w3.eth.call(replay, block_identifier=raw["blockNumber"] - 1)
            except (ContractCustomError, ContractLogicError) as exc:
                revert = _revert_from(exc)
                return ContractRevert(revert.error, revert.error_args,
                                      message=f"transaction {hash_hex} reverted: {revert}")
            except Web3RPCError as exc:
                # The node could not run it within its gas: the block took a costlier path
                # than the estimate (a pool weight that moved between the two, say).
                if "OutOfGas" in str(exc):
                    return ContractRevert("OutOfGas", (), message=f"transaction {hash_hex} ran out of its "
                                          f"{int(tx['gas']):,} gas")
                raise
        return ContractRevert("Reverted", (), message=f"transaction {hash_hex} reverted")
