"""Where a command or daemon is told to connect, checked before it connects.

A malformed JSON-RPC URL or IPFS API multiaddr is refused in one line that names where it
came from (a flag, an environment variable, a settings key). Both are parsed by the very
code the clients use (requests for web3's HTTP provider, ipfshttpclient for the IPFS
client), so a value accepted here reaches the connect step and can fail there only as
"nothing answers".
"""

from __future__ import annotations

from truetrain.errors import ConfigError

EXAMPLE_RPC = "http://127.0.0.1:8545"
EXAMPLE_IPFS = "/ip4/127.0.0.1/tcp/5001"


def rpc_url_problem(url) -> str | None:
    """Why ``url`` is not an http(s) JSON-RPC URL, or None when it is one."""
    import requests

    if not isinstance(url, str) or not url:
        return "it is empty"
    if url != url.strip() or any(c.isspace() for c in url):
        return "it holds whitespace"
    if not url.lower().startswith(("http://", "https://")):
        return "it does not start with http:// or https://"
    try:
        requests.models.PreparedRequest().prepare_url(url, None)
    except (requests.exceptions.RequestException, ValueError) as exc:
        return str(exc)
    return None


def check_rpc_url(url, source: str) -> str:
    """Return ``url``, or raise :class:`ConfigError` naming ``source`` (``--rpc``, a variable)."""
    problem = rpc_url_problem(url)
    if problem is not None:
        raise ConfigError(f"{source} {url!r} is not an http(s) JSON-RPC URL such as {EXAMPLE_RPC} ({problem})")
    return url


def ipfs_addr_problem(addr) -> str | None:
    """Why ``addr`` is not an IPFS API multiaddr the client can dial, or None when it is one."""
    from ipfshttpclient import exceptions as ipfs_exceptions
    from ipfshttpclient.http_common import multiaddr_to_url_data

    if not isinstance(addr, str) or not addr:
        return "it is empty"
    try:
        multiaddr_to_url_data(addr, "api/v0")
    except (ipfs_exceptions.AddressError, ValueError, TypeError) as exc:
        return str(exc)
    return None


def check_ipfs_addr(addr, source: str) -> str:
    """Return ``addr``, or raise :class:`ConfigError` naming ``source`` (``--ipfs``, a variable)."""
    problem = ipfs_addr_problem(addr)
    if problem is not None:
        # The parser's own words name its internal objects: the example says enough.
        raise ConfigError(f"{source} {addr!r} is not an IPFS API multiaddr such as {EXAMPLE_IPFS} "
                          f"or /dns4/host/tcp/5001/https")
    return addr
