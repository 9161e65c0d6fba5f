"""Stage messages between processes: their bytes on an IPFS node, their addresses on a
rendezvous board.

:class:`IpfsMessageStore` has :class:`~.wire.MessageStore`'s interface (``put``, ``get``,
``moved``), so a :class:`~.stage.Stage` runs on it unchanged. ``put`` adds a message's
bytes to the node (pinned) through the project's :class:`~truetrain.storage.StorageClient`
and posts a **record** on the board: the message's place (step, kind, micro-batch, source
stage), its keccak256 address and the CID the node gave it. A receiver waits for the
record of the message it needs, fetches the CID and checks the bytes against the address
before it parses them (the client's :meth:`~truetrain.storage.StorageClient.fetch`): a
blob that is missing, withheld, too large or other than its address raises
:class:`~truetrain.errors.PipelineError` naming the address, within ``timeout_s``.

**Why the CID travels beside the address.** Logs and commitments hold keccak addresses
only (what the contracts hash); a CID is just where to look, worth nothing until the bytes
check out. So the record carries both, and the store keeps every CID it used
(``cids``): a stage publishes that index with its log, so an auditor can fetch what the
stage received and sent.

:class:`Rendezvous` is the board: a directory of small JSON files, one per record, each
written whole (a temporary file renamed into place) and polled by the readers. Nothing to
start or stop, atomic records, nothing inherited by spawned processes but a path; it
stands where the market will post (an event, a pubsub topic). An ``abort`` record tells
every waiting stage to give up (a neighbour failed).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ...errors import ContentMismatch, InvalidCid, PipelineError, StorageError
from ...storage import StorageClient
from ...storage.cids import check_cid
from .wire import Kind, Message

#: The largest message a stage fetches: the market reader's MAX_OBJECT_BYTES (256 MiB).
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
ABORT = "abort"


def record_name(kind: Kind, step: int, micro: int, source: int) -> str:
    """The board's name for the record of a message."""
    return f"msg-{step}-{kind.name.lower()}-{micro}-{source}"


def poll(read, timeout_s: float, what: str, *, give_up=lambda: None, first_pause_s: float = 0.005,
         max_pause_s: float = 0.05) -> dict:
    """``read()`` until it gives a record (backing off from ``first_pause_s`` to
    ``max_pause_s``); PipelineError after ``timeout_s`` seconds, or with the reason
    ``give_up()`` returns once it returns one."""
    deadline = time.monotonic() + timeout_s
    pause = first_pause_s
    while True:
        record = read()
        if record is not None:
            return record
        reason = give_up()
        if reason is not None:
            raise PipelineError(reason)
        if time.monotonic() > deadline:
            raise PipelineError(f"no {what} within {timeout_s:g} s")
        time.sleep(pause)
        pause = min(2 * pause, max_pause_s)


class Rendezvous:
    """Records by name in directory ``root``: ``post`` writes one whole, ``wait`` polls for one."""

    def __init__(self, root: str | os.PathLike[str], *, poll_s: float = 0.005):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.poll_s = poll_s

    def post(self, name: str, record: dict) -> None:
        path = self.root / f"{name}.json"
        temp = self.root / f".{name}.{os.getpid()}.tmp"
        temp.write_text(json.dumps(record, sort_keys=True))
        os.replace(temp, path)

    def read(self, name: str) -> dict | None:
        try:
            return json.loads((self.root / f"{name}.json").read_text())
        except FileNotFoundError:
            return None
        except ValueError as exc:
            raise PipelineError(f"rendezvous record {name} is not JSON: {exc}") from exc

    def wait(self, name: str, timeout_s: float, what: str) -> dict:
        """The record ``name`` once posted; PipelineError after ``timeout_s`` seconds or
        once an ``abort`` record appears."""
        def aborted() -> str | None:
            record = self.read(ABORT)
            return None if record is None else f"gave up waiting for {what}: {record.get('reason', 'aborted')}"

        return poll(lambda: self.read(name), timeout_s, what, give_up=aborted, first_pause_s=self.poll_s,
                    max_pause_s=0.05)


class IpfsMessageStore:
    """Messages on the IPFS node behind ``client``, their records on ``board``.

    ``timeout_s`` bounds each wait for a record and each fetch; ``cids`` maps every address
    the store put or learned to its CID; ``moved`` counts the bytes put, by kind.
    """

    def __init__(self, client: StorageClient, board: Rendezvous | None = None, *, timeout_s: float = 30.0,
                 max_bytes: int = MAX_MESSAGE_BYTES):
        self.client, self.board, self.timeout_s, self.max_bytes = client, board, timeout_s, max_bytes
        self.cids: dict[bytes, str] = {}
        self.moved: dict[Kind, int] = {}

    def put(self, message: Message) -> bytes:
        """Add the message to the node, post its record; its keccak256 address."""
        data = message.to_bytes()
        where = f"{message.kind.name} of step {message.step}, micro-batch {message.micro} from stage {message.source}"
        try:
            stored = self.client.add_bytes(data)
        except StorageError as exc:
            raise PipelineError(f"could not store {where}: {exc}") from exc
        self.cids[stored.hash] = stored.cid
        self.moved[message.kind] = self.moved.get(message.kind, 0) + len(data)
        if self.board is not None:
            self.board.post(record_name(message.kind, message.step, message.micro, message.source),
                            {"address": "0x" + stored.hash.hex(), "cid": stored.cid})
        return stored.hash

    def learn(self, address: bytes, cid: str) -> None:
        """Where to fetch the message at ``address`` (a CID is a hint: ``get`` checks the bytes)."""
        try:
            self.cids[bytes(address)] = check_cid(cid)
        except InvalidCid as exc:
            raise PipelineError(f"message 0x{bytes(address).hex()}: {exc}") from exc

    def await_address(self, kind: Kind, step: int, micro: int, source: int) -> bytes:
        """The address of the message at this place, once its sender posted it (its CID learned)."""
        what = f"{kind.name} of step {step}, micro-batch {micro} from stage {source}"
        if self.board is None:
            raise PipelineError(f"no rendezvous to learn the {what} from")
        record = self.board.wait(record_name(kind, step, micro, source), self.timeout_s, what)
        try:
            address = bytes.fromhex(record["address"].removeprefix("0x"))
            cid = record["cid"]
        except (KeyError, AttributeError, ValueError) as exc:
            raise PipelineError(f"bad rendezvous record for {what}: {record!r}") from exc
        if len(address) != 32:
            raise PipelineError(f"bad rendezvous record for {what}: address {record['address']!r}")
        self.learn(address, cid)
        return address

    def get(self, address: bytes) -> Message:
        """The message at ``address``, fetched by its CID and checked against the address."""
        address = bytes(address)
        name = f"0x{address.hex()}"
        cid = self.cids.get(address)
        if cid is None:
            raise PipelineError(f"no CID known for message {name}")
        try:
            data = self.client.fetch(cid, address, max_size=self.max_bytes, timeout=self.timeout_s)
        except ContentMismatch as exc:
            raise PipelineError(f"message at {name} does not match its address: {exc}") from exc
        except StorageError as exc:
            raise PipelineError(f"message at {name} could not be fetched: {exc}") from exc
        try:
            return Message.from_bytes(data)
        except PipelineError as exc:
            raise PipelineError(f"message at {name}: {exc}") from exc
