"""A worker keeps its declared network figures true and fresh.

Every ``check_blocks`` blocks (and at start) it measures its RPC round-trip and its fetch
throughput (the last verified fetch of a shard-sized object when one happened since the last
check, else a probe block) and declares them (``IdentityRegistry.declareNetwork``, which
also counts as a heartbeat) when:

* it never declared any ("first");
* the declared ones are half a liveness window old ("ageing"): the pool counts figures for a
  job with network terms only while they are at most one liveness window old;
* it timed out since it declared them and the cool-down (one liveness window after the
  timeout) is over ("cool-down over"): until it re-measures, its figures do not count;
* they moved materially from the declared ones, by more than 1.5× ("changed"; see
  :meth:`~truetrain.network.NetworkFigures.differs_materially`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from truetrain.network import FetchMeter, NetworkFigures, measure

log = logging.getLogger("truetrain.daemon")


class NetworkDeclarer:
    """Measure and declare one account's network figures when due (see the module doc)."""

    def __init__(self, registry, w3, store, address: str, send: Callable, *, window_blocks: int,
                 check_blocks: int, meter: FetchMeter | None = None, seconds_per_check: float = 600.0):
        if window_blocks < 2 or check_blocks < 1:
            raise ValueError(f"need window_blocks >= 2 and check_blocks >= 1, got {window_blocks}, {check_blocks}")
        self.registry, self.w3, self.store, self.address, self.send = registry, w3, store, address, send
        self.window = window_blocks
        self.check_blocks = check_blocks
        self.meter = meter
        self.seconds_per_check = seconds_per_check
        self.last_check: int | None = None

    def reason(self, declared: NetworkFigures, last_timeout: int, fresh: NetworkFigures, block: int) -> str | None:
        """Why ``fresh`` should replace ``declared`` at ``block`` (None: it need not)."""
        if declared.measured_at == 0:
            return "first"
        cooled = last_timeout + self.window
        if last_timeout and declared.measured_at < cooled <= block:
            return "cool-down over"
        if block - declared.measured_at >= self.window // 2:
            return "ageing"
        if declared.differs_materially(fresh):
            return "changed"
        return None

    def tick(self, block: int) -> NetworkFigures | None:
        """Check when due; return the figures declared (None when nothing was sent)."""
        if self.last_check is not None and block - self.last_check < self.check_blocks:
            return None
        self.last_check = block
        declared, last_timeout = NetworkFigures.read(self.registry, self.address)
        observed = self.meter.take(self.seconds_per_check) if self.meter is not None else None
        fresh = measure(self.w3, self.store, fetch_kibps=observed)
        why = self.reason(declared, last_timeout, fresh, fresh.measured_at)
        if why is None:
            return None
        self.send("declareNetwork", self.registry.functions.declareNetwork(fresh.as_tuple()))
        log.info("declared network figures", extra={"reason": why, "fetch_kibps": fresh.fetch_kibps,
                                                     "rpc_rtt_ms": fresh.rpc_rtt_ms, "measured_at": fresh.measured_at,
                                                     "source": "fetch" if observed is not None else "probe"})
        return fresh
