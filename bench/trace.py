"""A step's trace against the step (issue 28's bar: building the trace, with every output's
root, takes at most 3x a plain step): for the digits MLP (batch 32), the default LM
(d256 x 4 layers, 4 heads, batch 8 x 128, AdamW clipped) and the demo LM (d64 x 2 layers,
context 64, AdamW lr 0.004 warm-up 10: ``truetrain/demo/run.py``), the best-of-several time of a plain repro step
(``TrainRun.run_step``, as a worker runs it) and of ``build_trace`` from the same
checkpoint, their ratio, the share of the trace's time spent on tensor roots, and each
one's peak memory (VmHWM of a child process that does only that). Run:
``python bench/trace.py`` (``--model lm`` for one model; ``--profile lm`` prints where the
trace's time goes, by kind)."""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from truetrain.errors import TraceError  # noqa: E402
from truetrain.hashing import keccak256, to_hex32  # noqa: E402
from truetrain.trace import build_trace, derive  # noqa: E402
from truetrain.training import tensor_roots as roots  # noqa: E402
from truetrain.training import build_manifest, prepare_dataset, task_start  # noqa: E402
from truetrain.training.trainer import TrainRun, as_shard  # noqa: E402

REPEATS = 5


def _ref(data: bytes, samples: int) -> dict:
    return {"cid": "bafk" + keccak256(data).hex()[:24], "hash": to_hex32(keccak256(data)), "samples": samples}


MODELS = ["mlp", "lm", "demo"]


def job(model: str):
    """(manifest, shard bytes) of the benchmarked job."""
    if model in ("lm", "demo"):
        from truetrain.demo.run import LM_MODEL
        from truetrain.training.text import TEXT_MAGIC, demo_corpus, encode_text_shard

        shard = encode_text_shard(demo_corpus(200_000))
        spec = {"kind": "lm", "d_model": 256, "n_layers": 4, "n_heads": 4, "seq_len": 128}
        optimizer = {"kind": "adamw", "lr": 0.004}
        if model == "demo":  # truetrain/demo/run.py's LM job (batch 8)
            spec, optimizer = LM_MODEL, {"kind": "adamw", "lr": 0.004, "warmup_steps": 10}
        ref = _ref(shard, len(shard) - len(TEXT_MAGIC))
        return build_manifest(name=f"bench-trace-{model}", seed=3, numeric_mode="repro", model=spec,
                              optimizer=optimizer, batch_size=8, steps_per_task=30, checkpoint_interval=30,
                              rounds=3, shards=[ref], test_set=ref), shard
    shards, test = prepare_dataset("digits", num_shards=1, seed=3)
    from truetrain.training import decode_shard

    return build_manifest(name="bench-trace-mlp", seed=3, numeric_mode="repro",
                          model={"kind": "mlp", "widths": [64, 128, 10]},
                          optimizer={"kind": "sgd", "lr": 0.1, "momentum": 0.9}, batch_size=32, steps_per_task=1,
                          checkpoint_interval=1, rounds=1, shards=[_ref(shards[0], len(decode_shard(shards[0])))],
                          test_set=_ref(test, len(decode_shard(test)))), shards[0]


def measure(model: str, what: str) -> dict:
    """``time``: best-of-REPEATS wall and CPU seconds (all threads) of a plain step and of a
    trace build, alternating in this process (the shared machine's load moves between
    runs); ``step`` / ``trace``: one run after a warm-up, for its peak memory alone."""
    manifest, shard_bytes = job(model)
    shard = as_shard(shard_bytes, manifest)
    ckpt = task_start(manifest, None, 0, 0)
    program = derive(manifest, lr_step=0)
    best = {k: float("inf") for k in ("step", "trace", "step_cpu", "trace_cpu")}
    hashing = 0.0
    for i in range(REPEATS + 1 if what == "time" else 2):  # the first run warms kernels up, untimed
        for kind in ("step", "trace") if what == "time" else (what,):
            run = TrainRun(manifest, shard, ckpt) if kind == "step" else None
            roots.SECONDS = 0.0
            wall, cpu = time.perf_counter(), time.process_time()
            if run is not None:
                run.run_step()
            else:
                build_trace(manifest, shard, ckpt, program=program)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            if i and wall < best[kind]:
                best[kind] = wall
                hashing = roots.SECONDS if kind == "trace" else hashing
            if i:
                best[kind + "_cpu"] = min(best[kind + "_cpu"], cpu)
    peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    hashed = sum(math.prod(a.shape) * 4 * a.words for a in program.entries)
    return {**best, "roots_s": hashing, "peak_mib": int(peak.split()[1]) / 1024, "entries": len(program),
            "mb": hashed / 1e6}


def profile(model: str) -> None:
    """Seconds by kind (evaluation and root) of one trace build, after a warm-up build."""
    from truetrain.trace import builder, kinds

    manifest, shard_bytes = job(model)
    shard, ckpt = as_shard(shard_bytes, manifest), task_start(manifest, None, 0, 0)
    program = derive(manifest, lr_step=0)
    build_trace(manifest, shard, ckpt, program=program)
    spent: dict[str, float] = {}
    evaluate, root = kinds.evaluate, builder.tensor_root

    def timed_evaluate(index, app, ins, ctx):
        start = time.perf_counter()
        out = evaluate(index, app, ins, ctx)
        spent[app.kind] = spent.get(app.kind, 0.0) + time.perf_counter() - start
        return out

    def timed_root(t):
        start = time.perf_counter()
        out = root(t)
        spent["(roots)"] = spent.get("(roots)", 0.0) + time.perf_counter() - start
        return out

    builder.evaluate, builder.tensor_root = timed_evaluate, timed_root
    start = time.perf_counter()
    build_trace(manifest, shard, ckpt, program=program)
    total = time.perf_counter() - start
    builder.evaluate, builder.tensor_root = evaluate, root
    print(f"{model}: {len(program)} entries, {total * 1e3:.0f} ms")
    for kind, sec in sorted(spent.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:20} {sec * 1e3:8.1f} ms")
    print(f"  {'(rest)':20} {(total - sum(spent.values())) * 1e3:8.1f} ms")


def child(model: str, what: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", model, what], capture_output=True, text=True,
                         check=True, timeout=1800)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=MODELS, action="append")
    parser.add_argument("--profile", choices=MODELS, help="seconds by kind of one trace build")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(*args.child)))
        return
    if args.profile:
        profile(args.profile)
        return
    print(f"{'model':6} {'entries':>7} {'MB':>6} {'step ms':>8} {'trace ms':>8} {'ratio':>6} {'step cpu':>8} "
          f"{'trace cpu':>9} {'ratio':>6} {'roots ms':>8} {'step MiB':>8} {'trace MiB':>9}")
    for model in args.model or MODELS:
        try:
            derive(job(model)[0])
        except TraceError as exc:
            print(f"{model:6} not derived yet: {exc}")
            continue
        t, step, trace = child(model, "time"), child(model, "step"), child(model, "trace")
        print(f"{model:6} {t['entries']:>7} {t['mb']:>6.0f} {t['step'] * 1e3:>8.1f} {t['trace'] * 1e3:>8.1f} "
              f"{t['trace'] / t['step']:>5.1f}x {t['step_cpu'] * 1e3:>8.1f} {t['trace_cpu'] * 1e3:>9.1f} "
              f"{t['trace_cpu'] / t['step_cpu']:>5.1f}x {t['roots_s'] * 1e3:>8.1f} {step['peak_mib']:>8.0f} "
              f"{trace['peak_mib']:>9.0f}")


if __name__ == "__main__":
    main()
