"""One element of repro mode's 2x2 max pooling and of its backward, on float32 bit patterns:
the semantics the engine (truetrain/training/ops/conv.py ``pool`` / ``unpool``, the C kernels
``tt_pool`` / ``tt_unpool``) and the one-step verifier (contracts/numerics/OneStepPool.sol)
compute.

A map (B, H, W, C), channels last, H and W even; output element ``o = (n, y, x, ch)`` of
the pooled (B, H/2, W/2, C) reads the window ``v[t]``, ``t = 2 dy + dx``, at
``(n, 2y + dy, 2x + dx, ch)``:

* ``out = v[0]``, then for ``t = 1, 2, 3``: ``out = v[t]`` where ``out`` is not NaN and
  ``v[t]`` is NaN or ``v[t] > out`` (so a NaN anywhere wins and the first of equal
  maxima stays: ``max(-0, +0)`` is -0, ``max(+0, -0)`` is +0);
* the mask (B, H/2, W/2, C, 4): 1.0 at the first ``t`` with ``v[t] == out`` (-0 equals +0),
  +0 elsewhere: all +0 when ``out`` is NaN;
* the backward: input-gradient element ``(n, Y, X, ch)`` is ``g[o] * mask[o][t] + 0``
  for ``o = (n, Y // 2, X // 2, ch)``, ``t = 2 (Y % 2) + X % 2`` (ReLU's ``apply_mask``).
"""

from __future__ import annotations

import numpy as np

from ..errors import NumericsError
from .elementwise import apply_mask
from .ieee import NAN32, ONE32


def _check(shape: tuple[int, int, int, int]) -> None:
    b, h, w, c = shape
    if min(shape) <= 0 or h % 2 or w % 2:
        raise NumericsError(f"a 2x2 pooling needs a (B, H, W, C) map with H and W even, got {shape}")


def windows(a, shape: tuple[int, int, int, int]) -> np.ndarray:
    """The windows (B, H/2, W/2, C, 4) of a map (uint32 bits, ``shape`` (B, H, W, C))."""
    _check(shape)
    b, h, w, c = shape
    v = np.asarray(a, np.uint32).reshape(b, h // 2, 2, w // 2, 2, c)
    return v.transpose(0, 1, 3, 5, 2, 4).reshape(b, h // 2, w // 2, c, 4)


def pool(a, shape: tuple[int, int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """``(out, mask)``: float32 bits (B, H/2, W/2, C) and (B, H/2, W/2, C, 4)."""
    v = windows(a, shape)
    f = v.view(np.float32)
    out = f[..., 0].copy()
    for t in range(1, 4):
        with np.errstate(invalid="ignore"):
            take = ~np.isnan(out) & (np.isnan(f[..., t]) | (f[..., t] > out))
        out = np.where(take, f[..., t], out)
    mask = np.zeros(v.shape, np.uint32)
    found = np.zeros(out.shape, bool)
    for t in range(4):
        hit = ~found & (f[..., t] == out)
        mask[..., t] = np.where(hit, np.uint32(ONE32), np.uint32(0))
        found |= hit
    bits = out.view(np.uint32)
    return np.where(np.isnan(out), np.uint32(NAN32), bits).astype(np.uint32), mask


def unpool(g, mask, shape: tuple[int, int, int, int]) -> np.ndarray:
    """The input gradient (B, H, W, C) (float32 bits) of the pooled gradient ``g``
    (B, H/2, W/2, C) through ``mask`` (B, H/2, W/2, C, 4), for a map of ``shape``."""
    _check(shape)
    b, h, w, c = shape
    g = np.asarray(g, np.uint32).reshape(b, h // 2, w // 2, c, 1)
    mask = np.asarray(mask, np.uint32).reshape(b, h // 2, w // 2, c, 4)
    out = apply_mask(np.broadcast_to(g, mask.shape), mask)
    out = np.asarray(out, np.uint32).reshape(b, h // 2, w // 2, c, 2, 2)
    return out.transpose(0, 1, 4, 2, 5, 3).reshape(b, h, w, c)
