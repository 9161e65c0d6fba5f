"""Tensor roots for a trace, in the layout of :mod:`truetrain.numerics.tensor_merkle`.

A trace hashes every output of a step (a default-LM step: hundreds of tensors, the largest
16,384 leaves): the tree in Python (a keccak call per node) takes longer than the step, so
the root is one C call (``root_kernel.c``), compiled on first use with the system compiler
into the engine's kernel cache (as :mod:`truetrain.training.native` does) and checked
against :class:`~truetrain.numerics.tensor_merkle.TensorTree` on tensors of 1 to 200
leaves before it is used. Without a compiler, or when a root differs, the Python tree
gives the roots (logged once): the same roots, slower."""

from __future__ import annotations

import ctypes
import logging
import subprocess
import threading
import time
from pathlib import Path

import torch

from ..numerics.tensor_merkle import CHUNK_BYTES, TensorTree, chunked
from ..training.native import build_library

log = logging.getLogger(__name__)
SOURCE = Path(__file__).with_name("root_kernel.c")
FLAGS = ["-O3", "-funroll-loops", "-std=c11", "-shared", "-fPIC", "-fopenmp"]

#: seconds spent in :func:`tensor_root` since it was last reset (bench/trace.py reads it)
SECONDS = 0.0
_lock = threading.Lock()
_state: dict[str, object] = {}


def _build() -> ctypes.CDLL:
    target = build_library("tensor-root", [SOURCE], FLAGS)
    lib = ctypes.CDLL(str(target))
    lib.tt_tensor_root.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_char_p]
    lib.tt_tensor_root.restype = ctypes.c_int
    return lib


def _c_root(lib, data: bytes) -> bytes:
    out = ctypes.create_string_buffer(32)
    if lib.tt_tensor_root(data, len(data) // CHUNK_BYTES, out) != 0:
        raise MemoryError("tt_tensor_root: no memory for the tree")
    return out.raw


def _kernel():
    """The C kernel, or None (built and checked once a process)."""
    if "lib" not in _state:
        with _lock:
            if "lib" not in _state:
                lib = None
                try:
                    lib = _build()
                    gen = torch.Generator().manual_seed(28)
                    for n in (1, 64, 65, 200 * 64 - 3, 3 * 64 + 1):
                        t = torch.randn(n, generator=gen)
                        if _c_root(lib, chunked(t)[1]) != TensorTree(t).root:
                            raise RuntimeError(f"the C root of {n} elements differs from the tree's")
                except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
                    log.warning("tensor roots in Python (%s)", str(exc).splitlines()[0][:160] if str(exc) else exc)
                    lib = None
                _state["lib"] = lib
    return _state["lib"]


def tensor_root(t: torch.Tensor) -> bytes:
    """The root of ``t`` in the canonical layout (float32, or float64 as two words)."""
    global SECONDS
    start = time.perf_counter()
    t = t.detach().cpu()
    lib = _kernel()
    root = _c_root(lib, chunked(t)[1]) if lib is not None else TensorTree(t).root
    SECONDS += time.perf_counter() - start
    return root
