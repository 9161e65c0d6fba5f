"""Run a repro training across the devices of one machine, one process per rank.

``train_across(jobs, world, "cpu")`` spawns ``world`` processes (``torch.multiprocessing``,
spawn), which join one ``torch.distributed`` group (gloo on CPU, NCCL with ``"cuda"``:
rank ``r`` on ``cuda:r``) and train each job with :class:`~.distributed.ShardedRun`; rank
0 hands back the checkpoints and losses, which are those of one process bit for bit.

The rendezvous is a ``TCPStore`` that this (parent) process holds on a free loopback port
(port 0: the system picks it, so nothing races for it) and the ranks join as clients. A
world of 1 trains here, in this process, through the same sharded step (no group to
join). A rank's :class:`~truetrain.errors.TruetrainError` (a diverged loss, a refused
world size) is raised here as itself; any other failure as a :class:`TrainingError`.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Callable

import torch

from ..errors import TrainingError, TruetrainError
from .checkpoint import Checkpoint, decode_checkpoint
from .distributed import Comm, ShardedRun, check_shardable
from .gemm_check import engine_for
from .manifest import load_manifest
from .trainer import as_checkpoint, as_shard

DEVICE_TYPES = ("cpu", "cuda")
#: How long a rank waits for the others at the rendezvous or in a collective.
TIMEOUT = timedelta(minutes=30)


@dataclass(frozen=True)
class TrainJob:
    """One training to run across the ranks: :func:`~.trainer.train`'s arguments (the
    shard as its encoded bytes)."""

    manifest: object
    shard: bytes
    checkpoint: bytes
    steps: int
    every: int | None = None
    micro_batch: int | None = None


def train_across(jobs: list[TrainJob], world: int, device_type: str = "cpu") -> list[tuple[list[Checkpoint], list]]:
    """Each job's ``(checkpoints, losses)`` as :func:`~.trainer.train` returns them,
    trained by ``world`` ranks (one launch for all the jobs)."""
    encoded = [_encoded(job) for job in jobs]
    for job in encoded:  # refused here, before any rank starts
        check_shardable(job.manifest, world)
    # CPU ranks share this process's CPU: they take the engine it self-tested (or was told to
    # use) rather than each testing the kernel again; a GPU rank tests its own device.
    engine = engine_for("cpu") if device_type == "cpu" else None
    results = run_ranks(train_jobs, (encoded, engine), world, device_type)
    return [([decode_checkpoint(c) for c in ckpts], losses) for ckpts, losses in results]


def train_distributed(manifest, shard, ckpt, steps: int, *, world: int, device_type: str = "cpu",
                      every: int | None = None, micro_batch: int | None = None):
    """:func:`~.trainer.train` across ``world`` ranks: the same ``(checkpoints, losses)``."""
    return train_across([TrainJob(manifest, shard, ckpt, steps, every, micro_batch)], world, device_type)[0]


def _encoded(job: TrainJob) -> TrainJob:
    """The job with its inputs as plain bytes (what a spawned rank is sent)."""
    return TrainJob(load_manifest(job.manifest), bytes(job.shard), as_checkpoint(job.checkpoint).to_bytes(),
                    job.steps, job.every, job.micro_batch)


def train_jobs(comm: Comm, device: str, payload) -> list[tuple[list[bytes], list]]:
    """Run on every rank: each job of ``payload`` (jobs, GEMM engine or None: the device's)
    as :func:`~.trainer.train` runs it; rank 0's checkpoints (encoded) and losses."""
    jobs, engine = payload
    out = []
    for job in jobs:
        if job.steps < 0:
            raise TrainingError("steps must be >= 0")
        every = job.every or job.steps or 1
        ckpt = decode_checkpoint(job.checkpoint)
        run = ShardedRun(job.manifest, as_shard(job.shard, job.manifest), ckpt, comm, device=device,
                         micro_batch=job.micro_batch, engine=engine)
        checkpoints, losses = [job.checkpoint], []
        for i in range(1, job.steps + 1):
            run.run_step()
            if i % every == 0 or i == job.steps:
                losses.append(run.take_losses())  # a collective: every rank
                if comm.rank == 0:
                    checkpoints.append(run.checkpoint().to_bytes())
        out.append((checkpoints, losses))
    return out


def run_ranks(target: Callable, payload, world: int, device_type: str = "cpu"):
    """``target(comm, device, payload)`` on ``world`` ranks; rank 0's return value.

    ``target`` must be importable by name (a module-level function): spawned ranks
    import it."""
    if device_type not in DEVICE_TYPES:
        raise TrainingError(f"device type must be one of {', '.join(DEVICE_TYPES)}, got {device_type!r}")
    if world < 1:
        raise TrainingError(f"a world of {world} devices: at least 1")
    if device_type == "cuda" and world > torch.cuda.device_count():
        raise TrainingError(f"{world} CUDA devices asked for, {torch.cuda.device_count()} present")
    if world == 1:
        return target(Comm(0, 1), "cuda:0" if device_type == "cuda" else "cpu", payload)
    import torch.distributed as dist
    import torch.multiprocessing as mp

    store = dist.TCPStore("127.0.0.1", 0, world + 1, is_master=True, wait_for_workers=False, timeout=TIMEOUT)
    with tempfile.TemporaryDirectory(prefix="truetrain-ranks-") as tmp:
        out = Path(tmp)
        try:
            mp.start_processes(_rank_main, args=(world, store.port, device_type, target, payload, str(out)),
                               nprocs=world, join=True, start_method="spawn")
        except Exception as exc:  # a rank failed: the others were stopped
            errors = sorted(out.glob("error-*"))
            if errors:
                raise pickle.loads(errors[0].read_bytes()) from None
            raise TrainingError(f"a rank of {world} failed: {str(exc).strip().splitlines()[-1]}") from None
        return pickle.loads((out / "result").read_bytes())


def _rank_main(rank: int, world: int, port: int, device_type: str, target: Callable, payload, out: str) -> None:
    """A spawned rank: join the group, run ``target``, rank 0 writes what it returns."""
    import torch.distributed as dist

    if device_type == "cuda":
        device, backend = f"cuda:{rank}", "nccl"
        torch.cuda.set_device(rank)
    else:  # the cores shared out between the ranks (repro bits do not depend on threads)
        device, backend = "cpu", "gloo"
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    store = dist.TCPStore("127.0.0.1", port, world + 1, is_master=False, timeout=TIMEOUT)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=TIMEOUT)
    try:
        result = target(Comm(rank, world), device, payload)
        if rank == 0:
            Path(out, "result").write_bytes(pickle.dumps(result))
    except TruetrainError as exc:
        Path(out, f"error-{rank:04d}").write_bytes(pickle.dumps(exc))
        raise
    finally:
        dist.destroy_process_group()
