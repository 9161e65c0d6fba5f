"""A daemon whose node stops being its chain says so in one line and waits for it.

When the node at the daemon's RPC URL turns into another chain (another chain id or
genesis block, or the deployment's code gone from its addresses), every call the loop makes
fails, and logging each failure would fill the log with tracebacks that all say the same
thing. So on a failure (and when the event cursor's block is gone) the daemon first asks
:class:`~truetrain.chain.watch.ChainWatch` whether the node is still its chain. If not, it
logs one line saying how the node differs, sets the ``truetrain_chain_changed`` gauge, and
waits, looking again every ``wait_s`` seconds and logging nothing more, until the original
chain answers again; then it says so and goes on from its book and its persisted cursor.

It waits rather than exits because everything the daemon holds (book, salts, cursor, a
training in its lane) belongs to the original chain, which can come back (a node restored
from its saved state, a proxy switched back), and because a supervisor restarting an
exited daemon against the wrong chain would only repeat the refusal. To work on the chain
the node has now, stop the daemon and start it again: at start it checks the node against
the deployment file and refuses in one line.
"""

from __future__ import annotations

import logging
import threading

from truetrain.chain.watch import ChainWatch
from truetrain.errors import ChainChanged, RpcUnavailable

log = logging.getLogger("truetrain.daemon")

#: Seconds between looks at the node while waiting for the original chain.
WAIT_S = 5.0


class ChainGuard:
    """Raises :class:`ChainChanged` when the node is not the pinned chain, and waits it out."""

    def __init__(self, watch: ChainWatch, gauge, stop_event: threading.Event, *, wait_s: float = WAIT_S):
        self.watch = watch
        self.gauge = gauge
        self.stop_event = stop_event
        self.wait_s = wait_s
        gauge.set(0)

    def check(self) -> None:
        """Raise :class:`ChainChanged` when the node answers as another chain (a node that
        does not answer tells nothing: no error)."""
        try:
            self.confirm()
        except RpcUnavailable:
            return

    def confirm(self) -> None:
        """As :meth:`check`, but a node that cannot be looked at raises
        :class:`RpcUnavailable`: for a caller about to act as if the node were its chain
        (the event follower rewinding its cursor)."""
        difference = self.watch.difference()
        if difference is not None:
            raise ChainChanged(difference)

    def wait_until_back(self, changed: ChainChanged) -> bool:
        """Log ``changed`` in one line, then look every ``wait_s`` until the node is the
        original chain again (True) or the daemon is stopped (False)."""
        log.error("chain changed: %s; waiting for the original chain (looking every %g s; to work on the "
                  "chain the node has now, stop this daemon and start it again)", changed, self.wait_s)
        self.gauge.set(1)
        while not self.stop_event.wait(self.wait_s):
            try:
                if self.watch.difference() is None:
                    self.gauge.set(0)
                    log.warning("chain is back: the node is %s again with the deployment's code; resuming",
                                self.watch.expected)
                    return True
            except RpcUnavailable:
                continue
        return False
