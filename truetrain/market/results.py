"""What a worker publishes for a training task, and how a reader checks it against the chain.

A training task's revealed CID names a *result bundle*: canonical JSON listing the CID and
checkpoint hash (training/checkpoint.py) of every checkpoint the worker's Merkle root commits to (steps 0, I, 2I, ... K),
the samples trained and the loss curve. A reader trusts nothing in it until the Merkle
root of the listed hashes equals the root revealed on chain; each checkpoint it then
fetches is checked against its listed hash. An aggregation task's revealed CID is the
aggregated checkpoint itself and its root is that checkpoint's hash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from truetrain.errors import ResultInvalid
from truetrain.hashing import from_hex32, to_hex32
from truetrain.training import TaskResult, merkle_root
from truetrain.training.manifest import canonical_json

BUNDLE_VERSION = 1


@dataclass(frozen=True)
class CheckpointRef:
    step: int
    cid: str
    hash: bytes


@dataclass(frozen=True)
class ResultBundle:
    """A training task's published result (see the module docstring)."""

    task_id: int
    round: int
    index: int
    samples: int
    checkpoints: tuple[CheckpointRef, ...]
    metrics: dict

    @property
    def root(self) -> bytes:
        return merkle_root([c.hash for c in self.checkpoints])

    @property
    def final(self) -> CheckpointRef:
        return self.checkpoints[-1]

    def to_bytes(self) -> bytes:
        return canonical_json({
            "version": BUNDLE_VERSION, "task_id": str(self.task_id), "round": self.round,
            "index": self.index, "samples": self.samples, "metrics": self.metrics,
            "checkpoints": [{"step": c.step, "cid": c.cid, "hash": to_hex32(c.hash)} for c in self.checkpoints],
        })

    @classmethod
    def from_bytes(cls, data: bytes, expected_root: bytes | None = None) -> ResultBundle:
        """Parse a bundle; with ``expected_root``, refuse one whose checkpoints do not hash to it."""
        try:
            raw = json.loads(data)
            if raw.get("version") != BUNDLE_VERSION:
                raise ResultInvalid(f"result bundle version {raw.get('version')!r} is not {BUNDLE_VERSION}")
            refs = tuple(CheckpointRef(int(c["step"]), str(c["cid"]), from_hex32(c["hash"]))
                         for c in raw["checkpoints"])
            bundle = cls(int(raw["task_id"]), int(raw["round"]), int(raw["index"]), int(raw["samples"]),
                         refs, dict(raw.get("metrics", {})))
        except ResultInvalid:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            raise ResultInvalid(f"malformed result bundle: {exc}") from None
        if not bundle.checkpoints:
            raise ResultInvalid("result bundle lists no checkpoints")
        if expected_root is not None and bundle.root != expected_root:
            raise ResultInvalid(
                f"result bundle of task {bundle.task_id} commits to root {to_hex32(bundle.root)}, "
                f"but {to_hex32(expected_root)} was revealed on chain"
            )
        return bundle


def publish_result(store, task_id: int, result: TaskResult, interval: int) -> tuple[str, ResultBundle]:
    """Upload every checkpoint of ``result`` and its bundle; return the bundle's CID and the bundle.

    ``interval`` is the manifest's checkpoint interval (checkpoint i is at step i × interval,
    the last at the task's final step).
    """
    refs = []
    steps = int(result.metrics.get("steps", interval * (len(result.checkpoints) - 1)))
    for i, blob in enumerate(result.checkpoints):
        stored = store.add_bytes(blob)
        refs.append(CheckpointRef(min(i * interval, steps), stored.cid, result.checkpoint_hashes[i]))
    loss = result.metrics.get("train_loss", [])
    metrics = {"final_train_loss": result.metrics.get("final_train_loss"),
               "mean_train_loss": (sum(loss) / len(loss)) if loss else None,
               "steps": steps, "numeric_mode": result.metrics.get("numeric_mode")}
    bundle = ResultBundle(task_id, result.round, result.shard_index, result.samples_trained, tuple(refs), metrics)
    return store.add_bytes(bundle.to_bytes()).cid, bundle
