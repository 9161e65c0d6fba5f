"""The checkpoint hash before and after it became the state commitment (issue 28's wiring,
docs/checkpoint-format.md): for the digits MLP (SGD with momentum) and the default LM
(d256 x 4 layers, AdamW: moments, beta powers, ``lr_step``), each checkpoint's size and the
best-of-several milliseconds of

* the old hash, keccak256 of the canonical bytes (encoding them first, as ``Checkpoint.hash``
  did; on fetched bytes the keccak alone);
* the new one, ``checkpoint_hash``: the layout hash and the tensors' roots (the C kernel of
  ``truetrain/training/tensor_roots.py``), no encoding; on fetched bytes a decode first.

Run ``python bench/ckpt_hash.py`` (the checkpoints are the jobs' task starts, built as
bench/trace.py builds its jobs; hashing time does not depend on the values)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.trace import job  # noqa: E402
from truetrain.hashing import keccak256  # noqa: E402
from truetrain.training import tensor_roots as roots  # noqa: E402
from truetrain.training import checkpoint_hash, decode_checkpoint, task_start  # noqa: E402

REPEATS = 7


def best_ms(fn) -> float:
    """The fastest of REPEATS calls of ``fn``, after one untimed warm-up (kernels built)."""
    fn()
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def measure(model: str) -> dict:
    manifest, _ = job(model)
    ckpt = task_start(manifest, None, 0, 0)
    data = ckpt.to_bytes()
    out = {"tensors": len(ckpt.tensors), "mb": len(data) / 1e6,
           "old": best_ms(lambda: keccak256(ckpt.to_bytes())), "old_bytes": best_ms(lambda: keccak256(data)),
           "new": best_ms(lambda: checkpoint_hash(ckpt)), "new_bytes": best_ms(lambda: checkpoint_hash(decode_checkpoint(data)))}
    roots.SECONDS = 0.0
    checkpoint_hash(ckpt)
    out["roots"] = roots.SECONDS * 1e3
    return out


def main() -> None:
    print("| checkpoint | tensors | MB | old: keccak(encode) ms | new: commitment ms (roots) | "
          "fetched bytes, old: keccak ms | fetched bytes, new: decode + commitment ms |")
    print("|---|---|---|---|---|---|---|")
    for model, label in (("mlp", "digits MLP (SGD, momentum)"), ("lm", "default LM (d256 x 4, AdamW)")):
        r = measure(model)
        print(f"| {label} | {r['tensors']} | {r['mb']:.2f} | {r['old']:.1f} | {r['new']:.1f} ({r['roots']:.1f}) | "
              f"{r['old_bytes']:.1f} | {r['new_bytes']:.1f} |")


if __name__ == "__main__":
    main()
