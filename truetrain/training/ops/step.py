"""What the repro ops of one training step share: the GEMM engine, the limb count, the
step's :class:`GradBook`, and the weights quantised once per step."""

from __future__ import annotations

import torch

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
        self._weights: dict[tuple[str, str], Operand] = {}

    @property
    def fuse(self) -> bool:
        return self.engine.fuse

    def quantize_rows(self, x: torch.Tensor) -> Operand:
        """``x`` (rows, k) as a left operand, each row on its own scale."""
        return quantize(x, 1, self.limbs, fuse=self.fuse)

    def weight(self, name: str, w: torch.Tensor, use: str) -> Operand:
        """``w`` (out, in) as the right operand of the ``forward`` product (``w.T``, one
        scale per output channel) or of the ``input`` gradient (``w``, one per input feature)."""
        key = (name, use)
        if key not in self._weights:
            self._weights[key] = quantize(w.detach().T if use == "forward" else w.detach(), 0, self.limbs,
                                          fuse=self.fuse)
        return self._weights[key]
