"""Typed, validated settings for the IPFS (Kubo RPC) storage client."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from truetrain.errors import ConfigError

DEFAULT_API_ADDR = "/ip4/127.0.0.1/tcp/5001"

#: Environment variables read by :meth:`StorageSettings.from_env`.
ENV_API_ADDR = "TRUETRAIN_IPFS_API"
ENV_TIMEOUT_S = "TRUETRAIN_IPFS_TIMEOUT_S"
ENV_RETRIES = "TRUETRAIN_IPFS_RETRIES"
ENV_BACKOFF_S = "TRUETRAIN_IPFS_BACKOFF_S"


def _check_api_addr(addr: str) -> None:
    # Validated with the very parser ipfshttpclient uses, so anything accepted here connects.
    from truetrain.endpoints import ipfs_addr_problem

    problem = ipfs_addr_problem(addr)
    if problem is not None:
        raise ConfigError(
            f"invalid IPFS API address {addr!r}: expected a multiaddr such as "
            f"{DEFAULT_API_ADDR} or /dns4/host/tcp/5001/https ({problem})"
        )


@dataclass(frozen=True)
class StorageSettings:
    """Where the Kubo RPC API lives and how patiently to talk to it.

    ``timeout_s`` bounds each request (and is the default deadline of a whole fetch);
    ``retries`` is how many times a request is retried after a connection failure, waiting
    ``backoff_s``, 2 x ``backoff_s``, ... (capped at ``backoff_max_s``, with jitter) between
    attempts. ``cid_version`` is what new content is added as (0 is Kubo's default).
    """

    api_addr: str = DEFAULT_API_ADDR
    timeout_s: float = 30.0
    retries: int = 3
    backoff_s: float = 0.2
    backoff_max_s: float = 5.0
    cid_version: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.api_addr, str) or not self.api_addr:
            raise ConfigError("IPFS API address must be a non-empty multiaddr string")
        _check_api_addr(self.api_addr)
        for name in ("timeout_s", "backoff_s", "backoff_max_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
                raise ConfigError(f"storage setting {name} must be a number, got {value!r}")
        if not 0 < self.timeout_s < math.inf:
            raise ConfigError(f"storage setting timeout_s must be > 0 and finite, got {self.timeout_s}")
        if self.backoff_s < 0 or self.backoff_max_s < self.backoff_s:
            raise ConfigError(
                f"storage backoff must satisfy 0 <= backoff_s <= backoff_max_s, "
                f"got {self.backoff_s} and {self.backoff_max_s}"
            )
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise ConfigError(f"storage setting retries must be an integer >= 0, got {self.retries!r}")
        if self.cid_version not in (0, 1) or isinstance(self.cid_version, bool):
            raise ConfigError(f"storage setting cid_version must be 0 or 1, got {self.cid_version!r}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> StorageSettings:
        """Build settings from ``TRUETRAIN_IPFS_*`` variables; keyword overrides win."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        readers = {
            ENV_API_ADDR: ("api_addr", str),
            ENV_TIMEOUT_S: ("timeout_s", float),
            ENV_RETRIES: ("retries", int),
            ENV_BACKOFF_S: ("backoff_s", float),
        }
        for var, (field, parse) in readers.items():
            raw = env.get(var)
            if raw is None or raw == "":
                continue
            try:
                values[field] = parse(raw)
            except ValueError:
                raise ConfigError(f"{var}={raw!r} is not a valid {parse.__name__}") from None
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]
