"""Deliberately wrong results, computed by the named faulty worker and verifier of the
adversarial tests (``TRUETRAIN_FAULT``, see ``truetrain.daemon.faults``). Each is a real
training run with one thing done wrong, so its checkpoints are plausible and its Merkle
root proves against them: only re-execution can tell.

* ``perturbed`` — honest training up to the checkpoint at ``step`` (rounded down to the
  checkpoint interval, at least the first one), whose model is then nudged; training goes
  on honestly from there;
* ``lazy`` — the start checkpoint returned as every checkpoint, no training at all;
* ``wrong_start`` — honest training from a wrong checkpoint 0 (the model nudged before step 1);
* ``flip-element`` — one element of one operator's output flipped in one step, the rest
  honest from there (``faulty_step``: the cheat that plays its dispute to the one-step);
* ``corrupt_messages`` — a pipeline stage's tamper that nudges every activation (``ACT``)
  and gradient (``GRAD``) it sends from ``step`` on (its own parameters stay honest: only a
  replay of what it *sent* catches it);
* ``WithholdingStore`` — publishing that names content without uploading it.
"""

from __future__ import annotations

import base64
import hashlib

from truetrain.hashing import keccak256
from truetrain.storage.models import StoredObject
from truetrain.training import TaskResult
from truetrain.training.checkpoint import Checkpoint
from truetrain.training.merkle import merkle_root
from truetrain.training.task import task_start
from truetrain.training.trainer import as_shard, train

from .codes import decode_task_id

NUDGE = 1e-2


def corrupt_messages(from_step: int):
    """A :data:`~truetrain.training.pipeline.stage.Tamper` that nudges outgoing activations and gradients."""
    from dataclasses import replace

    from truetrain.training.pipeline import Kind

    def tamper(message):
        if message.kind not in (Kind.ACT, Kind.GRAD) or message.step < from_step:
            return message
        return replace(message, tensors={k: v + NUDGE for k, v in message.tensors.items()})

    return tamper


def nudged(ckpt: Checkpoint) -> Checkpoint:
    """The same checkpoint with the first weight of its first model tensor moved by NUDGE."""
    tensors = {k: v.clone() for k, v in ckpt.tensors.items()}
    name = sorted(k for k in tensors if k.startswith("model."))[0]
    tensors[name].view(-1)[0] += NUDGE
    return Checkpoint(ckpt.step, ckpt.rng_key, tensors)


def _result(index: int, round_index: int, checkpoints: list[Checkpoint], manifest) -> TaskResult:
    encoded = [c.to_bytes() for c in checkpoints]
    hashes = [c.hash() for c in checkpoints]
    metrics = {"train_loss": [0.0], "final_train_loss": 0.0, "steps": manifest.steps_per_task,
               "numeric_mode": manifest.numeric_mode}
    return TaskResult(index, round_index, hashes, merkle_root(hashes), encoded,
                      manifest.steps_per_task * manifest.batch_size, metrics)


def faulty_result(reader, task_id: int, cheat: str, arg: str | None = None, *, device=None) -> TaskResult:
    """Task ``task_id``'s result computed with ``cheat`` ("perturb-step", "lazy", "wrong-start", "flip-element")."""
    job_id, round_index, index = decode_task_id(task_id)
    manifest = reader.manifest(job_id)
    shard = as_shard(reader.shard(job_id, index), manifest)
    start = task_start(manifest, reader.round_start(job_id, round_index), index, round_index)
    interval, steps = manifest.checkpoint_interval, manifest.steps_per_task
    if cheat == "lazy":
        return _result(index, round_index, [start] * manifest.checkpoint_leaves, manifest)
    if cheat == "flip-element":
        from .faulty_step import FlipCheat

        return _result(index, round_index, FlipCheat.parse(arg).train(manifest, shard, start, steps, device)[::interval],
                       manifest)
    if cheat == "wrong-start":
        checkpoints, _ = train(manifest, shard, nudged(start), steps, every=interval, device=device)
        return _result(index, round_index, checkpoints, manifest)
    at = min(max(int(arg or steps) // interval, 1), manifest.checkpoint_leaves - 1) * interval
    honest, _ = train(manifest, shard, start, at, every=interval, device=device)
    rest, _ = train(manifest, shard, nudged(honest[-1]), steps - at, every=interval, device=device)
    return _result(index, round_index, honest[:-1] + rest, manifest)


def unpublished_cid(data: bytes) -> str:
    """The CIDv1 (raw leaf, sha2-256) of ``data``: a real name for content that is never added
    anywhere, which is what a withholding worker reveals."""
    digest = hashlib.sha256(data).digest()
    raw = bytes([0x01, 0x55, 0x12, 0x20]) + digest
    return "b" + base64.b32encode(raw).decode().lower().rstrip("=")


class WithholdingStore:
    """Stands in for the storage client of a worker that commits to content it never
    uploads: ``add_bytes`` names the data and keeps it to itself."""

    def add_bytes(self, data: bytes, pin: bool = True) -> StoredObject:
        data = bytes(data)
        return StoredObject(cid=unpublished_cid(data), hash=keccak256(data), size=len(data))
