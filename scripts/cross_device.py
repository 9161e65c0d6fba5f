"""Train the same repro task on the CPU and on every CUDA device; print the checkpoint hashes.

Twenty steps of the demo model (digits MLP 64-128-10) and of the largest model the project
has (the transformer-sized FFN block 512-2048-512 over 2,048 tokens), at 2 and 3 limbs, on
each device; then the int8 kernel's self-test outcome per device. Then the same tasks, and
a d512 LM, data-parallel across devices (``truetrain.training.launch``): 2 CPU processes on
gloo, and 1, 2, 4, ... GPUs on NCCL up to the CUDA devices present, against the one CPU
process. Exits 1 if any hash differs from the CPU's. Run on a machine with an NVIDIA GPU:
``scripts/cross_device.sh``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from distributed import lm_job  # noqa: E402
from repro_cases import STEPS, Mode, manifest_for, shard_bytes  # noqa: E402
from truetrain.training import task_start, train  # noqa: E402
from truetrain.training.gemm_check import kernel_check  # noqa: E402
from truetrain.training.launch import TrainJob, train_across  # noqa: E402

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
    mismatch |= not across_devices()
    return 1 if mismatch else 0


def across_devices() -> bool:
    """The tasks trained by several ranks (gloo on the CPU, NCCL on the GPUs) against one CPU
    process; True when every hash is the same."""
    jobs = []
    for case in CASES:
        shard = shard_bytes(case.data)
        manifest = manifest_for(case.model, case.batch, shard, Mode("", "repro", 2), STEPS_RUN)
        jobs.append((case.label, TrainJob(manifest, shard, task_start(manifest, None, 0, 0), STEPS_RUN)))
    manifest, shard = lm_job(1)
    jobs.append(("d512 LM 1 layer, batch 8 x 128", TrainJob(manifest, shard, task_start(manifest, None, 0, 0), 5)))
    reference = [train(j.manifest, j.shard, j.checkpoint, j.steps)[0][-1].hash() for _, j in jobs]
    gpus = torch.cuda.device_count()
    runs = [("cpu", 2)] + [("cuda", n) for n in (1, 2, 4, 8, 16) if n <= gpus]
    if not gpus:
        print("no CUDA device: the NCCL world sizes are not run (gloo only)")
    same = True
    for device_type, world in runs:
        results = train_across([j for _, j in jobs], world, device_type)
        for (label, _), want, (ckpts, _) in zip(jobs, reference, results):
            ok = ckpts[-1].hash() == want
            same &= ok
            backend = "nccl" if device_type == "cuda" else "gloo"
            print(f"{label:36} {world} x {device_type} ({backend})  0x{ckpts[-1].hash().hex()[:16]}…  "
                  f"{'same as 1 CPU process' if ok else 'DIFFERENT'}")
    return same


if __name__ == "__main__":
    sys.exit(main())
