"""The hardware profile a participant declares in the CHAIN registry.

The worker reports its GPU with pynvml (device name, memory, utilisation) and falls back to
the CPU when there is no NVIDIA driver. The profile is canonical JSON (sorted keys, no
spaces) so its keccak256 hash, recorded on chain, can be checked against the copy on IPFS.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass

from truetrain.hashing import keccak256

#: Device classes, ordered: a job needing class c runs on any device of class ≥ c.
DEVICE_CPU = 1
DEVICE_CUDA = 2
DEVICE_CLASS_NAMES = {DEVICE_CPU: "cpu", DEVICE_CUDA: "cuda"}


@dataclass(frozen=True)
class HardwareProfile:
    device_class: int
    device_name: str
    memory_mib: int
    throughput_gflops: int
    cpu_count: int
    host: str
    gpus: tuple = ()
    #: The repro GEMM route its self-test chose on the device it trains on ("int8" or
    #: "float64"; empty when it was not checked): same bits either way, another speed.
    gemm_route: str = ""
    #: Where the worker serves the records its pipeline stages post (``truetrain.daemon.mailbox``;
    #: empty: none, and then the key is left out of the JSON).
    mailbox: str = ""
    #: Devices (GPUs, or CPU processes) that train each of its tasks together through
    #: ``torch.distributed`` (truetrain.training.launch): the same bits as one; left out of
    #: the JSON when 1, so a one-device profile (and its hash) reads as before.
    devices: int = 1

    def canonical_json(self) -> bytes:
        fields = asdict(self)
        if not fields["mailbox"]:
            del fields["mailbox"]
        if fields["devices"] == 1:
            del fields["devices"]
        return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()

    def profile_hash(self) -> bytes:
        return keccak256(self.canonical_json())


def _gpus() -> list[dict]:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no NVIDIA driver or library: a CPU-only machine
        return []
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            gpus.append({
                "index": index,
                "name": name.decode() if isinstance(name, bytes) else name,
                "memory_mib": pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024),
                "utilisation_pct": pynvml.nvmlDeviceGetUtilizationRates(handle).gpu,
            })
        return gpus
    finally:
        pynvml.nvmlShutdown()


def _system_memory_mib() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (ValueError, OSError):
        return 0


def measure_gflops(device: str = "cpu", size: int = 512, repeats: int = 3) -> int:
    """Measured float32 matmul throughput in GFLOP/s (best of ``repeats``)."""
    import torch

    a = torch.rand(size, size, device=device)
    b = torch.rand(size, size, device=device)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        (a @ b).sum().item()
        best = min(best, time.perf_counter() - start)
    return max(1, int(2 * size**3 / best / 1e9))


def detect(measure: bool = True, gemm_route: str = "") -> HardwareProfile:
    """Describe this machine: its first NVIDIA GPU when there is one, else its CPU."""
    gpus = _gpus()
    cpu_count = os.cpu_count() or 1
    if gpus:
        first = gpus[0]
        return HardwareProfile(
            DEVICE_CUDA, first["name"], int(first["memory_mib"]),
            measure_gflops("cuda") if measure else 0, cpu_count, platform.node(), tuple(gpus),
            gemm_route,
        )
    return HardwareProfile(
        DEVICE_CPU, platform.processor() or platform.machine(), _system_memory_mib(),
        measure_gflops("cpu") if measure else 0, cpu_count, platform.node(), (), gemm_route,
    )
