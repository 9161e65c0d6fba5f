"""Train the same repro task on the CPU and on every CUDA device; print the checkpoint hashes.

Twenty steps of the demo model (digits MLP 64-128-10) and of the largest model the project
has (the transformer-sized FFN block 512-2048-512 over 2,048 tokens), at 2 and 3 limbs, on
each device; then the int8 kernel's self-test outcome per device. Exits 1 if any hash
differs from the CPU's. Run on a machine with an NVIDIA GPU: ``scripts/cross_device.sh``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from repro_cases import STEPS, Mode, manifest_for, shard_bytes  # noqa: E402
from truetrain.training import task_start, train  # noqa: E402
from truetrain.training.gemm_check import kernel_check  # noqa: E402

CASES = (STEPS[0], STEPS[3])
STEPS_RUN = 20


def main() -> int:
    devices = ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if len(devices) == 1:
        print("no CUDA device: printing CPU hashes only")
    for device in devices:
        check = kernel_check(device)
        print(f"{device:8} GEMM route {check.route} ({check.reason})")
    mismatch = False
    for case in CASES:
        shard = shard_bytes(case.data)
        for limbs in (2, 3):
            manifest = manifest_for(case.model, case.batch, shard, Mode("", "repro", limbs), STEPS_RUN)
            hashes = {}
            for device in devices:
                ckpts, _ = train(manifest, shard, task_start(manifest, None, 0, 0), STEPS_RUN, device=device)
                hashes[device] = ckpts[-1].hash().hex()
            same = len(set(hashes.values())) == 1
            mismatch |= not same
            cells = "  ".join(f"{d} 0x{h[:16]}…" for d, h in hashes.items())
            print(f"{case.label:36} L={limbs}  {cells}  {'same' if same else 'DIFFERENT'}")
    return 1 if mismatch else 0


if __name__ == "__main__":
    sys.exit(main())
