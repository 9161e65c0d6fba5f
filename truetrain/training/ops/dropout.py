"""Dropout with a counter-based mask: the same bits on every device, thread count and
micro-batch split, in stock and repro mode alike.

Element ``i`` of the whole step's batch tensor (its flat index, counted from the first
sample of the batch, not of the micro-batch) is kept when a 32-bit hash of ``(i, key)``
is at least ``round(p * 2**32)``; kept values are scaled by float32 ``1 / (1 - p)``. The
key is the step's dropout key (from the task's RNG key and the step number) and the
site's name, through keccak256. The hash is integer arithmetic in int64 kept below 2**48
(no overflow anywhere), so a CPU and a GPU draw the same mask. ``x * mask`` is one
float32 multiplication: exact, the same forward and backward on any device.
"""

from __future__ import annotations

import torch

from ...hashing import keccak256
from ..repro_ops import F32

_M32 = 0xFFFFFFFF
I64 = torch.int64


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """``x * c mod 2**32`` for ``x`` in [0, 2**32), without passing 2**48."""
    return ((x & 0xFFFF) * c + ((((x >> 16) * c) & 0xFFFF) << 16)) & _M32


def _mix32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit avalanche hash (``lowbias32``: xor-shift, multiply, xor-shift, multiply, xor-shift)."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def keep_mask(shape, key: bytes, site: str, first: int, p: float, device) -> torch.Tensor:
    """float32 mask of ``shape``: ``1 / (1 - p)`` where kept, ``0`` where dropped, for the
    elements whose flat indices in the batch start at ``first``."""
    words = keccak256(bytes(key) + site.encode())
    k0, k1, k2 = (int.from_bytes(words[i:i + 4], "big") for i in (0, 4, 8))
    n = 1
    for s in shape:
        n *= int(s)
    counter = torch.arange(first, first + n, dtype=I64, device=device)
    h = _mix32((counter & _M32) ^ k0)
    h = _mix32(h ^ ((counter >> 32) & _M32) ^ k1)
    h = _mix32(h ^ k2)
    scale = torch.tensor(1.0, dtype=F32) / torch.tensor(1.0 - p, dtype=F32)  # float32 1 / (1 - p)
    keep = h >= min(round(p * 2**32), 2**32)
    return (keep.to(F32) * scale.to(device)).view(*shape)


def dropout(x: torch.Tensor, p: float, key: bytes | None, site: str, first_sample: int = 0) -> torch.Tensor:
    """``x`` (samples, ...) with elements dropped at rate ``p`` (no-op for ``p == 0`` or no
    ``key``: evaluation). ``first_sample``: the batch position of ``x``'s first sample (a
    micro-batch's offset), so a split batch draws the whole batch's mask."""
    if not p or key is None:
        return x
    per_sample = x[0].numel() if x.shape[0] else 0
    return x * keep_mask(x.shape, key, site, first_sample * per_sample, p, x.device)
