"""When a draw settled from the future can be read: the Python twin of FutureRandomness.sol.

A request made in block N gets a ticket block T > N; the draw is read from ``blockhash(T)``
from block T + 1 to the last block of T's epoch, and verifier weights are held from T + 1
to that block (WorkerPool.holdDraws), so a draw sees the weights as they stood before its
hash existed. Every role reads tickets from events (``AuditRequested``,
``RefereesRequested``); these functions tell when a ticket's draw opens and lapses.
"""

from __future__ import annotations

#: FutureRandomness.DELAY: blocks from a request to the earliest ticket.
DELAY = 2
#: FutureRandomness.EPOCH: a ticket's draw is settled inside the ticket's epoch.
EPOCH = 32
#: FutureRandomness.OPEN: the first blocks of every epoch hold no ticket.
OPEN = 4
#: FutureRandomness.MIN_SETTLE: the fewest blocks a ticket leaves to settle in.
MIN_SETTLE = 12


def ticket_for(block: int) -> int:
    """The ticket of a request made in ``block`` (FutureRandomness.ticket)."""
    t = block + DELAY
    start = t - t % EPOCH
    if t < start + OPEN:
        return start + OPEN
    if t + MIN_SETTLE > start + EPOCH - 1:
        return start + EPOCH + OPEN
    return t


def last_block(ticket: int) -> int:
    """The last block in which ``ticket``'s draw can be settled."""
    return ticket - ticket % EPOCH + EPOCH - 1


def lapsed(ticket: int, block: int) -> bool:
    """Whether ``ticket``'s draw can no longer be settled at ``block``."""
    return block > last_block(ticket)
