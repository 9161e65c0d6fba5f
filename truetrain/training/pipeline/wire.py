"""What stages send each other, as hash-addressed bytes, and what each stage records.

A **message** is a few named tensors and the header that places them: its kind, the step,
the micro-batch and the sending stage. Its bytes are ``MAGIC``, the header
(``<BQIHB``: kind, step, micro-batch, source stage, tensor count) and the tensors in name
order, each as a checkpoint records one (:func:`~..checkpoint.encode_tensor`); its address
is keccak256 of those bytes. The header is inside the hash, so a message cannot be
replayed at another step, micro-batch or stage.

Kinds, per step (``micro`` 0 where a step sends one):

* ``ACT``: stage s -> s+1, micro-batch m's output (``x``: float32, (rows, ...));
* ``GRAD``: stage s+1 -> s, the loss gradient of that output (``g``);
* ``TIED``: between stage 0 and the last, each one's float32 part of ``tok_emb``'s gradient;
* ``NORM_MAX``: stage -> every other stage, its largest squared gradient (``largest``,
  float64) and how many gradient values it holds (``count``, int64): the global-norm grid;
* ``NORM_SUM``: stage -> every other stage, its integer sum of squares on that grid (``sum``).

Each stage keeps a :class:`StageLog`: the address of every message it received and sent
(in order) and of its checkpoints; :func:`log_root` is its positional Merkle root. Comparing two runs' logs in causal order
(:func:`first_divergence`) finds the first (step, micro-batch, stage) that sent something
different; :func:`broken_links` finds a stage that claims to have received what its
upstream never sent.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum

import torch

from ...errors import CheckpointError, PipelineError
from ...hashing import keccak256
from ..checkpoint import encode_tensor, read_tensors
from ..merkle import merkle_root

MAGIC = b"TTPIPE\x00\x01"
_HEADER = struct.Struct("<BQIHB")
_LEAF = struct.Struct("<QBIHB")


class Kind(IntEnum):
    ACT = 1
    GRAD = 2
    TIED = 3
    NORM_MAX = 4
    NORM_SUM = 5
    CHECKPOINT = 6  # not a message: a stage's checkpoint after a step, in its log


@dataclass(frozen=True)
class Message:
    kind: Kind
    step: int
    micro: int
    source: int
    tensors: dict[str, torch.Tensor] = field(repr=False)

    def to_bytes(self) -> bytes:
        head = MAGIC + _HEADER.pack(int(self.kind), self.step, self.micro, self.source, len(self.tensors))
        return head + b"".join(encode_tensor(n, self.tensors[n]) for n in sorted(self.tensors, key=str.encode))

    @classmethod
    def from_bytes(cls, data: bytes) -> "Message":
        data = bytes(data)
        pos = len(MAGIC) + _HEADER.size
        if len(data) < pos or not data.startswith(MAGIC):
            raise PipelineError("not a pipeline message (bad magic or truncated header)")
        kind, step, micro, source, count = _HEADER.unpack_from(data, len(MAGIC))

        def take(n: int) -> bytes:
            nonlocal pos
            if n < 0 or pos + n > len(data):
                raise PipelineError(f"pipeline message truncated at byte {pos}")
            pos += n
            return data[pos - n:pos]

        try:
            tensors = read_tensors(take, count, len(data))
            kind = Kind(kind)
        except (CheckpointError, ValueError) as exc:
            raise PipelineError(f"bad pipeline message: {exc}") from exc
        if pos != len(data):
            raise PipelineError(f"{len(data) - pos} trailing bytes after a pipeline message")
        return cls(kind, step, micro, source, tensors)


class MessageStore:
    """Content-addressed message bytes (what IPFS or a hashed stream is between workers):
    ``put`` returns the keccak256 address, ``get`` checks the bytes against it. Counts the
    bytes put, by kind."""

    def __init__(self):
        self._blobs: dict[bytes, bytes] = {}
        self.moved: dict[Kind, int] = {}

    def put(self, message: Message) -> bytes:
        data = message.to_bytes()
        address = keccak256(data)
        self._blobs[address] = data
        self.moved[message.kind] = self.moved.get(message.kind, 0) + len(data)
        return address

    def get(self, address: bytes) -> Message:
        data = self._blobs.get(bytes(address))
        if data is None:
            raise PipelineError(f"no message at 0x{bytes(address).hex()}")
        if keccak256(data) != bytes(address):
            raise PipelineError(f"message at 0x{bytes(address).hex()} does not match its address")
        return Message.from_bytes(data)


@dataclass(frozen=True)
class Entry:
    """One record of a stage's log: a message received or sent, or a checkpoint (after
    step ``step``, ``sent``)."""

    step: int
    kind: Kind
    micro: int
    source: int
    sent: bool
    hash: bytes

    @property
    def key(self) -> tuple[int, Kind, int, int]:
        return self.step, self.kind, self.micro, self.source


def causal_position(entry: Entry, stages: int) -> tuple[int, int, int, int]:
    """Where the entry's sending happens in a step: forward hops in stage order, backward
    hops from the last stage down, then the per-step exchanges and the checkpoints. A
    stage's output at a position depends only on what it received at earlier ones."""
    hop = stages - 1 - entry.source if entry.kind == Kind.GRAD else entry.source
    step = entry.step - 1 if entry.kind == Kind.CHECKPOINT else entry.step  # the state after step k - 1
    return step, int(entry.kind) - 1, entry.micro, hop


@dataclass
class StageLog:
    """Everything stage ``stage`` received and sent, in order, by address."""

    stage: int
    entries: list[Entry] = field(default_factory=list)

    def add(self, entry: Entry) -> None:
        self.entries.append(entry)

    def sent(self) -> dict[tuple, bytes]:
        return {e.key: e.hash for e in self.entries if e.sent}

    def received(self, step: int | None = None) -> dict[tuple, bytes]:
        """Received addresses by (step, kind, micro, source), of one step or all."""
        return {e.key: e.hash for e in self.entries if not e.sent and (step is None or e.step == step)}

    def checkpoints(self) -> dict[int, bytes]:
        """The stage's checkpoint hashes by step (the start's included)."""
        return {e.step: e.hash for e in self.entries if e.kind == Kind.CHECKPOINT}


def entry_leaf(entry: Entry) -> bytes:
    """The 32-byte Merkle leaf of a log entry: keccak256 of ``<QBIHB`` (step, kind,
    micro-batch, source, sent) and the address, so an opened leaf says which message the
    stage claims at which place."""
    return keccak256(_LEAF.pack(entry.step, int(entry.kind), entry.micro, entry.source, int(entry.sent)) + entry.hash)


def log_leaves(log: StageLog, stages: int) -> list[Entry]:
    """The log's entries in canonical order (causal position, received before sent): the
    same for any arrival order of messages, so two honest runs commit the same root."""
    return sorted(log.entries, key=lambda e: (causal_position(e, stages), e.sent))


def log_root(log: StageLog, stages: int) -> bytes:
    """The positional Merkle root (``merkle.py``, as the contracts check it) over a stage's
    log: what a stage commits to for the steps it ran."""
    return merkle_root([entry_leaf(e) for e in log_leaves(log, stages)])


@dataclass(frozen=True)
class Divergence:
    """The first place two runs differ: what stage ``stage`` sent at (step, micro-batch)."""

    step: int
    micro: int
    stage: int
    kind: Kind


def first_divergence(committed: list[StageLog], reference: list[StageLog]) -> Divergence | None:
    """The earliest sent message or checkpoint (in causal order) whose address differs
    between two runs of the same pipeline, or that one of them lacks; None if none does.
    Everything the stage received before it matched, so that stage introduced the difference."""
    stages = len(committed)
    first = None
    for a, b in zip(committed, reference):
        mine, theirs = a.sent(), b.sent()
        for key in set(mine) | set(theirs):
            if mine.get(key) != theirs.get(key):
                entry = Entry(*key, True, b"")
                if first is None or causal_position(entry, stages) < causal_position(first, stages):
                    first = entry
    return None if first is None else Divergence(first.step, first.micro, first.source, first.kind)


def broken_links(logs: list[StageLog]) -> list[tuple[int, Entry]]:
    """``(stage, entry)`` for every message a stage records as received that its source
    stage does not record as sent (the receiver's word against the sender's commitment)."""
    sent = [log.sent() for log in logs]
    return [(log.stage, e) for log in logs for e in log.entries
            if not e.sent and not (0 <= e.source < len(sent) and sent[e.source].get(e.key) == e.hash)]
