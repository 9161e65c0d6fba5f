"""Repro mode against stock PyTorch, side by side in one run: per GEMM, per training step,
whole training runs and peak memory.

Modes: stock float32; repro on the float64 route (the fallback); repro on the int8 engine
at 2 and 3 limbs as a worker runs it (large tensors' elementwise steps compiled), and at 2
limbs with everything eager (``--no-gemm-fuse``). Times are the best of
several blocks, the modes alternating block by block so that load from other processes
hits them alike; ratios are repro over stock. Run: ``make bench-repro`` (``python
bench/repro.py --steps``: the training-step table alone).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import torch

from repro_cases import GEMMS, MODES, STEPS, Mode, manifest_for, shard_bytes  # sets sys.path first
from truetrain.training import decode_shard, evaluate, prepare_dataset, task_start, train
from truetrain.training.allocator import keep_freed_memory
from truetrain.training.intgemm import quantize
from truetrain.training.trainer import TrainRun

REPRO = MODES[1:]
THREADS = (1, 2)


def best_ms(fns: dict, repeats: int = 5, inner: int = 3) -> dict:
    """Best-of-``repeats`` ms per call of each function, alternating."""
    for fn in fns.values():
        fn()
    best = {k: float("inf") for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            start = time.perf_counter()
            for _ in range(inner):
                fn()
            best[k] = min(best[k], (time.perf_counter() - start) / inner * 1e3)
    return best


def _gemm_fn(mode: Mode, a, b):
    if mode.numeric_mode == "stock":
        return lambda: a @ b
    engine = mode.engine()
    return lambda: engine.matmul(quantize(a, 1, mode.limbs, fuse=mode.fuse), quantize(b, 0, mode.limbs, fuse=mode.fuse))


def gemm_table() -> None:
    print("\nGEMM, from float32 operands to the float32 product (repro: quantise, limbs, integer "
          "sums, one rounding)")
    head = " ".join(f"{m.label:>10}" for m in REPRO)
    print(f"{'product':30} {'M x K x N':>16} thr {'stock ms':>8}  {head}   rel. error vs float64: "
          + " ".join(f"{m.label:>10}" for m in REPRO))
    gen = torch.Generator().manual_seed(0)
    for label, m, k, n in GEMMS:
        a, b = torch.randn(m, k, generator=gen), torch.randn(k, n, generator=gen)
        ref = a.double() @ b.double()
        errors = []
        for mode in REPRO:
            out = _gemm_fn(mode, a, b)().double()
            errors.append(float((out - ref).abs().max() / ref.abs().max()))
        stock_err = float(((a @ b).double() - ref).abs().max() / ref.abs().max())
        for t in THREADS:
            torch.set_num_threads(t)
            ms = best_ms({mode.label: _gemm_fn(mode, a, b) for mode in MODES})
            stock = ms[MODES[0].label]
            ratios = " ".join(f"{ms[m.label] / stock:9.2f}x" for m in REPRO)
            tail = ("   " + " ".join(f"{e:10.1e}" for e in errors) + f"  (stock {stock_err:.1e})") if t == 1 else ""
            print(f"{label:30} {f'{m}x{k}x{n}':>16} {t:>3} {stock:8.3f}  {ratios}{tail}")


def _run(case, mode: Mode, shard: bytes) -> TrainRun:
    manifest = manifest_for(case.model, case.batch, shard, mode, case.steps)
    run = TrainRun(manifest, decode_shard(shard), task_start(manifest, None, 0, 0), engine=mode.engine())
    run.run_step()
    return run


def _steps(run: TrainRun, steps: int):
    def go():
        for _ in range(steps):
            run.run_step()
        run.take_losses()
    return go


def step_table() -> None:
    print("\nTraining step (batch, forward, loss, backward, SGD momentum update), ms per step")
    head = " ".join(f"{m.label:>10}" for m in REPRO)
    print(f"{'model':36} {'batch':>5} thr {'stock ms':>8}  {head}")
    for case in STEPS:
        shard = shard_bytes(case.data)
        for t in THREADS:
            torch.set_num_threads(t)
            runs = {mode.label: _run(case, mode, shard) for mode in MODES}
            per = {k: v / case.steps for k, v in best_ms(
                {k: _steps(r, case.steps) for k, r in runs.items()}, repeats=3, inner=1).items()}
            stock = per[MODES[0].label]
            ratios = " ".join(f"{per[m.label] / stock:9.2f}x" for m in REPRO)
            print(f"{case.label:36} {case.batch:>5} {t:>3} {stock:8.2f}  {ratios}")


def quality_table() -> None:
    print("\nWhole training runs on digits (held-out accuracy, mean train loss of the last 50 steps)")
    shards, test = prepare_dataset("digits", num_shards=1, seed=11)
    jobs = [("MLP 64-128-10, SGD, 400 steps", {"kind": "mlp", "widths": [64, 128, 10]},
             {"kind": "sgd", "lr": 0.1, "momentum": 0.9}, 400),
            ("CNN [8,16] k3, Adam, 200 steps", STEPS[1].model, {"kind": "adam", "lr": 0.003}, 200)]
    print(f"{'job':34} " + " ".join(f"{m.label:>18}" for m in MODES))
    for label, model, optimizer, steps in jobs:
        cells = []
        for mode in MODES:
            manifest = manifest_for(model, 64, shards[0], mode, steps, optimizer=optimizer)
            ckpts, losses = train(manifest, shards[0], task_start(manifest, None, 0, 0), steps, every=50)
            acc = evaluate(manifest, ckpts[-1], test)
            cells.append(f"{acc * 100:6.2f} % {losses[-1]:7.4f}")
        print(f"{label:34} " + " ".join(f"{c:>18}" for c in cells))


def _rss_child(case_index: int, mode_index: int) -> None:
    case, mode = STEPS[case_index], MODES[mode_index]
    run = _run(case, mode, shard_bytes(case.data))
    _steps(run, case.steps)()
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across fork and exec
    peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print(json.dumps({"maxrss_kib": int(peak.split()[1])}))


def memory_table() -> None:
    print("\nPeak RSS of a process that trains the case (MiB), each mode in its own process")
    print(f"{'model':36} " + " ".join(f"{m.label:>10}" for m in MODES))
    for ci, case in enumerate(STEPS):
        cells = []
        for mi in range(len(MODES)):
            out = subprocess.run([sys.executable, __file__, "--rss", str(ci), str(mi)], check=True,
                                 capture_output=True, text=True).stdout
            cells.append(json.loads(out.splitlines()[-1])["maxrss_kib"] / 1024)
        print(f"{case.label:36} " + " ".join(f"{c:10.0f}" for c in cells))


def main() -> None:
    keep_freed_memory()  # stock and repro alike: large buffers reused, not faulted in anew
    if sys.argv[1:2] == ["--rss"]:
        _rss_child(int(sys.argv[2]), int(sys.argv[3]))
        return
    steps_only = sys.argv[1:2] == ["--steps"]  # the per-step table alone (a quick look at the ratios)
    threads = torch.get_num_threads()
    print(f"torch {torch.__version__}, CPU {torch.backends.cpu.get_cpu_capability()}, "
          f"{threads} threads by default, load average {os.getloadavg()[0]:.2f}")
    try:
        if not steps_only:
            gemm_table()
        step_table()
    finally:
        torch.set_num_threads(threads)
    if not steps_only:
        quality_table()
        memory_table()


if __name__ == "__main__":
    main()
