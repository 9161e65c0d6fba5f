"""One nonce manager per sending key: gap-free nonces for concurrent senders.

A nonce is only consumed once the node has accepted the transaction that carries it. The
manager therefore holds its lock from picking the nonce until ``eth_sendRawTransaction``
has returned: threads may estimate gas and build transactions in parallel, but they hand
them to the node one at a time. That costs one round trip per send under the lock and in
return a failed send can never leave a hole that later transactions would queue behind.

Caveat: a cache that is *ahead* of the chain (a devnet reverted with ``evm_revert``) gets
no error from Anvil, which just queues the transaction; the client's receipt timeout then
resyncs. Call :meth:`NonceRegistry.resync_all` after rewinding a devnet on purpose.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class NonceManager:
    """Hands out the nonces of one address in order.

    ``fetch_pending`` returns the node's ``pending`` transaction count of the address; it
    is asked on first use and again after :meth:`resync` (any failed send), so the manager
    recovers when a send failed, another process used the key, or the devnet restarted.
    """

    def __init__(self, address: str, fetch_pending: Callable[[], int]):
        self.address = address
        self._fetch_pending = fetch_pending
        self._lock = threading.Lock()
        self._next: int | None = None
        self.resyncs = 0  # how often the cache was refilled from the node (for tests/metrics)

    @contextmanager
    def reserve(self) -> Iterator[int]:
        """Yield the next nonce while holding the lock; it is consumed only if the block exits cleanly.

        Send the transaction inside the ``with`` block. If the block raises, the nonce is
        not consumed and the cache is dropped, so the next reservation asks the node again.
        """
        with self._lock:
            if self._next is None:
                self._next = self._fetch_pending()
                self.resyncs += 1
            nonce = self._next
            try:
                yield nonce
            except BaseException:
                self._next = None
                raise
            self._next = nonce + 1

    def resync(self) -> None:
        """Forget the cached nonce; the next reservation reads the node's pending count."""
        with self._lock:
            self._next = None

    def peek(self) -> int | None:
        """The nonce the next reservation will use, or None when it will ask the node."""
        with self._lock:
            return self._next


class NonceRegistry:
    """The one :class:`NonceManager` per address of a client (thread-safe lookup)."""

    def __init__(self, fetch_pending: Callable[[str], int]):
        self._fetch_pending = fetch_pending
        self._lock = threading.Lock()
        self._managers: dict[str, NonceManager] = {}

    def __call__(self, address: str) -> NonceManager:
        with self._lock:
            manager = self._managers.get(address)
            if manager is None:
                manager = NonceManager(address, lambda: self._fetch_pending(address))
                self._managers[address] = manager
            return manager

    def resync_all(self) -> None:
        """Forget every cached nonce (after a devnet restart, say)."""
        with self._lock:
            managers = list(self._managers.values())
        for manager in managers:
            manager.resync()
