"""truetrain.daemon.devices: where each of a worker's concurrent tasks trains."""

from __future__ import annotations

import os

import torch

from truetrain.daemon.devices import DevicePool, _bus_key, choose_gpu


def test_chooseGpu_idleFirst_thenMostFreeMemory_thenLowestIndex():
    free = {0: 8 << 30, 1: 20 << 30, 2: 20 << 30}
    assert choose_gpu(free, {}) == 1  # most free memory, lowest index among equals
    assert choose_gpu(free, {1: 1}) == 2
    assert choose_gpu(free, {1: 1, 2: 1}) == 0  # the busy ones wait, however much memory they have
    assert choose_gpu(free, {0: 1, 1: 1, 2: 1}) == 1


def test_pciBusIds_ofNvmlAndTorch_compareEqual():
    assert _bus_key("00000000:3B:00.0") == _bus_key("0:3b:0") == (0, 0x3B, 0)


def test_cpuPool_splitsTheThreads_andHandsOutTheCpu():
    before = torch.get_num_threads()
    try:
        pool = DevicePool("cpu", 2)
        assert torch.get_num_threads() == max(1, (os.cpu_count() or 1) // 2)
        with pool.acquire() as first, pool.acquire() as second:
            assert (first, second) == ("cpu", "cpu")
        assert DevicePool("cuda:1", 4).slots == 4
        with DevicePool("cuda:1", 4).acquire() as named:
            assert named == "cuda:1"  # a named device is always that device
    finally:
        torch.set_num_threads(before)
