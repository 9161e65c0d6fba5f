"""Jobs split by layers on the market (issue 17): stage tasks, their leaves and bundles.

A pipelined manifest (its ``pipeline`` field: S stages) puts ``shards × S`` tasks in each
round on chain (``JobParams.stages = S``): task index ``d × S + s`` is stage s of data
shard d, and the S stages of one shard (a **group**) run at once on different workers,
exchanging activations and gradients (``truetrain.training.pipeline``).

**What a stage task commits to.** Its Merkle root is over ``checkpoint_leaves`` leaves,
as a data-parallel task's is, so the dispute game bisects it unchanged. Leaf k is

    keccak256("TTSTAGE\\0" ‖ stage checkpoint hash at step k·I ‖ segment root k)

where segment root k is the positional Merkle root of the stage's log entries (every
message it received and sent, in canonical order, ``wire.entry_leaf``) of steps
[(k−1)·I, k·I), and zero for k = 0. So a stage that sends something its inputs do not
explain, even with honest parameters (corrupted activations), has a wrong leaf.

**The leaf record** (JSON on IPFS, its CID is what a dispute claim carries): the
checkpoint's hash and CID and the segment's entries; anyone checks it against the leaf.
The **stage bundle** (the revealed CID) lists the leaves (step, checkpoint, leaf hash,
record CID), the whole log and the address → CID index of every message the stage
received or sent, so an auditor can fetch them.

**Whose word counts for inputs.** A stage's honest inputs are what its siblings committed
to having *sent* it (their revealed bundles), not what it says it received: an auditor or
referee replays it on those (:func:`committed_inputs`), so a stage that lies about its
inputs gets a wrong segment root, and a stage fed wrong inputs by a sibling replays clean
(the blame stays with the sibling, whose own replay does not explain what it sent).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from truetrain.errors import ResultInvalid
from truetrain.hashing import from_hex32, keccak256, to_hex32
from truetrain.training.manifest import canonical_json
from truetrain.training.merkle import ZERO, merkle_root
from truetrain.training.pipeline import Entry, Kind, StageLog, entry_leaf, log_leaves

LEAF_MAGIC = b"TTSTAGE\x00"
STAGE_BUNDLE_VERSION = 2


def stage_count(manifest) -> int:
    """How many stages each shard's task is split into (1: not pipelined)."""
    return manifest.pipeline.stages if manifest.pipeline is not None else 1


def aggregation_index(manifest) -> int:
    """The index of a round's aggregation task: after its shards × stages training tasks."""
    return len(manifest.shards) * stage_count(manifest)


def task_place(manifest, index: int) -> tuple[int, int]:
    """(data shard, stage) of task index ``index`` of a round (stage 0 when not pipelined)."""
    return divmod(index, stage_count(manifest))


def group_indices(manifest, index: int) -> list[int]:
    """The task indices of the stages of ``index``'s group (its own included), by stage."""
    stages = stage_count(manifest)
    first = index - index % stages
    return list(range(first, first + stages))


def segment_root(entries) -> bytes:
    """The Merkle root of a segment's log entries (already in canonical order); zero when empty."""
    entries = list(entries)
    return merkle_root([entry_leaf(e) for e in entries]) if entries else ZERO


def leaf_hash(checkpoint_hash: bytes, root: bytes) -> bytes:
    return keccak256(LEAF_MAGIC + bytes(checkpoint_hash) + bytes(root))


def entry_json(e: Entry) -> list:
    return [e.step, int(e.kind), e.micro, e.source, e.sent, to_hex32(e.hash)]


def entry_of(raw) -> Entry:
    step, kind, micro, source, sent, address = raw
    return Entry(int(step), Kind(int(kind)), int(micro), int(source), bool(sent), from_hex32(address))


def segments(log: StageLog, stages: int, interval: int, leaves: int) -> list[list[Entry]]:
    """The log's message entries (no checkpoints) by leaf: segment k holds steps
    [(k−1)·interval, k·interval) in canonical order; segment 0 is empty."""
    out: list[list[Entry]] = [[] for _ in range(leaves)]
    for e in log_leaves(log, stages):
        if e.kind == Kind.CHECKPOINT:
            continue
        k = e.step // interval + 1
        if k >= leaves:
            raise ResultInvalid(f"log entry at step {e.step} is past the task's {leaves - 1} intervals")
        out[k].append(e)
    return out


@dataclass(frozen=True)
class LeafRecord:
    """One leaf's preimage: the stage checkpoint (hash, CID) at ``step`` and the segment's entries."""

    step: int
    checkpoint_hash: bytes
    checkpoint_cid: str
    entries: tuple[Entry, ...]

    @property
    def hash(self) -> bytes:
        return leaf_hash(self.checkpoint_hash, segment_root(self.entries))

    def to_bytes(self) -> bytes:
        return canonical_json({"step": self.step, "checkpoint": {"hash": to_hex32(self.checkpoint_hash),
                                                                 "cid": self.checkpoint_cid},
                               "entries": [entry_json(e) for e in self.entries]})

    @classmethod
    def from_bytes(cls, data: bytes, expected: bytes | None = None) -> LeafRecord:
        """Parse a record; with ``expected``, refuse one whose leaf is not that hash."""
        try:
            raw = json.loads(data)
            record = cls(int(raw["step"]), from_hex32(raw["checkpoint"]["hash"]), str(raw["checkpoint"]["cid"]),
                         tuple(entry_of(e) for e in raw["entries"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ResultInvalid(f"malformed stage leaf record: {exc}") from None
        if expected is not None and record.hash != bytes(expected):
            raise ResultInvalid(f"stage leaf record hashes to {to_hex32(record.hash)}, not {to_hex32(expected)}")
        return record


@dataclass(frozen=True)
class LeafRef:
    step: int
    checkpoint_cid: str
    checkpoint_hash: bytes
    hash: bytes
    cid: str


@dataclass(frozen=True)
class StageBundle:
    """A stage task's published result (see the module docstring)."""

    task_id: int
    round: int
    index: int
    shard: int
    stage: int
    samples: int
    leaves: tuple[LeafRef, ...]
    log: tuple[Entry, ...]
    cids: dict[bytes, str]
    metrics: dict

    @property
    def root(self) -> bytes:
        return merkle_root([leaf.hash for leaf in self.leaves])

    @property
    def final(self) -> LeafRef:
        return self.leaves[-1]

    def stage_log(self) -> StageLog:
        return StageLog(self.stage, list(self.log))

    def trace(self) -> tuple[list[bytes], list[str]]:
        """(leaf hashes, leaf record CIDs): what a party claims in a dispute game."""
        return [leaf.hash for leaf in self.leaves], [leaf.cid for leaf in self.leaves]

    def to_bytes(self) -> bytes:
        return canonical_json({
            "version": STAGE_BUNDLE_VERSION, "kind": "stage", "task_id": str(self.task_id), "round": self.round,
            "index": self.index, "shard": self.shard, "stage": self.stage, "samples": self.samples,
            "metrics": self.metrics,
            "leaves": [{"step": leaf.step, "checkpoint": {"cid": leaf.checkpoint_cid,
                                                          "hash": to_hex32(leaf.checkpoint_hash)},
                        "hash": to_hex32(leaf.hash), "cid": leaf.cid} for leaf in self.leaves],
            "log": [entry_json(e) for e in self.log],
            "cids": {to_hex32(a): c for a, c in sorted(self.cids.items())},
        })

    @staticmethod
    def is_stage(data: bytes) -> bool:
        """Whether ``data`` is a stage bundle (not a data-parallel task's result bundle)."""
        try:
            raw = json.loads(data)
        except ValueError:
            return False
        return isinstance(raw, dict) and raw.get("kind") == "stage"

    @classmethod
    def from_bytes(cls, data: bytes, expected_root: bytes | None = None) -> StageBundle:
        """Parse a stage bundle; with ``expected_root``, refuse one whose leaves do not hash to it."""
        try:
            raw = json.loads(data)
            if raw.get("version") != STAGE_BUNDLE_VERSION or raw.get("kind") != "stage":
                raise ResultInvalid(f"not a stage bundle (version {raw.get('version')!r}, kind {raw.get('kind')!r})")
            leaves = tuple(LeafRef(int(x["step"]), str(x["checkpoint"]["cid"]), from_hex32(x["checkpoint"]["hash"]),
                                   from_hex32(x["hash"]), str(x["cid"])) for x in raw["leaves"])
            bundle = cls(int(raw["task_id"]), int(raw["round"]), int(raw["index"]), int(raw["shard"]),
                         int(raw["stage"]), int(raw["samples"]), leaves, tuple(entry_of(e) for e in raw["log"]),
                         {from_hex32(a): str(c) for a, c in raw["cids"].items()}, dict(raw.get("metrics", {})))
        except ResultInvalid:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ResultInvalid(f"malformed stage bundle: {exc}") from None
        if not bundle.leaves:
            raise ResultInvalid("stage bundle lists no leaves")
        if expected_root is not None and bundle.root != bytes(expected_root):
            raise ResultInvalid(f"stage bundle of task {bundle.task_id} commits to root {to_hex32(bundle.root)}, "
                                f"but {to_hex32(expected_root)} was revealed on chain")
        return bundle


def stage_leaf_records(log: StageLog, checkpoint_refs: dict[int, tuple[str, bytes]], *, stages: int,
                       interval: int, leaves: int) -> list[LeafRecord]:
    """The leaf records of a stage run: ``checkpoint_refs`` maps each checkpoint step
    (0, I, 2I, … K) to its (CID, hash)."""
    by_segment = segments(log, stages, interval, leaves)
    records = []
    for k in range(leaves):
        step = k * interval
        if step not in checkpoint_refs:
            raise ResultInvalid(f"no stage checkpoint at step {step}")
        cid, digest = checkpoint_refs[step]
        records.append(LeafRecord(step, digest, cid, tuple(by_segment[k])))
    return records


def is_input(entry: Entry, index: int, stages: int, partner: int | None) -> bool:
    """Whether a message sent by another stage is addressed to stage ``index``."""
    if entry.kind == Kind.ACT:
        return entry.source == index - 1
    if entry.kind == Kind.GRAD:
        return entry.source == index + 1
    if entry.kind == Kind.TIED:
        return entry.source == partner
    return entry.kind in (Kind.NORM_MAX, Kind.NORM_SUM) and entry.source != index and 0 <= entry.source < stages


def committed_inputs(index: int, stages: int, partner: int | None, siblings: dict[int, StageBundle]) -> StageLog:
    """Stage ``index``'s inputs as its siblings committed to sending them (their bundles'
    sent entries addressed to it), as the received entries of a log to replay it on."""
    log = StageLog(index)
    for stage in sorted(siblings):
        for e in siblings[stage].log:
            if e.sent and e.kind != Kind.CHECKPOINT and is_input(e, index, stages, partner):
                log.add(Entry(e.step, e.kind, e.micro, e.source, False, e.hash))
    return log
