"""The mean cross-entropy loss, stock or repro.

Repro: softmax cross-entropy in float64 with the project's exp and log and exact row sums
(:func:`~..repro_ops.softmax_xent`), the gradient of the mean over the *whole* batch's
rows, so micro-batches agree; compiled on large logits, one C call on small CPU ones.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import intgemm_fused, native
from ..repro_ops import F32
from .step import ReproStep


def softmax_xent(logits: torch.Tensor, y: torch.Tensor, rows: int, fuse: bool):
    """``(grad, sumexp, target)`` of float32 logits (R, C) and labels (R,) for a mean over
    ``rows``: the same bits from the compiled kernel, the C kernel and the eager ops."""
    if native.small(logits, fuse):
        return native.softmax_xent(logits, y, rows)
    return intgemm_fused.run("softmax_xent", fuse, logits, y, rows)


class _CrossEntropy(torch.autograd.Function):
    """The mean cross-entropy's gradient, computed in the forward (the loss node is the
    root of the step's graph); the per-row loss parts go to ``losses``."""

    @staticmethod
    def forward(ctx, logits, targets, total_rows: int, step: ReproStep, losses: list):
        grad, sumexp, target = softmax_xent(logits.detach().contiguous(), targets, total_rows, step.fuse)
        losses.append((sumexp, target))
        ctx.save_for_backward(grad)
        return torch.zeros((), dtype=F32, device=logits.device)

    @staticmethod
    def backward(ctx, g):
        (grad,) = ctx.saved_tensors
        return grad, None, None, None, None


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, step: ReproStep | None,
                  total_rows: int | None = None, losses: list | None = None) -> torch.Tensor:
    """Mean cross-entropy of (R, C) logits against (R,) targets. Repro: the mean is over
    ``total_rows`` (the whole batch's, so micro-batches agree), the returned tensor is a
    zero placeholder to call ``backward`` on, and the per-row parts land in ``losses``."""
    if step is None:
        return F.cross_entropy(logits, targets)
    rows = logits.shape[0] if total_rows is None else total_rows
    return _CrossEntropy.apply(logits, targets, rows, step, [] if losses is None else losses)
