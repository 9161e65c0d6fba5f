"""The network figures a worker declares in its CHAIN identity, and how it measures them.

Two figures, both what a job's deadlines depend on besides compute:

* ``fetch_kibps``: shard-fetch throughput from IPFS in KiB/s: the bytes of one fetch (a
  shard the worker fetched for a task, or a probe block) over the seconds it took;
* ``rpc_rtt_ms``: JSON-RPC round-trip in ms: the median of a few ``eth_blockNumber`` calls,
  rounded up.

Both are declared with the block they were measured (``IdentityRegistry.declareNetwork``)
and bounded there: at most :data:`MAX_FETCH_KIBPS` and :data:`MAX_RPC_RTT_MS`, measured at
most :data:`MAX_DECLARE_DELAY_BLOCKS` blocks before the declaration. A job's network terms
(``JobTerms.min_fetch_kibps``, ``max_rpc_rtt_ms``; 0 = none) are checked against the same
bounds.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass

#: IIdentityRegistry's MAX_FETCH_KIBPS (2^24 KiB/s = 16 GiB/s) and MAX_RPC_RTT_MS (60 s).
MAX_FETCH_KIBPS = 2**24
MAX_RPC_RTT_MS = 60_000
#: IdentityRegistry.MAX_NETWORK_DECLARE_DELAY: most blocks between measuring and declaring.
MAX_DECLARE_DELAY_BLOCKS = 256
#: Size of the probe block a worker fetches when it has no shard fetch of its own to time.
PROBE_BYTES = 256 * 1024
#: eth_blockNumber calls whose median is the round-trip.
RTT_SAMPLES = 5
#: A figure changed "materially" when the larger of old and new is more than this many times
#: the smaller (fetch throughput of one object is noisy: a smaller ratio re-declares too often).
MATERIAL_RATIO = 1.5


@dataclass(frozen=True)
class NetworkFigures:
    """Measured figures and the block they were measured (``measured_at`` 0: never)."""

    fetch_kibps: int
    rpc_rtt_ms: int
    measured_at: int

    def __post_init__(self) -> None:
        for name, high in (("fetch_kibps", MAX_FETCH_KIBPS), ("rpc_rtt_ms", MAX_RPC_RTT_MS), ("measured_at", 2**64 - 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
                raise ValueError(f"{name} must be an integer in [0, {high}], got {value!r}")

    def as_tuple(self) -> tuple[int, int, int]:
        """The IIdentityRegistry.NetworkFigures tuple."""
        return (self.fetch_kibps, self.rpc_rtt_ms, self.measured_at)

    @classmethod
    def read(cls, registry, address: str) -> tuple[NetworkFigures, int]:
        """``registry.networkOf(address)``: the declared figures and the last timeout block."""
        figures, last_timeout = registry.functions.networkOf(address).call()
        return cls(*figures), last_timeout

    def differs_materially(self, other: NetworkFigures) -> bool:
        """Whether a figure of ``other`` is more than :data:`MATERIAL_RATIO` times the same
        figure here or less than 1 / MATERIAL_RATIO of it (the round-trip by 5 ms at least as
        well, so that millisecond jitter on a LAN is no change)."""
        def moved(old: int, new: int, floor: int) -> bool:
            low, high = min(old, new), max(old, new)
            return high - low > floor and high > MATERIAL_RATIO * low

        return moved(self.fetch_kibps, other.fetch_kibps, 0) or moved(self.rpc_rtt_ms, other.rpc_rtt_ms, 5)


def kibps(size_bytes: int, seconds: float) -> int:
    """Throughput of one fetch in whole KiB/s, clamped to [0, MAX_FETCH_KIBPS]."""
    if size_bytes <= 0:
        return 0
    rate = size_bytes / 1024 / max(seconds, 1e-6)
    return min(MAX_FETCH_KIBPS, int(rate))


def measure_rpc_rtt_ms(w3, samples: int = RTT_SAMPLES) -> int:
    """Median wall time of ``samples`` ``eth_blockNumber`` calls, in whole ms (rounded up,
    at least 1), clamped to MAX_RPC_RTT_MS."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        w3.eth.block_number  # noqa: B018 - the call is the measurement
        times.append(time.perf_counter() - start)
    return min(MAX_RPC_RTT_MS, max(1, math.ceil(statistics.median(times) * 1000)))


def measure_fetch_kibps(store, cid: str | None = None, expected_hash: bytes | None = None, *,
                        probe_bytes: int = PROBE_BYTES) -> int:
    """Time one IPFS fetch through ``store`` and return its KiB/s.

    With ``cid`` and ``expected_hash``: that object (a shard), checked against its hash.
    Without: a fresh random probe block of ``probe_bytes`` is added unpinned, fetched back and
    checked. Through a local node that block is local, so the probe times the node's API path
    only; a worker's shard fetches (the figure it declares once it fetched one, see
    :class:`FetchMeter`) time the network path to wherever the data lives.
    """
    if cid is None:
        data = os.urandom(probe_bytes)
        stored = store.add_bytes(data, pin=False)
        cid, expected_hash = stored.cid, stored.hash
        max_size = probe_bytes
    else:
        if expected_hash is None:
            raise ValueError("a shard fetch needs the hash to check it against")
        max_size = 1 << 30
    start = time.perf_counter()
    fetched = store.fetch(cid, expected_hash, max_size=max_size)
    return kibps(len(fetched), time.perf_counter() - start)


def measure(w3, store, *, fetch_kibps: int | None = None) -> NetworkFigures:
    """Both figures now, measured at the current block. ``fetch_kibps``: a throughput already
    observed (the last shard fetch) instead of fetching a probe block."""
    block = w3.eth.block_number
    rtt = measure_rpc_rtt_ms(w3)
    fetch = measure_fetch_kibps(store) if fetch_kibps is None else fetch_kibps
    return NetworkFigures(fetch, rtt, block)


class FetchMeter:
    """Wraps a StorageClient: times every verified fetch of at least ``min_bytes`` and keeps
    the last one's throughput (``last_kibps``; None until one happened) and when it was taken."""

    def __init__(self, store, min_bytes: int = 64 * 1024):
        self._store = store
        self.min_bytes = min_bytes
        self.last_kibps: int | None = None
        self.last_at: float = 0.0

    def fetch(self, cid: str, expected_hash: bytes, **kwargs) -> bytes:
        start = time.perf_counter()
        data = self._store.fetch(cid, expected_hash, **kwargs)
        if len(data) >= self.min_bytes:
            self.last_kibps = kibps(len(data), time.perf_counter() - start)
            self.last_at = time.monotonic()
        return data

    def take(self, max_age_s: float) -> int | None:
        """The last fetch's throughput if it is at most ``max_age_s`` old, else None."""
        if self.last_kibps is None or time.monotonic() - self.last_at > max_age_s:
            return None
        return self.last_kibps

    def __getattr__(self, name: str):
        return getattr(self._store, name)
