"""What the repro ops of one training step share: the GEMM engine, the limb count, the
step's :class:`GradBook`, and the weights quantised once per step."""

from __future__ import annotations

import torch

from .. import native_net
from ..intgemm import GemmEngine, Operand, quantize
from .book import GradBook


class ReproStep:
    """The context a model's repro ops run in for one step (one batch, all its slices).

    Weights do not change within a step, so each is quantised once per use: per output
    channel for the forward product, per input feature for the input-gradient product.
    """

    def __init__(self, engine: GemmEngine, limbs: int, rows: int):
        self.engine, self.limbs = engine, limbs
        self.book = GradBook(engine, limbs, rows)
        self.offset = 0  # the batch position of the current slice's first sample
        self._weights: dict[tuple[str, str], Operand] = {}

    @property
    def fuse(self) -> bool:
        return self.engine.fuse

    def quantize_rows(self, x: torch.Tensor) -> Operand:
        """``x`` (rows, k) as a left operand, each row on its own scale."""
        return quantize(x, 1, self.limbs, fuse=self.fuse)

    def weight(self, name: str, w: torch.Tensor, use: str) -> Operand:
        """``w`` (out, in; or (out, ...), flattened) as the right operand of the ``forward`` product (``w.T``, one
        scale per output channel) or of the ``input`` gradient (``w``, one per input feature)."""
        key = (name, use)
        if key not in self._weights:
            w = w.detach()
            w = w.reshape(w.shape[0], -1)
            self._weights[key] = quantize(w.T if use == "forward" else w, 0, self.limbs, fuse=self.fuse)
        return self._weights[key]


def repro_gradients(model: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor, engine: GemmEngine,
                    limbs: int, micro_batch: int | None = None):
    """Repro gradients of a model's mean loss over the batch ``(inputs, targets)``, split
    along the first dimension: ``(grads by parameter name, [(sumexp, target)] per slice)``.

    ``model.loss(inputs, targets, step, total_rows, losses)`` runs the forward and returns
    the placeholder to call ``backward`` on; its rows are the targets' elements (samples,
    or tokens for a language model). With ``micro_batch`` samples per slice the book makes
    two passes (maxima, then sums) and every bit is the same as in one piece. A small MLP's or
    CNN's batch in one piece is one C call (:mod:`~..native_net`), the same bits.
    """
    n, rows = inputs.shape[0], targets.numel()
    size = n if not micro_batch or micro_batch >= n else int(micro_batch)
    slices = [(i, min(i + size, n)) for i in range(0, n, size)]
    net = getattr(model, "fused_layers", lambda: None)() if len(slices) == 1 else None
    if net and native_net.usable(net, inputs, targets, engine, limbs):  # one C call, the same bits
        return native_net.gradients(net, inputs, targets, limbs)
    step = ReproStep(engine, limbs, rows)
    if len(slices) > 1:
        step.book.mode = "observe"
        for lo, hi in slices:
            step.offset = lo
            model.loss(inputs[lo:hi], targets[lo:hi], step, rows, []).backward()
        step.book.mode = "add"
    losses: list = []
    for lo, hi in slices:
        step.offset = lo
        model.loss(inputs[lo:hi], targets[lo:hi], step, rows, losses).backward()
    return step.book.result(), losses
