"""Keep freed tensor memory in the process (glibc malloc), instead of unmapping it.

A training step allocates and frees the same large buffers every step. glibc serves
blocks above its mmap threshold (128 KiB by default, adapting upwards) with fresh pages that
fault in on first touch and go back to the kernel on free, so every step pays its page
faults again. Raising the thresholds keeps those blocks in the heap for reuse. The cost is
a resident size that stays at its peak. No-op where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_MAX_THRESHOLD = 32 * 1024 * 1024  # glibc's ceiling for M_MMAP_THRESHOLD on 64-bit
_done = False


def keep_freed_memory() -> bool:
    """Set the thresholds once per process; True when glibc accepted them."""
    global _done
    if _done:
        return True
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = mallopt(_M_MMAP_THRESHOLD, _MMAP_MAX_THRESHOLD) == 1 and mallopt(_M_TRIM_THRESHOLD, 2**30) == 1
    _done = ok
    if not ok:
        log.info("malloc thresholds unchanged (not glibc?)")
    return ok
