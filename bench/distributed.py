"""A repro LM step across 1, 2 and 4 ranks (truetrain.training.launch) against one process.

The model is a d512 byte-level LM (``--layers`` x 8 heads, batch 8 x 128 bytes, adamw, 2
limbs). Each row: the ranks, the torch threads each had, the best step of ``--steps``
after a warm-up step (which compiles the large tensors' kernels in each fresh rank), the
speed-up against one process training the whole batch with every core (the one-device
worker's step; timed before and after the ranks' runs, the better kept, since a shared
machine's load drifts), the bytes each rank all-reduced per step (column maxima, then the exact
int64 gradient sums) and rank 0's final checkpoint hash (equal on every row, or the run
says so). CPU ranks use gloo; ``--cuda`` runs the ranks on GPUs with NCCL (one each).

    python bench/distributed.py                  # ranks 1, 2, 4 on the CPU
    python bench/distributed.py --worlds 1,2 --layers 1 --steps 2
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from truetrain.hashing import keccak256, to_hex32  # noqa: E402
from truetrain.training import build_manifest, task_start  # noqa: E402
from truetrain.training.distributed import Comm, ShardedRun  # noqa: E402
from truetrain.training.gemm_check import engine_for  # noqa: E402
from truetrain.training.launch import run_ranks  # noqa: E402
from truetrain.training.text import TextShard, demo_corpus, encode_text_shard  # noqa: E402
from truetrain.training.trainer import TrainRun  # noqa: E402


def lm_job(layers: int):
    """(manifest, shard bytes) of the benchmarked LM."""
    shard = encode_text_shard(demo_corpus(200_000))
    ref = {"cid": "bench", "hash": to_hex32(keccak256(shard)), "samples": len(TextShard.from_bytes(shard))}
    manifest = build_manifest(name="bench-d512", seed=1, numeric_mode="repro",
                              model={"kind": "lm", "d_model": 512, "n_layers": layers, "n_heads": 8, "seq_len": 128},
                              optimizer={"kind": "adamw", "lr": 0.001, "warmup_steps": 2}, batch_size=8,
                              steps_per_task=100, checkpoint_interval=100, rounds=1, shards=[ref],
                              test_set={"cid": "bench", "hash": ref["hash"]})
    return manifest, shard


def timed_steps(run, steps: int, comm: Comm | None = None) -> tuple[float, int]:
    """(best seconds of ``steps`` steps after one warm-up, bytes all-reduced per step)."""
    run.run_step()
    before = comm.reduced_bytes if comm else 0
    best = float("inf")
    for _ in range(steps):
        if comm is not None and comm.world > 1:
            torch.distributed.barrier()
        start = time.perf_counter()
        run.run_step()
        if run.device.type == "cuda":
            torch.cuda.synchronize(run.device)
        best = min(best, time.perf_counter() - start)
    moved = (comm.reduced_bytes - before) // steps if comm else 0
    return best, moved


def rank_target(comm: Comm, device: str, payload) -> dict:
    """On every rank: the sharded run's best step, bytes per step and final hash."""
    manifest, shard, steps = payload
    run = ShardedRun(manifest, TextShard.from_bytes(shard), task_start(manifest, None, 0, 0), comm, device=device)
    best, moved = timed_steps(run, steps, comm)
    return {"seconds": best, "bytes": moved, "threads": torch.get_num_threads(),
            "hash": run.checkpoint().hash().hex()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", default="1,2,4", help="comma-separated rank counts [1,2,4]")
    parser.add_argument("--layers", type=int, default=2, help="transformer layers [2]")
    parser.add_argument("--steps", type=int, default=3, help="timed steps after the warm-up [3]")
    parser.add_argument("--cuda", action="store_true", help="ranks on GPUs (NCCL) instead of CPU processes")
    args = parser.parse_args()
    device_type = "cuda" if args.cuda else "cpu"
    device = "cuda:0" if args.cuda else "cpu"
    manifest, shard = lm_job(args.layers)
    engine_for(device)  # self-tested before any timing
    plain = TrainRun(manifest, TextShard.from_bytes(shard), task_start(manifest, None, 0, 0), device=device)
    base, _ = timed_steps(plain, args.steps)
    base_hash = plain.checkpoint().hash().hex()
    rows = [(world, run_ranks(rank_target, (manifest, shard, args.steps), world, device_type))
            for world in (int(w) for w in args.worlds.split(","))]
    base = min(base, timed_steps(plain, args.steps)[0])
    print(f"d512 LM, {args.layers} layers x 8 heads, batch 8 x 128 bytes, repro L=2, adamw; {device_type}, "
          f"{os.cpu_count()} cores, torch {torch.__version__}; best of {args.steps} steps after a warm-up")
    print(f"{'ranks':>15} {'threads/rank':>12} {'ms/step':>9} {'speed-up':>9} {'all-reduced/step':>17}  final hash")
    print(f"{'1 (one process)':>15} {torch.get_num_threads():>12} {base * 1e3:>9.0f} {1.0:>8.2f}x "
          f"{0:>17,}  0x{base_hash[:16]}")
    same = True
    for world, out in rows:
        same &= out["hash"] == base_hash
        print(f"{world:>15} {out['threads']:>12} {out['seconds'] * 1e3:>9.0f} {base / out['seconds']:>8.2f}x "
              f"{out['bytes']:>17,}  0x{out['hash'][:16]}")
    print("final checkpoints: " + ("the same bits at every rank count" if same else "DIFFERENT"))
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
