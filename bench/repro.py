"""Milliseconds per training step, stock vs repro numeric mode, side by side.

One step = batch selection, forward, loss, backward and optimizer update (SGD with
momentum 0.9), timed through the trainer's ``TrainRun.run_step`` on CPU with torch's
default thread count. Run: ``make bench-repro`` or ``python bench/repro.py``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from truetrain.hashing import keccak256, to_hex32  # noqa: E402
from truetrain.training import build_manifest, decode_shard, encode_shard, prepare_dataset, \
    task_start  # noqa: E402
from truetrain.training.trainer import TrainRun  # noqa: E402

CASES = [
    ("digits MLP 64-128-10", {"kind": "mlp", "widths": [64, 128, 10]}, 64, "digits"),
    ("digits MLP 64-256-128-10", {"kind": "mlp", "widths": [64, 256, 128, 10]}, 64, "digits"),
    ("synthetic MLP 784-256-256-10", {"kind": "mlp", "widths": [784, 256, 256, 10]}, 64,
     "synthetic"),
    ("synthetic MLP 784-256-256-10", {"kind": "mlp", "widths": [784, 256, 256, 10]}, 128,
     "synthetic"),
    ("digits CNN 1x8x8 [8,16] k3", {"kind": "cnn", "in_shape": [1, 8, 8], "channels": [8, 16],
                                    "kernel": 3, "classes": 10}, 64, "digits"),
]


def _shard(kind: str) -> bytes:
    if kind == "digits":
        return prepare_dataset("digits", num_shards=1, seed=1)[0][0]
    rng = np.random.default_rng(0)
    return encode_shard(rng.random((4096, 784), dtype=np.float32), rng.integers(0, 10, 4096))


def _run(model, batch, shard_bytes, mode, steps) -> TrainRun:
    ref = {"cid": "bench", "hash": to_hex32(keccak256(shard_bytes)),
           "samples": len(decode_shard(shard_bytes))}
    m = build_manifest(name="bench", seed=1, model=model, numeric_mode=mode,
                       optimizer={"kind": "sgd", "lr": 0.01, "momentum": 0.9},
                       batch_size=batch, steps_per_task=steps, checkpoint_interval=steps,
                       rounds=1, shards=[ref], test_set={"cid": "bench", "hash": ref["hash"]})
    run = TrainRun(m, decode_shard(shard_bytes), task_start(m, None, 0, 0))
    for _ in range(10):
        run.run_step()
    return run


def _block_ms(run: TrainRun, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        run.run_step()
    run.take_losses()
    return (time.perf_counter() - start) / steps * 1e3


def _ms_per_step(model, batch, shard_bytes, steps, repeats=5):
    """Best-of-``repeats`` ms per step for stock and repro, timed in alternating blocks
    so that load from other processes hits both alike."""
    runs = {mode: _run(model, batch, shard_bytes, mode, steps) for mode in ("stock", "repro")}
    best = {mode: float("inf") for mode in runs}
    for _ in range(repeats):
        for mode, run in runs.items():
            best[mode] = min(best[mode], _block_ms(run, steps))
    return best["stock"], best["repro"]


def main() -> None:
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU")
    print(f"{'model':32} {'batch':>5} {'stock ms':>9} {'repro ms':>9} {'ratio':>6}")
    shards = {}
    for name, model, batch, data in CASES:
        shard = shards.setdefault(data, _shard(data))
        steps = 50 if data == "digits" else 20
        stock, repro = _ms_per_step(model, batch, shard, steps)
        print(f"{name:32} {batch:>5} {stock:9.3f} {repro:9.3f} {repro / stock:5.2f}x")


if __name__ == "__main__":
    main()
