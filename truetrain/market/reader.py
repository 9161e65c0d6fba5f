"""Verified reads of what a task needs: manifest, shard, start checkpoint, round results.

Everything is found from the chain (views and logs) and fetched from IPFS with the hash
the chain or the manifest recorded (a checkpoint's is its commitment, checked on the decoded
checkpoint: :meth:`MarketReader.fetch_checkpoint`; anything else's keccak256 of its bytes), so a worker, a verifier and a submitter that use this
reader see the same, checked inputs. Logs are looked up by indexed job or task id; results
are cached per process because they never change once on chain (the latest reveal of a task
wins, which is the one that was finalized).
"""

from __future__ import annotations

from dataclasses import dataclass

from truetrain.errors import ResultInvalid, UnknownJob
from truetrain.training import Contribution, Manifest, load_manifest
from truetrain.training.checkpoint import fetch_checkpoint

from .codes import decode_task_id, encode_task_id
from .results import ResultBundle
from .stages import StageBundle, aggregation_index, stage_count, task_place
from .views import JobView, TaskView

#: Largest object a reader fetches (checkpoints, shards, manifests).
MAX_OBJECT_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Reveal:
    """A task's latest ``ResultRevealed``: who revealed what, and in which block."""

    task_id: int
    worker: str
    root: bytes
    cid: str
    block: int


class MarketReader:
    """Reads the market through ``contracts`` (a :class:`~truetrain.chain.handles.Contracts`)
    and the content it names through ``store`` (a :class:`~truetrain.storage.StorageClient`)."""

    def __init__(self, contracts, store, *, max_bytes: int = MAX_OBJECT_BYTES, from_block: int = 0):
        self.contracts = contracts
        self.market = contracts["market"]
        self.store = store
        self.max_bytes = max_bytes
        self.from_block = from_block
        self._manifests: dict[int, Manifest] = {}
        #: inputs fetched ahead (``hold``): CID → (hash, bytes), and the CIDs each task holds
        self._held: dict[str, tuple[bytes, bytes]] = {}
        self._held_by: dict[int, list[str]] = {}

    # --- chain views --------------------------------------------------------------

    def job(self, job_id: int) -> JobView:
        """The job, or :class:`UnknownJob`."""
        job = JobView.read(self.market, job_id)
        if not job.exists:
            raise UnknownJob(f"no job {job_id} on the market at {self.market.address}")
        return job

    def task(self, task_id: int) -> TaskView:
        return TaskView.read(self.market, task_id)

    def _logs(self, event: str, **filters) -> list:
        found = getattr(self.market.events, event)().get_logs(from_block=self.from_block, argument_filters=filters)
        return sorted(found, key=lambda e: (e["blockNumber"], e["logIndex"]))

    def job_created(self, job_id: int):
        logs = self._logs("JobCreated", jobId=job_id)
        if not logs:
            raise UnknownJob(f"no job {job_id} on the market at {self.market.address}")
        return logs[-1]

    def reveal(self, task_id: int) -> Reveal | None:
        """The task's latest reveal, or None before any."""
        logs = self._logs("ResultRevealed", taskId=task_id)
        if not logs:
            return None
        args = logs[-1]["args"]
        return Reveal(task_id, args["worker"], bytes(args["root"]), args["resultCid"], logs[-1]["blockNumber"])

    def current_reveal(self, task_id: int) -> Reveal | None:
        """The task's latest reveal if it belongs to its latest offer (None: not revealed in
        this attempt: a task sent back and drawn again has not revealed since)."""
        revealed, offered = self.reveal(task_id), self.offered_block(task_id)
        return revealed if revealed is not None and offered is not None and revealed.block >= offered else None

    def offered_block(self, task_id: int) -> int | None:
        """The block the task's latest offer (``TaskDrawn``) was made in, or None before any."""
        logs = self._logs("TaskDrawn", taskId=task_id)
        return logs[-1]["blockNumber"] if logs else None

    def rounds_advanced(self, job_id: int) -> dict[int, tuple[str, bytes]]:
        """Rounds done → the (CID, hash) of the global checkpoint after them."""
        return {e["args"]["round"]: (e["args"]["checkpointCid"], bytes(e["args"]["checkpointHash"]))
                for e in self._logs("RoundAdvanced", jobId=job_id)}

    # --- verified content ---------------------------------------------------------

    def fetch(self, cid: str, expected_hash: bytes) -> bytes:
        """Content other than a checkpoint, checked against the keccak256 of its bytes."""
        held = self._held.get(cid)
        if held is not None and held[0] == bytes(expected_hash):
            return held[1]
        return self.store.fetch(cid, expected_hash, max_size=self.max_bytes)

    def fetch_checkpoint(self, cid: str, expected_hash: bytes) -> bytes:
        """A checkpoint's bytes, decoded and checked against its checkpoint hash
        (:class:`~truetrain.errors.ContentMismatch` otherwise)."""
        held = self._held.get(cid)
        if held is not None and held[0] == bytes(expected_hash):
            return held[1]
        return fetch_checkpoint(self.store, cid, expected_hash, max_size=self.max_bytes)

    def manifest(self, job_id: int) -> Manifest:
        """The job's manifest, checked against the hash the job recorded."""
        if job_id not in self._manifests:
            args = self.job_created(job_id)["args"]
            data = self.fetch(args["manifestCid"], bytes(args["manifestHash"]))
            self._manifests[job_id] = load_manifest(data)
        return self._manifests[job_id]

    def shard(self, job_id: int, index: int) -> bytes:
        ref = self.manifest(job_id).shards[index]
        return self.fetch(ref.cid, ref.hash)

    def test_set(self, job_id: int) -> bytes:
        ref = self.manifest(job_id).test_set
        return self.fetch(ref.cid, ref.hash)

    def round_start(self, job_id: int, round_index: int) -> bytes | None:
        """The global checkpoint round ``round_index`` trains from (None: initialise from the seed)."""
        ref = self._start_ref(job_id, round_index)
        return self.fetch_checkpoint(*ref) if ref else None

    def _start_ref(self, job_id: int, round_index: int) -> tuple[str, bytes] | None:
        if round_index == 0:
            initial = self.manifest(job_id).initial_checkpoint
            return (initial.cid, initial.hash) if initial else None
        advanced = self.rounds_advanced(job_id)
        if round_index not in advanced:
            raise ResultInvalid(f"job {job_id} has not finished round {round_index - 1} yet")
        return advanced[round_index]

    def input_refs(self, task_id: int) -> tuple[list[tuple[str, bytes]], tuple[str, bytes] | None]:
        """The (CID, hash) of what training task ``task_id`` reads of its job's data: its
        shards (a stage's, where the stage reads it: the first and the last) and the
        checkpoint its round starts from (None: initialised from the seed). Nothing for an
        aggregation task: it reads the round's results."""
        job_id, round_index, index = decode_task_id(task_id)
        manifest = self.manifest(job_id)
        if index >= aggregation_index(manifest):
            return [], None
        shard_index, stage = task_place(manifest, index)
        refs = []
        if stage in (0, stage_count(manifest) - 1):
            ref = manifest.shards[shard_index]
            refs.append((ref.cid, ref.hash))
        return refs, self._start_ref(job_id, round_index)

    def hold(self, task_id: int) -> None:
        """Fetch and verify task ``task_id``'s inputs (``input_refs``) now and keep them, so
        that computing it later fetches nothing again (``release`` drops them). Raises what
        ``fetch`` raises."""
        cids = []
        shards, start = self.input_refs(task_id)
        for (cid, expected), fetch in [(r, self.fetch) for r in shards] + [(start, self.fetch_checkpoint)] * bool(start):
            if cid not in self._held:
                self._held[cid] = (bytes(expected), fetch(cid, expected))
            cids.append(cid)
        self._held_by[task_id] = cids

    def release(self, task_id: int) -> None:
        """Drop the inputs ``hold`` kept for task ``task_id`` (those no other held task keeps)."""
        for cid in self._held_by.pop(task_id, []):
            if not any(cid in cids for cids in list(self._held_by.values())):
                self._held.pop(cid, None)

    def result(self, task_id: int) -> ResultBundle:
        """A training task's revealed bundle, checked against its revealed root."""
        return self._bundle(task_id, self.reveal(task_id), ResultBundle, "result bundle")

    def is_stage_task(self, task_id: int) -> bool:
        """Whether ``task_id`` is a stage of a pipelined job's shard (not its aggregation)."""
        job_id, _, index = decode_task_id(task_id)
        manifest = self.manifest(job_id)
        return manifest.pipeline is not None and index < len(manifest.shards) * manifest.pipeline.stages

    def trace(self, task_id: int) -> tuple[list[bytes], list[str]]:
        """The leaf hashes and CIDs of the task's revealed bundle (a training task's checkpoints,
        a stage task's leaf records), checked against its revealed root."""
        if self.is_stage_task(task_id):
            return self.stage_result(task_id).trace()
        bundle = self.result(task_id)
        return [c.hash for c in bundle.checkpoints], [c.cid for c in bundle.checkpoints]

    def stage_result(self, task_id: int) -> StageBundle:
        """A stage task's revealed bundle of its current attempt, checked against its revealed root."""
        return self._bundle(task_id, self.current_reveal(task_id), StageBundle, "stage bundle")

    def _bundle(self, task_id: int, revealed: Reveal | None, kind, what: str):
        """The bundle ``revealed`` names, parsed as ``kind`` against its revealed root, for ``task_id``."""
        if revealed is None:
            raise ResultInvalid(f"task {task_id} has no revealed result"
                                + (" in its current attempt" if kind is StageBundle else ""))
        bundle = kind.from_bytes(self.fetch_bundle(revealed.cid), revealed.root)
        if bundle.task_id != task_id:
            raise ResultInvalid(f"{what} at {revealed.cid} is for task {bundle.task_id}, not {task_id}")
        return bundle

    def fetch_bundle(self, cid: str) -> bytes:
        # The bundle's own hash is not on chain; its content is checked against the root.
        return self.store.fetch_unverified(cid, max_size=self.max_bytes)

    def contributions(self, job_id: int, round_index: int) -> list[Contribution]:
        """Round ``round_index``'s verified shard results, ready for ``aggregate`` (a
        pipelined job's: each shard's stage checkpoints merged into the whole model)."""
        job = self.job(job_id)
        manifest = self.manifest(job_id)
        if manifest.pipeline is not None:
            from .stage_run import merged_contribution

            return [merged_contribution(self, job_id, round_index, d) for d in range(len(manifest.shards))]
        out = []
        for index in range(job.shards):
            bundle = self.result(encode_task_id(job_id, round_index, index))
            final = self.fetch_checkpoint(bundle.final.cid, bundle.final.hash)
            out.append(Contribution(index, bundle.samples, final))
        return out

    def final_checkpoint(self, job_id: int) -> tuple[str, bytes, bytes]:
        """(CID, hash, bytes) of the job's current global checkpoint (the final one once completed)."""
        job = self.job(job_id)
        if not job.checkpoint_cid:
            raise ResultInvalid(f"job {job_id} has no global checkpoint yet (round {job.current_round})")
        return job.checkpoint_cid, job.checkpoint_hash, self.fetch_checkpoint(job.checkpoint_cid, job.checkpoint_hash)
