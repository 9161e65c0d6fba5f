"""What the explorer reads from: the deployed contracts (read-only) and the IPFS node.

The source holds no key and builds no transaction. Strings stored on chain are decoded
leniently (invalid UTF-8 becomes U+FFFD) because anyone can write them: a job or identity
with broken bytes must still render. Content that never changes once on chain (manifests,
result bundles, hardware profiles, a round's held-out metric) is cached by its hash.
"""

from __future__ import annotations

import threading
from pathlib import Path

from eth_abi import decoding, encoding
from eth_abi.codec import ABICodec
from eth_abi.registry import BaseEquals
from web3._utils.abi import build_strict_registry

from truetrain.chain.client import ChainClient
from truetrain.chain.handles import connect_deployment
from truetrain.errors import StorageError, TruetrainError
from truetrain.market import MarketReader
from truetrain.storage import StorageClient, StorageSettings

#: Largest profile or bundle the explorer fetches for display.
MAX_SMALL_OBJECT = 1024 * 1024


def wei(value: int) -> str:
    """A token amount as a decimal string: exact in JSON, also for JavaScript readers."""
    return str(int(value))


class LenientStringDecoder(decoding.StringDecoder):
    """ABI ``string`` decoder that replaces invalid UTF-8 instead of failing."""

    def __init__(self, handle_string_errors: str = "replace"):
        super().__init__(handle_string_errors=handle_string_errors)


def lenient_codec() -> ABICodec:
    registry = build_strict_registry()
    registry.unregister("string")
    registry.register(BaseEquals("string"), encoding.TextStringEncoder, LenientStringDecoder, label="string")
    return ABICodec(registry)


def _named(abi: dict, value):
    """``value`` decoded by web3 for output ``abi``, with tuples turned into dicts (recursively)."""
    if abi["type"] == "tuple":
        return {c["name"]: _named(c, v) for c, v in zip(abi["components"], value)}
    if abi["type"] == "tuple[]":
        item = {**abi, "type": "tuple"}
        return [_named(item, v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    return value


class Source:
    """The contracts of the deployment in ``deployments`` on ``rpc_url`` and the IPFS node at ``ipfs_api``."""

    def __init__(self, rpc_url: str, ipfs_api: str, deployments: Path):
        # Few retries: a page that cannot be read should say so soon, not hang the browser's poll.
        client = ChainClient(rpc_url, timeout=10.0, retries=2)
        client.w3.codec = lenient_codec()
        self.contracts = connect_deployment(client, deployments)
        self.w3 = client.w3
        self.rpc_url, self.ipfs_api = rpc_url, ipfs_api
        self.store = StorageClient(StorageSettings(api_addr=ipfs_api, timeout_s=5.0, retries=1))
        self.reader = MarketReader(self.contracts, self.store)
        self._cache: dict[tuple, object] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self.store.close()

    def __getitem__(self, key: str):
        return self.contracts[key]

    def block(self) -> int:
        return self.w3.eth.block_number

    def call(self, contract: str, function: str, *args):
        """A view call whose struct outputs come back as dicts keyed by the ABI's field names."""
        handle = self.contracts[contract]
        abi = next(f for f in handle.abi if f.get("name") == function and f.get("type") == "function")
        value = getattr(handle.functions, function)(*args).call()
        outputs = abi["outputs"]
        if len(outputs) == 1:
            return _named(outputs[0], value)
        return tuple(_named(o, v) for o, v in zip(outputs, value))

    def logs(self, contract: str, event: str, **filters) -> list:
        """Every ``event`` of ``contract`` matching the indexed ``filters``, in chain order."""
        found = getattr(self.contracts[contract].events, event)().get_logs(
            from_block=0, argument_filters=filters or None)
        return sorted(found, key=lambda e: (e["blockNumber"], e["logIndex"]))

    def cached(self, key: tuple, compute):
        """``compute()`` once per ``key`` (for content addressed by a hash: it never changes);
        a None (content not available now) is not kept, so a later call tries again."""
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        value = compute()
        if value is not None:
            with self._lock:
                self._cache[key] = value
        return value

    def fetch_json(self, cid: str, expected_hash: bytes | None) -> dict | None:
        """A small JSON object from IPFS (checked against ``expected_hash`` when given); None
        when it cannot be fetched or parsed (the page says so instead of failing)."""
        import json

        def fetch():
            try:
                data = (self.store.fetch(cid, expected_hash, max_size=MAX_SMALL_OBJECT) if expected_hash
                        else self.store.fetch_unverified(cid, max_size=MAX_SMALL_OBJECT))
                value = json.loads(data)
            except (TruetrainError, ValueError):
                return None
            return value if isinstance(value, dict) else None

        return self.cached(("json", cid, expected_hash), fetch)

    def fetch_checkpoint(self, cid: str, expected_hash: bytes, max_size: int) -> bytes:
        """A checkpoint's bytes from IPFS, decoded and checked against its checkpoint hash
        ``expected_hash`` (raises StorageError)."""
        from truetrain.training.checkpoint import fetch_checkpoint

        return fetch_checkpoint(self.store, cid, expected_hash, max_size=max_size)


__all__ = ["Source", "StorageError", "lenient_codec"]
