"""When a draw settled from the future can be read: the Python twin of FutureRandomness.sol.

A request made in block N gets a ticket block T > N; the draw is read from ``blockhash(T)``
from block T + 1 to the last block of T's epoch, and verifier weights are held from T + 1
to that block (WorkerPool.holdDraws; worker weights for offers, holdOffers), so a draw sees
the weights as they stood before its hash existed. Every role reads tickets from events
(``AuditRequested``, ``RefereesRequested``, ``OffersRequested``) or views; these functions
tell when a ticket's draw opens and lapses.
"""

from __future__ import annotations

from web3.logs import DISCARD

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


def draw_offers(market, job_id: int, send, mine_past, height, count: int = 1):
    """Offer the job's next tasks as offers are drawn (IJobMarket.drawTask): past the job's
    live offer ticket (``mine_past(ticket)``: mine on a devnet, or wait) the call draws up
    to ``count`` tasks from the ticket's hash; when it asked for a ticket instead (none was
    live, it lapsed, or a task sent back since waits for the next), pass that one and call
    again. ``send(call)`` sends one transaction and returns its receipt (a web3 receipt or
    one with ``.raw``), ``height()`` is the chain's block number. Returns the receipt of the
    drawing call (``drawTask`` for one task, else ``drawTasks``)."""
    fns = market.functions

    def call():
        return send(fns.drawTask(job_id) if count == 1 else fns.drawTasks(job_id, count))

    ticket = fns.offerTicketOf(job_id).call()
    if ticket != 0 and not lapsed(ticket, height() + 1):
        mine_past(ticket)
    receipt = call()
    raw = getattr(receipt, "raw", receipt)
    if market.events.TaskDrawn().process_receipt(raw, errors=DISCARD) or \
            not market.events.OffersRequested().process_receipt(raw, errors=DISCARD):
        return receipt
    mine_past(fns.offerTicketOf(job_id).call())
    return call()
