"""Tensor roots for a trace, in the layout of :mod:`truetrain.numerics.tensor_merkle`.

A trace hashes every output of a step (a default-LM step: hundreds of tensors, the largest
16,384 leaves): the tree in Python (a keccak call per node) takes longer than the step, so
the root is one C call (``root_kernel.c``), compiled on first use with the system compiler
into the engine's kernel cache (as :mod:`truetrain.training.native` does) and checked
against :class:`~truetrain.numerics.tensor_merkle.TensorTree` on tensors of 1 to 200
leaves before it is used. Without a compiler, or when a root differs, the Python tree
gives the roots (logged once): the same roots, slower. A checkpoint's hash
(:func:`truetrain.training.checkpoint.checkpoint_commitment`) takes its tensors' roots here
too."""

from __future__ import annotations

import ctypes
import logging
import platform
import subprocess
import threading
import time
from pathlib import Path

import torch

from ..numerics.tensor_merkle import LAYOUTS, TensorTree, in_layout
from .native import build_library

log = logging.getLogger(__name__)
F32, F64, I64, I32, U8 = torch.float32, torch.float64, torch.int64, torch.int32, torch.uint8
SOURCE = Path(__file__).with_name("root_kernel.c")
FLAGS = ["-O3", "-funroll-loops", "-std=c11", "-shared", "-fPIC"]
if platform.machine() in ("x86_64", "AMD64"):
    FLAGS.append("-march=native")  # eight hashes a permutation in AVX-512 (or AVX2) registers

#: seconds spent in :func:`tensor_root` since it was last reset (bench/trace.py reads it)
SECONDS = 0.0
_lock = threading.Lock()
_state: dict[str, object] = {}


def _build() -> ctypes.CDLL:
    target = build_library("tensor-root", [SOURCE], FLAGS)
    lib = ctypes.CDLL(str(target))
    lib.tt_tensor_root.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_char_p]
    lib.tt_tensor_root.restype = ctypes.c_int
    return lib


def _c_root(lib, t: torch.Tensor) -> bytes:
    """The root of ``t`` (a dtype of ``LAYOUTS``, contiguous on the CPU): the canonical
    layout (big-endian words, float NaNs canonical, the last chunk zero-padded) is made in
    the kernel (mode: 1 two words an element, 2 integer bits kept as they are)."""
    out = ctypes.create_string_buffer(32)
    words, canonical = LAYOUTS[t.dtype]
    if lib.tt_tensor_root(t.data_ptr(), t.numel() * words, (words == 2) | (not canonical) << 1, out) != 0:
        raise MemoryError("tt_tensor_root: no memory for the tree")
    return out.raw


#: the tensors the kernel is checked on before use: (elements, dtype), a NaN (or, for an
#: integer, a NaN's bit pattern) in the middle
_CHECKS = ((1, F32), (64, F32), (65, F32), (200 * 64 - 3, F32), (3 * 64 + 1, F32), (1, F64), (32, F64),
           (8 * 64 + 3, F64), (1, I64), (33, I64), (8 * 64 + 3, I64), (65, I32), (130, U8))


def _sample(n: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    if dtype.is_floating_point:
        t = torch.randn(n, generator=gen, dtype=dtype)
        t[n // 2] = float("nan")
        return t
    t = torch.randint(0, 256 if dtype == U8 else 2**31 - 1, (n,), generator=gen, dtype=dtype)
    if dtype != U8:
        t[n // 2] = 0x7FC12345 if dtype == I32 else 0x7FF0123456789ABC  # NaN patterns, kept as they are
    return t


def _kernel():
    """The C kernel, or None (built and checked once a process)."""
    if "lib" not in _state:
        with _lock:
            if "lib" not in _state:
                lib = None
                try:
                    lib = _build()
                    gen = torch.Generator().manual_seed(28)
                    for n, dtype in _CHECKS:
                        t = _sample(n, dtype, gen)
                        if _c_root(lib, in_layout(t)) != TensorTree(t).root:
                            raise RuntimeError(f"the C root of {n} elements differs from the tree's")
                except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
                    log.warning("tensor roots in Python (%s)", str(exc).splitlines()[0][:160] if str(exc) else exc)
                    lib = None
                _state["lib"] = lib
    return _state["lib"]


def ready() -> bool:
    """Whether the C kernel gives the roots (built and checked on first asking): a daemon
    asks at its start, so a checkpoint's first hash never waits for the compiler."""
    return _kernel() is not None


def tensor_root(t: torch.Tensor) -> bytes:
    """The root of ``t`` in the canonical layout (tensor_merkle: float32 and int32 one word
    an element, float64 and int64 two, uint8 zero-extended)."""
    global SECONDS
    start = time.perf_counter()
    t = in_layout(t)
    lib = _kernel()
    root = _c_root(lib, t.contiguous()) if lib is not None and t.numel() else TensorTree(t).root
    SECONDS += time.perf_counter() - start
    return root
