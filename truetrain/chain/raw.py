"""Raw JSON-RPC reads for the calls a daemon makes every block.

web3's ``eth.block_number`` and ``eth.get_block`` pass each request and reply through its
method formatters and middlewares: profiled on an idle verifier, the height alone took a
third of a tick (9 ms of 27 under the profiler), and a block's every field was formatted
to read its hash. These go to the provider directly (its retries still apply) and read
only what the caller needs."""

from __future__ import annotations

from web3 import Web3
from web3.exceptions import Web3RPCError


def request(w3: Web3, method: str, params: list):
    """The ``result`` of one JSON-RPC request; an error reply raises :class:`Web3RPCError`
    (as web3's own methods raise)."""
    reply = w3.provider.make_request(method, params)
    if "error" in reply:
        raise Web3RPCError(f"{method}({', '.join(map(str, params))}): {reply['error']}", rpc_response=reply)
    return reply.get("result")


def height(w3: Web3) -> int:
    """The chain's latest block number."""
    return int(request(w3, "eth_blockNumber", []), 16)


def block_hash(w3: Web3, block: int) -> str | None:
    """Block ``block``'s hash (0x-hex), or None when the chain has no such block."""
    found = request(w3, "eth_getBlockByNumber", [hex(block), False])
    return found["hash"] if found else None
