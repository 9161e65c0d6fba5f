"""Which device each of a worker's concurrent computations trains on.

A worker declaring ``max_concurrent`` N runs up to N tasks at once (the contracts assign it
no more). On a CPU the N share the cores: torch's thread pool is cut to cores / N, so
they do not oversubscribe the machine (repro bits do not depend on threads). With
``--device cuda`` on a host of several GPUs each computation takes the GPU running the
fewest of this worker's tasks, ties going to the most free memory as NVML reports it
(matched to torch's numbering by PCI bus id); a named device (``cuda:1``, ``cpu``) is
always that device.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger("truetrain.daemon")


def choose_gpu(free: dict[int, int], busy: dict[int, int]) -> int:
    """The GPU index to use: fewest of our computations on it, then most free bytes, then
    the lowest index."""
    return min(free, key=lambda i: (busy.get(i, 0), -free[i], i))


def gpu_free_memory() -> dict[int, int]:
    """Free bytes of every GPU torch sees, by torch's index (NVML's figures; torch's own
    ``mem_get_info`` where NVML cannot be read); empty without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return {}
    count = torch.cuda.device_count()
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            by_bus = {}
            for n in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(n)
                bus = pynvml.nvmlDeviceGetPciInfo(handle).busId
                bus = bus.decode() if isinstance(bus, bytes) else bus
                by_bus[_bus_key(bus)] = int(pynvml.nvmlDeviceGetMemoryInfo(handle).free)
        finally:
            pynvml.nvmlShutdown()
        free = {}
        for i in range(count):
            p = torch.cuda.get_device_properties(i)
            free[i] = by_bus[_bus_key(f"{p.pci_domain_id:x}:{p.pci_bus_id:x}:{p.pci_device_id:x}")]
        return free
    except Exception:  # no NVML, or a device it does not list: ask CUDA itself
        return {i: int(torch.cuda.mem_get_info(i)[0]) for i in range(count)}


def _bus_key(bus: str) -> tuple[int, int, int]:
    """(domain, bus, device) of a PCI id such as ``00000000:3B:00.0``."""
    domain, bus_no, rest = bus.split(":")
    return int(domain, 16), int(bus_no, 16), int(rest.split(".")[0], 16)


class DevicePool:
    """Hands each concurrent computation its device (see the module's text)."""

    def __init__(self, device: str, slots: int):
        self.device, self.slots = device, slots
        self._busy: dict[int, int] = {}
        self._lock = threading.Lock()
        if device == "cpu" and slots > 1:
            import torch

            threads = max(1, (os.cpu_count() or 1) // slots)
            torch.set_num_threads(threads)
            log.info("cpu: up to %d tasks at once, %d threads each", slots, threads)

    @contextmanager
    def acquire(self) -> Iterator[str]:
        if self.device != "cuda":
            yield self.device
            return
        free = gpu_free_memory()
        if not free:
            yield self.device
            return
        with self._lock:
            index = choose_gpu(free, self._busy)
            self._busy[index] = self._busy.get(index, 0) + 1
        try:
            yield f"cuda:{index}"
        finally:
            with self._lock:
                self._busy[index] -= 1
