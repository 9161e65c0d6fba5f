"""Learning-rate schedule and gradient clipping, reproducible on any machine.

The schedule is linear warm-up then cosine decay to ``min_lr_ratio`` of the peak,
evaluated in Python float64 from IEEE + - * / alone (:func:`cos_pi` is our own series,
not the platform's ``math.cos``) and rounded once to float32, so every worker, verifier
and referee gets the same rate for the same step. The position in the schedule is the
job's global inner step, kept in the optimizer state (``lr_step``), so a replay from any
checkpoint continues it.

Clipping scales the gradients by ``min(1, clip_norm / (norm + 1e-6))`` where ``norm`` is
the global L2 norm over every parameter's gradient, computed from exact integer sums of
quantised squares (:func:`global_norm`), so its bits do not depend on order or device.
Its definition (the grid's bits, the epsilon) is truetrain/numerics/clip.py's, the
reference the one-step verifier is checked against.
"""

from __future__ import annotations

import math

import torch

from ..numerics.clip import CLIP_EPS, norm_bits
from .repro_ops import F32, F64, power_scales, sqrt64

_PI = math.pi
# cos(y) = sum_k (-1)^k y^(2k) / (2k)!, k = 0..12: below 1e-17 for |y| <= pi/2
_COS_COEFFS = [(-1) ** k / math.factorial(2 * k) for k in range(12, -1, -1)]


def cos_pi(x: float) -> float:
    """cos(pi * x) for x in [0, 1], from + - * only (Horner in y**2, y folded into
    [0, pi/2])."""
    x = min(max(float(x), 0.0), 1.0)
    sign = 1.0
    if x > 0.5:
        x, sign = 1.0 - x, -1.0
    y = _PI * x
    z = y * y
    p = _COS_COEFFS[0]
    for c in _COS_COEFFS[1:]:
        p = p * z + c
    return sign * p


def lr_factor(step: int, warmup: int, total: int, min_ratio: float) -> float:
    """The schedule's multiple of the peak rate at global inner step ``step`` (from 0):
    ``(step + 1) / warmup`` during warm-up, then cosine from 1 down to ``min_ratio`` at
    ``total`` (and ``min_ratio`` after)."""
    if step < warmup:
        return (step + 1) / warmup
    span = max(1, total - warmup)
    progress = min(1.0, (step - warmup) / span)
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + cos_pi(progress))


def square_terms(grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """Each gradient's squares, flat float64 (exact)."""
    return [g.to(F64).square().reshape(-1) for g in grads]


def square_grid(largest: torch.Tensor, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(up, down)``: the power-of-two grid on which ``count`` squares, the largest
    ``largest``, sum exactly as integers."""
    return power_scales(largest, norm_bits(count))


def grid_sum(squares: list[torch.Tensor], up: torch.Tensor) -> torch.Tensor:
    """float64 0-dim integer sum of ``squares`` rounded onto the grid ``up`` (exact; so
    partial sums over any grouping, such as a pipeline's stages, add to the same bits)."""
    return torch.stack([torch.mul(s, up).round_().sum() for s in squares]).sum()


def norm_of_sum(total: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
    """The L2 norm from the grid's integer sum of squares: ``sqrt64(total * down)``."""
    return sqrt64(total.add_(0.0).mul_(down))


def global_norm(grads: list[torch.Tensor]) -> torch.Tensor:
    """float64 0-dim L2 norm of all ``grads`` together, the same bits in any order: squares
    (exact in float64) quantised to one power-of-two grid set by the largest, summed as
    integers (exact), then the deterministic square root ``sqrt64``."""
    squares = square_terms(grads)
    count = sum(s.numel() for s in squares)
    largest = torch.stack([s.amax() for s in squares]).amax()
    up, down = square_grid(largest, count)
    return norm_of_sum(grid_sum(squares, up), down)


def clip_of_norm(norm: torch.Tensor, clip_norm: float) -> torch.Tensor:
    """float32 0-dim ``min(1, clip_norm / (norm + 1e-6))`` (float64, rounded once)."""
    return (clip_norm / (norm + CLIP_EPS)).clamp_max(1.0).to(F32)


def clip_factor(grads: list[torch.Tensor], clip_norm: float) -> torch.Tensor:
    """float32 0-dim ``min(1, clip_norm / (norm + 1e-6))`` (each step in float64, rounded
    once to float32)."""
    return clip_of_norm(global_norm(grads), clip_norm)
