"""Notice when the node behind an RPC URL stops being the chain a process started on.

A daemon lives on one chain: its book, event cursor, identity and stake are there. The node
at its URL can turn into another chain under it (a devnet restarted with another chain id
or a new genesis block, a proxy switched to another network, a node restored from a
snapshot taken before the deployment), and then every call fails, or worse, reads another
chain's state. A :class:`ChainWatch` pins the chain when the process starts (chain id and
genesis block hash; the deployment file gives the code hash at each address) and compares
the node with it on demand.

It asks the node with its own plain requests: web3's provider caches the chain id for good
(a daemon would never see it change) and retries for seconds (a look should be quick). A
node that does not answer is not a changed chain, only an absent one: :meth:`difference`
raises :class:`RpcUnavailable` then, and the caller keeps its usual handling of an outage.
"""

from __future__ import annotations

from dataclasses import dataclass

import requests
from web3 import Web3

from truetrain.chain.client import is_loopback
from truetrain.chain.deployment import Deployment
from truetrain.errors import DeploymentError, RpcUnavailable
from truetrain.retry import RetriesExhausted, RetryPolicy, call_with_retries


@dataclass(frozen=True)
class ChainMark:
    """What tells one chain from another: its id and the hash of its block 0 (None when
    the node serves no block 0)."""

    chain_id: int
    genesis: str | None

    def __str__(self) -> str:
        return f"chain {self.chain_id} genesis {self.genesis or 'unknown'}"


class ChainWatch:
    """Compares the node at ``rpc_url`` with the chain pinned by :meth:`pin` and the code
    ``deployment`` recorded."""

    def __init__(self, rpc_url: str, deployment: Deployment, *, timeout_s: float = 5.0):
        self.rpc_url = rpc_url
        self.deployment = deployment
        self.timeout_s = timeout_s
        self.session = requests.Session()
        self.session.trust_env = not is_loopback(rpc_url)  # as the client: no proxy for a local node
        self.expected: ChainMark | None = None
        self.looks = 0  # how many times the node was compared (tests and metrics)

    def close(self) -> None:
        self.session.close()

    def _ask(self, method: str, params: list):
        """One JSON-RPC request, no retries; :class:`RpcUnavailable` when it gets no answer."""
        try:
            reply = self.session.post(self.rpc_url, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                          "params": params}, timeout=self.timeout_s)
            body = reply.json()
        except (requests.RequestException, ValueError) as exc:
            raise RpcUnavailable(f"JSON-RPC node at {self.rpc_url} unavailable ({method}): "
                                 f"{type(exc).__name__}") from None
        if not isinstance(body, dict) or "result" not in body:
            raise RpcUnavailable(f"JSON-RPC node at {self.rpc_url} gave no answer to {method}: "
                                 f"{body.get('error') if isinstance(body, dict) else body!r}")
        return body["result"]

    def mark(self) -> ChainMark:
        """The node's chain id and genesis hash now."""
        chain_id = self._ask("eth_chainId", [])
        block = self._ask("eth_getBlockByNumber", ["0x0", False])
        try:
            return ChainMark(int(chain_id, 16), block["hash"].lower() if block else None)
        except (TypeError, ValueError, KeyError, AttributeError):
            raise RpcUnavailable(f"JSON-RPC node at {self.rpc_url} gave an unreadable chain id or genesis block: "
                                 f"{chain_id!r}, {block!r}") from None

    def pin(self, retries: int = 0) -> ChainMark:
        """Take the node's chain as the one to stay on; it must be the deployment's chain.
        ``retries``: a call that got no answer (a dropped request) is tried again that many
        more times, after a short, growing wait, before :class:`RpcUnavailable` stands."""
        try:
            mark = call_with_retries(self.mark, RetryPolicy(retries=retries, base_s=0.25, max_s=2.0),
                                     is_retryable=lambda exc: isinstance(exc, RpcUnavailable))
        except RetriesExhausted as exc:
            raise exc.last from None
        if mark.chain_id != self.deployment.chain_id:
            raise DeploymentError(f"the deployment is for chain {self.deployment.chain_id}, but the node at "
                                  f"{self.rpc_url} is chain {mark.chain_id}")
        self.expected = mark
        return mark

    def difference(self) -> str | None:
        """How the node differs from the pinned chain, in one sentence; None when it is the
        same chain with the deployment's code at every address. Raises
        :class:`RpcUnavailable` when the node does not answer (that tells nothing)."""
        if self.expected is None:
            raise RuntimeError("ChainWatch.difference before pin")
        self.looks += 1
        mark = self.mark()
        if mark != self.expected:
            return f"expected {self.expected}, but the node at {self.rpc_url} now reports {mark}"
        for key, recorded in sorted(self.deployment.contracts.items()):
            code = self._ask("eth_getCode", [recorded.address, "latest"])
            if not isinstance(code, str) or not code.startswith("0x"):
                raise RpcUnavailable(f"JSON-RPC node at {self.rpc_url} gave unreadable code for "
                                     f"{recorded.address}: {code!r}")
            if Web3.keccak(hexstr=code).hex().removeprefix("0x") == recorded.codehash.removeprefix("0x"):
                continue
            found = "no code" if code in ("0x", "") else "other code"
            return (f"the node at {self.rpc_url} ({mark}) has {found} at {recorded.address} "
                    f"({key}: {recorded.name}), where the deployment recorded code {recorded.codehash}")
        return None
