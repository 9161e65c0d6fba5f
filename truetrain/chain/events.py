"""The event follower: contract logs delivered at least once, in order, from a persisted cursor.

Each :meth:`EventFollower.poll`:

1. checks that the chain still has the block the cursor points at (same hash). If not, a
   reorg or a devnet restart happened: it rewinds to the newest checkpoint the chain still
   has (or to ``start_block`` when the genesis changed or none matches) and re-reads;
2. reads logs from the cursor up to ``head - confirmations`` in ranges of at most
   ``max_span`` blocks, and calls the handler once per event in (block, log index) order;
3. moves the cursor onto each event only after its handler returned. A handler that raises
   leaves the cursor on the event before and surfaces as :class:`HandlerFailed`; the same
   event comes again on the next poll. So delivery is at least once.

Events whose handler already returned are recorded by (block hash, log index) and skipped
when a rewind re-reads unchanged blocks, so in normal operation each is delivered once; a
crash between a handler's return and that record re-delivers it, so handlers must still be
idempotent (``follower.seen(event)`` tells them what was delivered before).
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from eth_utils import event_abi_to_log_topic
from web3 import Web3
from web3.contract import Contract
from web3.exceptions import Web3RPCError

from truetrain.chain.client import ChainClient
from truetrain.chain.cursor import WHOLE_BLOCK, CursorStore, Position
from truetrain.chain.raw import block_hash, height
from truetrain.chain.settings import FollowerSettings
from truetrain.errors import ConfigError, HandlerFailed, TruetrainError

log = logging.getLogger(__name__)


def _hex(value) -> str:
    return "0x" + bytes(value).hex() if not isinstance(value, str) else value


@dataclass(frozen=True)
class Subscription:
    """Events ``events`` of ``contract``; ``key`` labels them (e.g. the deployment key)."""

    key: str
    contract: Contract
    events: Sequence[str]


@dataclass(frozen=True)
class ChainEvent:
    """One decoded contract event."""

    key: str
    event: str
    args: dict
    address: str
    block_number: int
    block_hash: str
    log_index: int
    tx_hash: str

    def __str__(self) -> str:
        return f"{self.key}.{self.event} at block {self.block_number} log {self.log_index}"


class EventFollower:
    """Follows ``subscriptions`` on the chain behind ``chain`` (a ChainClient or Web3), state in ``db_path``.

    ``name`` lets several followers share one SQLite file. ``on_rewind(old, new)`` is called
    with the two :class:`Position` s when a reorg or restart moved the cursor back, so a
    daemon can undo what it did for events that are no longer on the chain.
    ``check_chain()`` is called when the cursor's block is gone, before anything moves: it
    may raise (a daemon's :class:`~truetrain.errors.ChainChanged` when the node is another
    chain now), and the cursor then stays where it was, for when the chain comes back.
    """

    def __init__(self, chain: ChainClient | Web3, subscriptions: Sequence[Subscription],
                 handler: Callable[[ChainEvent], None], db_path: Path | str,
                 settings: FollowerSettings | None = None, *, name: str = "default",
                 on_rewind: Callable[[Position, Position], None] | None = None,
                 check_chain: Callable[[], None] | None = None):
        self.w3: Web3 = chain.w3 if isinstance(chain, ChainClient) else chain
        self.settings = settings or FollowerSettings()
        if not subscriptions:
            raise ConfigError("event follower needs at least one subscription")
        self.handler = handler
        self.on_rewind = on_rewind
        self.check_chain = check_chain
        self.store = CursorStore(db_path, name)
        self._decoders: dict[tuple[str, bytes], tuple[str, object]] = {}
        for sub in subscriptions:
            for event_name in sub.events:
                try:
                    event = sub.contract.events[event_name]()
                except Exception:  # noqa: BLE001 - web3 raises several kinds for an unknown name
                    raise ConfigError(f"contract {sub.key} has no event {event_name!r}") from None
                topic = bytes(event_abi_to_log_topic(event.abi))
                self._decoders[(sub.contract.address, topic)] = (sub.key, event)
        self._addresses = sorted({address for address, _ in self._decoders})
        self._topics = sorted({"0x" + topic.hex() for _, topic in self._decoders})
        self.rewinds = 0  # for tests and metrics

    def close(self) -> None:
        self.store.close()

    def position(self) -> Position:
        """Where the cursor stands now."""
        position, _ = self.store.load()
        return position or Position(self.settings.start_block - 1)

    def seen(self, event: ChainEvent) -> bool:
        """True when ``event``'s handler returned before (idempotency helper for handlers)."""
        return self.store.seen(event.block_hash, event.log_index)

    # --- one pass ---------------------------------------------------------------------

    def _hash(self, block: int) -> str | None:
        # The raw call: web3's get_block formats every field of the block.
        return block_hash(self.w3, block)

    def poll(self, head: int | None = None) -> int:
        """Deliver what is new up to the safe head (``head``: the chain's height, when the
        caller just read it); return how many events were handled."""
        head = height(self.w3) if head is None else head
        position, genesis = self.store.load()
        position = position or Position(self.settings.start_block - 1)
        if genesis is None:
            genesis = self._hash(0)
            self.store.set_genesis(position, genesis)
        position = self._check_reorg(position, genesis, head)
        safe = head - self.settings.confirmations
        start = position.block if position.log_index != WHOLE_BLOCK else position.block + 1
        delivered = 0
        while start <= safe:
            end = min(start + self.settings.max_span - 1, safe)
            end_hash = self._hash(end)
            logs = self.w3.eth.get_logs({"fromBlock": start, "toBlock": end,
                                         "address": self._addresses, "topics": [self._topics]})
            if logs and self._hash(end) != end_hash:
                # The chain changed while we read: the logs may mix two forks. Deliver
                # nothing; the next poll's reorg check finds where to resume. (With no logs
                # there is nothing to deliver: a change after ``end_hash`` was read leaves
                # the cursor on a hash the chain no longer has, and the next poll's reorg
                # check rewinds and reads the range again; an idle daemon saved a call a block.)
                log.warning("chain changed under the scan of blocks %d..%d; retrying next poll", start, end)
                return delivered
            for raw in sorted(logs, key=lambda entry: (entry["blockNumber"], entry["logIndex"])):
                if position.before(raw["blockNumber"], raw["logIndex"]):
                    delivered += self._deliver(raw)
                    position = Position(raw["blockNumber"], raw["logIndex"], _hex(raw["blockHash"]))
            position = Position(end, WHOLE_BLOCK, end_hash)
            self.store.range_done(position, keep_checkpoints=self.settings.checkpoints_kept,
                                  keep_processed_blocks=self.settings.processed_kept_blocks)
            start = end + 1
        return delivered

    def _deliver(self, raw) -> int:
        decoder = self._decoders.get((Web3.to_checksum_address(raw["address"]), bytes(raw["topics"][0])))
        if decoder is None:  # a log the node matched loosely; not ours
            return 0
        key, event_type = decoder
        data = event_type.process_log(raw)
        event = ChainEvent(key, data["event"], dict(data["args"]), data["address"], data["blockNumber"],
                           _hex(data["blockHash"]), data["logIndex"], _hex(data["transactionHash"]))
        if self.seen(event):  # re-read after a rewind, but its block did not change
            return 0
        try:
            self.handler(event)
        except Exception as exc:  # noqa: BLE001 - any handler failure keeps the cursor here
            raise HandlerFailed(event, exc) from exc
        self.store.delivered(Position(event.block_number, event.log_index, event.block_hash), event.tx_hash)
        return 1

    def _check_reorg(self, position: Position, genesis: str | None, head: int) -> Position:
        """Return ``position`` if the chain still has its block, else where to resume."""
        if position.block_hash is None or (position.block <= head and self._hash(position.block) == position.block_hash):
            return position
        if self.check_chain is not None:
            self.check_chain()
        fresh = Position(self.settings.start_block - 1)
        genesis_now = self._hash(0)
        target, fresh_chain = fresh, genesis_now != genesis
        if not fresh_chain:
            for block, block_hash in self.store.checkpoints():
                if block < position.block and block <= head and self._hash(block) == block_hash:
                    target = Position(block, WHOLE_BLOCK, block_hash)
                    break
        reason = "the chain restarted (new genesis)" if fresh_chain else "a reorg replaced it"
        log.warning("block %d is no longer on the chain (%s): rewinding to block %d",
                    position.block, reason, target.block)
        self.store.rewind(target, fresh_chain=fresh_chain, genesis_hash=genesis_now)
        self.rewinds += 1
        if self.on_rewind is not None:
            self.on_rewind(position, target)
        return target

    # --- the loop ---------------------------------------------------------------------

    def run(self, stop: threading.Event | None = None, *, max_polls: int | None = None) -> None:
        """Poll every ``poll_interval_s`` until ``stop`` is set (or ``max_polls`` passes).

        Retryable failures (RPC down, a handler raising, a node error answer) are logged
        and retried after a backoff with jitter; anything else is fatal and propagates.
        """
        stop = stop or threading.Event()
        failures = polls = 0
        while not stop.is_set() and (max_polls is None or polls < max_polls):
            polls += 1
            try:
                self.poll()
                failures, wait = 0, self.settings.poll_interval_s
            except (TruetrainError, Web3RPCError) as exc:
                if isinstance(exc, TruetrainError) and not exc.retryable:
                    raise
                failures += 1
                step = min(self.settings.backoff_max_s, self.settings.backoff_s * 2 ** (failures - 1))
                wait = max(step / 2 + random.random() * step / 2, self.settings.poll_interval_s)
                log.warning("poll failed (%s), retrying in %.2f s: %s", type(exc).__name__, wait, exc)
            stop.wait(wait)
