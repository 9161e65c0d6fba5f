"""The demo language model three ways, side by side: (a) one process in stock fp32, (b) one
process in repro mode, (c) through the market (``truetrain demo --model lm``: 3 worker and
1 verifier daemons on a devnet). Prints held-out bits per byte by round, wall time and peak
memory of each, checks that (c)'s final checkpoint is (b)'s bit for bit, then the per-step
time of repro against stock for the default-size LM. Run: ``make bench-lm`` (~6 min).
"""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from truetrain.chain.devnet import free_port  # noqa: E402
from truetrain.hashing import keccak256  # noqa: E402
from truetrain.training.checkpoint import checkpoint_hash  # noqa: E402
from truetrain.training import aggregate, run_task  # noqa: E402
from truetrain.training.allocator import keep_freed_memory  # noqa: E402
from truetrain.training.lm_eval import heldout_metrics  # noqa: E402
from truetrain.training.text import encode_text_shard  # noqa: E402


class _LocalStore:
    """Stands in for IPFS: names bytes by their hash (only the hashes enter training)."""

    def add_bytes(self, data: bytes):
        return type("Stored", (), {"cid": "local-" + keccak256(data).hex()[:16]})()


def _local(mode: str) -> dict:
    """Run the demo job's rounds in this process; held-out bits per byte after each."""
    from truetrain.demo.run import demo_manifest

    manifest = demo_manifest(_LocalStore(), "lm")
    if mode == "stock":
        raw = dict(manifest.raw, numeric_mode="stock")
        raw.pop("limbs")
        from truetrain.training import load_manifest

        manifest = load_manifest(raw)
    from truetrain.training.text import demo_corpus, split_text

    shards, held = split_text(demo_corpus(600_000), len(manifest.shards), manifest.model.seq_len)
    blobs, held_blob = [encode_text_shard(s) for s in shards], encode_text_shard(held)
    started, start, curve = time.perf_counter(), None, []
    for r in range(manifest.rounds):
        results = [run_task(manifest, blobs[i], start, i, r) for i in range(len(blobs))]
        start = aggregate(manifest, r, results, start).to_bytes()
        curve.append(heldout_metrics(manifest, start, held_blob)["bits_per_byte"])
    return {"bpb": curve, "wall_s": time.perf_counter() - started, "hash": "0x" + checkpoint_hash(start).hex(),
            "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _child(mode: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--local", mode], check=True, capture_output=True, text=True,
                         cwd=ROOT).stdout
    return json.loads(out.splitlines()[-1])


def market_run(*extra: str) -> tuple[dict, str]:
    """``truetrain demo --model lm [extra]`` on its own ports: its run (held-out curve, wall
    time, final hash) and what it printed."""
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        cli = Path(sys.executable).with_name("truetrain")  # the console script beside this interpreter
        proc = subprocess.run([str(cli), "demo", "--model", "lm", *extra, "--port", str(free_port()),
                               "--ipfs-port", str(free_port()), "--out", tmp, "--down"], cwd=ROOT,
                              capture_output=True, text=True)
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"the market run failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        summary = json.loads((Path(tmp) / "summary.json").read_text())
    job = re.search(r"completed ([0-9.]+) s after its submission", proc.stdout)
    return ({"bpb": [r["test_bits_per_byte"] for r in summary["per_round"]], "wall_s": wall,
             "job_s": float(job.group(1)) if job else float("nan"),
             "hash": summary["final_checkpoint"]["hash"], "rss_mib": float("nan")}, proc.stdout)


def _market() -> dict:
    return market_run()[0]


def _step_ratio(threads: int) -> tuple[float, float]:
    """ms per training step, stock and repro, for the default LM (d256 x 4, batch 8 x 128)."""
    from truetrain.training.gemm_check import engine_for
    from truetrain.training.lm import TransformerLM, lm_init_params, parse_lm_spec
    from truetrain.training.ops import repro_gradients

    torch.set_num_threads(threads)
    spec = parse_lm_spec({"kind": "lm", "d_model": 256, "n_layers": 4, "n_heads": 4, "seq_len": 128})
    params = lm_init_params(spec, 1)
    data = torch.randint(0, 256, (8, 129), generator=torch.Generator().manual_seed(0))
    ids, targets = data[:, :-1], data[:, 1:]
    stock, repro, engine = TransformerLM(spec, params), TransformerLM(spec, params), engine_for("cpu")

    def run_stock():
        stock.zero_grad()
        stock.loss(ids, targets).backward()

    def run_repro():
        repro_gradients(repro, ids, targets, engine, 2)

    best = {}
    for fn in (run_stock, run_repro):
        fn()
    for _ in range(3):  # alternating, best of three
        for name, fn in (("stock", run_stock), ("repro", run_repro)):
            t = time.perf_counter()
            fn()
            best[name] = min(best.get(name, 1e9), time.perf_counter() - t)
    return best["stock"] * 1e3, best["repro"] * 1e3


def main() -> None:
    keep_freed_memory()
    if sys.argv[1:2] == ["--local"]:
        print(json.dumps(_local(sys.argv[2])))
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads by default")
    print("\nThe demo LM (d64 x 2 layers, context 64; 3 text shards x 3 DiLoCo rounds of 30 AdamW steps)")
    runs = {"(a) local stock fp32": _child("stock"), "(b) local repro": _child("repro"), "(c) market, repro": _market()}
    print(f"{'run':24} {'held-out bits per byte by round':>34} {'wall s':>8} {'peak RSS MiB':>13}  final checkpoint")
    for label, r in runs.items():
        curve = " -> ".join(f"{v:.3f}" for v in r["bpb"])
        print(f"{label:24} {curve:>34} {r['wall_s']:8.1f} {r['rss_mib']:13.0f}  {r['hash'][:18]}…")
    stock, repro, market = (runs[k] for k in runs)
    gap = (repro["bpb"][-1] - stock["bpb"][-1]) / stock["bpb"][-1]
    print(f"\nrepro vs stock final held-out loss: {gap:+.2%} (bar: within 2 %); "
          f"market == local repro: {'yes' if market['hash'] == repro['hash'] else 'NO'}")
    print(f"through the market: {market['wall_s']:.1f} s in all ({market['wall_s'] / repro['wall_s']:.1f}x local repro), "
          f"of which the job {market['job_s']:.1f} s from its submission to its completion "
          f"({market['job_s'] / repro['wall_s']:.1f}x); the rest is the devnet, the daemons and the timed replay")
    print("\nPer training step, default LM (d256 x 4 layers, 3.3 M parameters, batch 8 x 128 bytes)")
    print(f"{'threads':>7} {'stock ms':>9} {'repro ms':>9} {'ratio':>6}")
    for threads in (1, 2):
        s, r = _step_ratio(threads)
        print(f"{threads:>7} {s:9.1f} {r:9.1f} {r / s:5.2f}x")


if __name__ == "__main__":
    main()
