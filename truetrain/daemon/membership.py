"""A daemon's standing in the market, kept up by its loop: its CHAIN identity and the
hardware profile behind it, its stake and seat in the pool, its heartbeat, its pool
weight, its declared network figures and its earnings.

:class:`Membership` is a part of :class:`~truetrain.daemon.base.Daemon`: it uses the
daemon's contracts, store, settings, profile, metrics and ``send``.
"""

from __future__ import annotations

import json
import logging

from truetrain.daemon.network import NetworkDeclarer
from truetrain.errors import TruetrainError

log = logging.getLogger("truetrain.daemon")

#: WorkerPool's marks on a member whose weight a hold deferred (VERIFIER_DEFERRED | WORKER_DEFERRED).
DEFERRED_MARKS = 0x80 | 0x40


class Membership:
    """Identity, stake, pool seat, heartbeat, weight, network figures and earnings."""

    def capability(self, profile) -> tuple:
        return (profile.device_class, profile.memory_mib, max(1, profile.throughput_gflops), self.settings.region,
                self.settings.max_concurrent)

    def ensure_identity(self) -> None:
        """Register (or add this role to) the CHAIN identity, with a hardware profile on IPFS."""
        registry = self.contracts.registry
        identity = registry.functions.identityOf(self.address).call()
        registered, roles = identity[0], identity[1]
        profile = self.profile
        if registered and roles & self.role_bits == self.role_bits:
            if profile.mailbox and self.published_mailbox(identity[6], bytes(identity[5])) != profile.mailbox:
                # its stages' records are served somewhere else now: publish the new profile
                stored = self.store.add_bytes(profile.canonical_json())
                self.send("updateProfile", registry.functions.updateProfile(stored.cid, stored.hash,
                                                                            self.capability(profile)))
                log.info("updated profile", extra={"profile": stored.cid, "mailbox": profile.mailbox})
            return
        if not registered:
            stored = self.store.add_bytes(profile.canonical_json())
            self.send("register", registry.functions.register(self.role_bits, stored.cid, stored.hash,
                                                              self.capability(profile)))
            log.info("registered identity", extra={"profile": stored.cid, "device": profile.device_name,
                                                   "memory_mib": profile.memory_mib, "gemm_route": profile.gemm_route})
        else:
            self.send("setRoles", registry.functions.setRoles(roles | self.role_bits))

    def complete_profile(self, profile):
        """The profile this daemon declares (a worker adds its mailbox)."""
        return profile

    def published_mailbox(self, cid: str, digest: bytes) -> str | None:
        """The mailbox in a profile an identity published (None: none, or unreadable); a
        profile read once is kept (its CID names its bytes)."""
        cache = self.__dict__.setdefault("_profile_mailboxes", {})
        if cid not in cache:
            try:
                cache[cid] = json.loads(self.store.fetch(cid, digest, max_size=1 << 20)).get("mailbox")
            except (TruetrainError, ValueError, AttributeError):
                return None
        return cache[cid]

    def ensure_stake(self) -> None:
        """Top the active stake up to ``stake_wei`` and join the pool."""
        stake, token = self.contracts.stake, self.contracts.token
        active = stake.functions.stakeOf(self.address).call()[0]
        missing = self.settings.stake_wei - active
        if missing > 0:
            if token.functions.allowance(self.address, stake.address).call() < missing:
                self.send("approve", token.functions.approve(stake.address, missing))
            self.send("stake", stake.functions.stake(missing))
        pool = self.contracts.pool
        if not pool.functions.memberOf(self.address).call()[0]:
            # A pool weight may move between the estimate and the block (a hold starting or
            # ending): the costlier path must fit.
            self.send("joinPool", pool.functions.joinPool(), random_path=True)

    def heartbeat_if_due(self) -> None:
        """A heartbeat when the registry's last sight of us is ``heartbeat_blocks`` old. The
        registry is read only when the last value read says one may be due (other calls
        refresh it too), or when the chain is below it (a restarted devnet): an idle daemon
        read it on every block, a third of its pass."""
        if 0 <= self.block - self._last_seen < self.settings.heartbeat_blocks:
            return
        last = self.contracts.registry.functions.lastSeenBlock(self.address).call()
        self._last_seen = last
        if self.block - last >= self.settings.heartbeat_blocks:
            self.send("heartbeat", self.contracts.registry.functions.heartbeat())
            self._last_seen = self.block

    def refresh_weight_if_deferred(self) -> None:
        """Once neither tree is held, set our pool weights that a hold deferred
        (WorkerPool.holdDraws, holdOffers): until then the pool draws us by the weights it had
        (a worker that reached its concurrency limit during a hold stays in the tree, and one
        released during a hold comes back only by this refresh). The first blocks of every
        epoch hold no ticket (FutureRandomness.OPEN), so the chance comes every epoch.

        The pool announces a deferral once, when it marks the member: a refresh mined after a
        new hold began (asked for between our read and our transaction) is deferred again
        without a second announcement, so the mark itself, read after the refresh, says
        whether to try again."""
        if not self.weight_deferred:
            return
        pool = self.contracts.pool.functions
        if pool.verifiersHeld().call() or pool.workersHeld().call():
            return
        self.send("refresh", pool.refresh(self.address), random_path=True)
        self.weight_deferred = bool(pool.memberOf(self.address).call()[2] & DEFERRED_MARKS)

    def start_declaring_network(self) -> None:
        """Measure and declare the network figures now, then every ``network_check_blocks``."""
        window = self.contracts.pool.functions.livenessWindow().call()
        self.declarer = NetworkDeclarer(self.contracts.registry, self.client.w3, self.store, self.address, self.send,
                                        window_blocks=max(2, window), check_blocks=self.settings.network_check_blocks,
                                        meter=self.meter)
        self.guarded("network figures", self.declarer.tick, self.client.w3.eth.block_number)

    def withdraw_if_credited(self) -> None:
        credits = self.market.functions.credits(self.address).call()
        if credits > 0:
            self.send("withdraw", self.market.functions.withdraw())
            self.metrics.withdrawn.inc(credits)
            log.info("withdrew earnings", extra={"wei": credits})
