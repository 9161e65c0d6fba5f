"""A pipelined repro LM step against the single-process one (issue 17): the default LM
(d256 x 4 layers, context 128, batch 8) split into 3 stages by parameter count, run in
one process with the GPipe schedule. Prints wall time per step, the bytes stages send
each other per step (by kind), each stage's parameter and optimizer memory against the
whole model's, and whether the two runs' checkpoints agree bit for bit.

Then, with ``--market``, the demo LM through the market split into 3 stages
(``truetrain demo --model lm --stages 3``: each of 3 shards' stages on 3 worker daemons, a
sampling verifier) against the same job trained whole in one process: wall time, held-out
bits per byte by round, the bytes the stages sent each other (from their published
bundles) and whether the final checkpoints agree bit for bit.

Run: ``make bench-pipeline`` (both) or ``python bench/pipeline.py [--steps N] [--threads T] [--market]``
(~1 min on 2 cores, ~5 min with ``--market``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from truetrain.hashing import keccak256, to_hex32  # noqa: E402
from truetrain.training import build_manifest, task_start  # noqa: E402
from truetrain.training.pipeline import (MessageStore, Stage, merge_checkpoints, pipeline_step,  # noqa: E402
                                         split_by_params, stage_checkpoint)
from truetrain.training.text import TextShard, demo_corpus, encode_text_shard, split_text  # noqa: E402
from truetrain.training.trainer import TrainRun  # noqa: E402

MODEL = {"kind": "lm", "d_model": 256, "n_layers": 4, "n_heads": 4, "seq_len": 128}


def _manifest(blob: bytes, held: bytes):
    def ref(data: bytes) -> dict:
        return {"cid": "bafk" + keccak256(data).hex()[:24], "hash": to_hex32(keccak256(data)),
                "samples": len(TextShard.from_bytes(data))}

    return build_manifest(name="bench-pipeline", seed=5, model=MODEL,
                          optimizer={"kind": "adamw", "lr": 0.001, "warmup_steps": 2},
                          batch_size=8, steps_per_task=100, checkpoint_interval=100, rounds=1,
                          shards=[ref(blob)], test_set=ref(held))


def _timed(runs: dict, steps: int) -> dict:
    """Median ms per call of each of ``runs`` (name -> step function), after one warm-up
    call each; the cases take turns, so a load that comes and goes hits them alike."""
    times: dict = {name: [] for name in runs}
    for fn in runs.values():
        fn()
    for _ in range(steps):
        for name, fn in runs.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {name: sorted(v)[len(v) // 2] * 1e3 for name, v in times.items()}


def _bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _market() -> None:
    """The demo LM in 3 stages through the market, against one process training it whole."""
    from bench.lm import market_run

    market, printed = market_run("--stages", "3")
    moved = [line for line in printed.splitlines() if "sent between stages" in line]
    local = json.loads(subprocess.run([sys.executable, str(ROOT / "bench" / "lm.py"), "--local", "repro"], check=True,
                                      capture_output=True, text=True, cwd=ROOT).stdout.splitlines()[-1])
    print("\nThe demo LM (d64 x 2 layers, 3 text shards x 3 DiLoCo rounds of 30 AdamW steps), repro")
    print(f"{'run':34} {'held-out bits per byte by round':>34} {'wall s':>7}  final checkpoint")
    for label, r in (("one process, whole model", local), ("market, 3 stages on 3 workers", market)):
        curve = " -> ".join(f"{v:.3f}" for v in r["bpb"])
        print(f"{label:34} {curve:>34} {r['wall_s']:7.1f}  {r['hash'][:18]}…")
    print(f"market in stages == one process, bit for bit: {'yes' if market['hash'] == local['hash'] else 'NO'}")
    for line in moved:
        print(line.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--market", action="store_true", help="also run the demo LM in 3 stages through the market")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    shards, held = split_text(demo_corpus(200_000), 1, seq_len=MODEL["seq_len"])
    blob = encode_text_shard(shards[0])
    manifest = _manifest(blob, encode_text_shard(held))
    shard = TextShard.from_bytes(blob)
    start = task_start(manifest, None, 0, 0)
    plan = split_by_params(manifest.model, 3)
    print(f"torch {torch.__version__}, {args.threads} threads; LM d256 x 4 layers, batch 8 x 128 bytes, "
          f"AdamW with clipping; 3 stages: " + " | ".join("+".join(plan.units_of(s)) for s in range(3)))

    single = TrainRun(manifest, shard, start)
    split = TrainRun(manifest, shard, start, micro_batch=2)  # one machine, the same 4 micro-batches
    runs, pipelines = {"single process": single.run_step, "single, 4 micro-batches": split.run_step}, {}
    for micro in (1, 4):
        store = MessageStore()
        stages = [Stage(manifest, plan, s, stage_checkpoint(start, plan, s), shard, store, micro_batches=micro,
                        checkpoint_every=10**9) for s in range(3)]
        pipelines[micro] = (stages, store)
        runs[f"3 stages, {micro} micro-batch{'es' if micro > 1 else ''}"] = (lambda st: lambda: pipeline_step(st))(stages)
    ms = _timed(runs, args.steps)
    want = single.checkpoint().hash()
    same = all(merge_checkpoints([s.checkpoint() for s in stages]).hash() == want for stages, _ in pipelines.values())
    same = same and split.checkpoint().hash() == want
    moved = [None, None] + [{k: v / (args.steps + 1) for k, v in store.moved.items()} for _, store in pipelines.values()]
    rows = [(label, ms[label], sent) for label, sent in zip(runs, moved)]
    print(f"\n{'run':28} {'ms/step':>8} {'vs single':>9}  bytes sent between stages per step")
    base = rows[0][1]
    for label, ms, moved in rows:
        detail = "" if moved is None else ", ".join(f"{k.name.lower()} {v / 1024:,.1f} KiB" for k, v in
                                                    sorted(moved.items())) + f"; total {sum(moved.values()) / 2**20:.2f} MiB"
        print(f"{label:28} {ms:8.1f} {ms / base:8.2f}x  {detail}")
    print(f"checkpoints after {args.steps + 1} steps equal the single process's, bit for bit: {'yes' if same else 'NO'}"
          f"\n(M micro-batches: each stage runs its M backwards twice, observing the batch's maxima, then adding,"
          f" as one machine does with micro-batches)")

    whole_p = _bytes(single.params.values())
    whole_o = _bytes(single.state.values())
    print(f"\n{'holder':16} {'parameters':>11} {'param MiB':>10} {'optim MiB':>10} {'share':>7}")
    print(f"{'whole model':16} {sum(p.numel() for p in single.params.values()):11,} {whole_p / 2**20:10.2f} "
          f"{whole_o / 2**20:10.2f} {1:7.0%}")
    for s, stage in enumerate(stages):
        p, o = _bytes(stage.params.values()), _bytes(stage.state.values())
        print(f"{'stage ' + str(s):16} {sum(t.numel() for t in stage.params.values()):11,} {p / 2**20:10.2f} "
              f"{o / 2**20:10.2f} {(p + o) / (whole_p + whole_o):7.0%}")
    print(f"\n(a whole batch's activations at one cut: 8 x 128 x 256 float32 = {8 * 128 * 256 * 4 / 2**20:.2f} MiB; "
          f"activations and gradients cross each of the 2 cuts, the tied gradient and the norm parts once a step)")
    if args.market:
        _market()


if __name__ == "__main__":
    main()
