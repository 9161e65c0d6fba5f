"""The parameter gradients of one repro step, as exact integer sums over the batch rows.

An op's backward does not return its parameters' gradients to autograd: it hands the
material to the step's :class:`GradBook`, which quantises it per output column against
the largest magnitude over the *whole batch* and adds integer sums, exact in any order.
So a batch processed in micro-batches gives the same bits as the whole batch, provided
the book first sees every slice once to learn those maxima (``mode = "observe"``), then
again to add (``"add"``); a batch in one piece does both at once (``"both"``).

Three kinds of sums cover every parameter:

* :meth:`GradBook.weight`: ``dW = G.T @ a`` of a linear map, from the output gradient
  ``G`` and the forward's quantised input rows (their integers reused, the row scales folded
  into ``G``; the sums taken transposed, ``dW.T = qa.T @ G'``);
* :meth:`GradBook.columns`: column sums of a per-row quantity (biases, LayerNorm's gain
  and shift);
* :meth:`GradBook.scatter`: rows of ``G`` added into the rows of a table picked by
  indices (an embedding).

Contributions to one parameter from several places (a tied embedding) are rounded each
on its own and added in the order they were first seen: the same order every time.
"""

from __future__ import annotations

import torch

from .. import intgemm_fused, native, native_chains, native_linear
from ..intgemm import GemmEngine, Operand, check_contraction, quantize_scaled_columns
from ..intgemm import operand_bits as limb_bits
from ..repro_ops import F32, F64, operand_bits, power_scales

MODES = ("both", "observe", "add")


class GradBook:
    """Gradient sums of one step over a batch of ``rows`` rows (tokens or samples).

    A layer whose every batch row gives it several rows of its own (a convolution's
    patches) says how many with ``per_row``: its sums run over ``rows * per_row`` rows.
    """

    def __init__(self, engine: GemmEngine, limbs: int, rows: int):
        check_contraction(rows, limbs)
        self.engine, self.limbs, self.rows = engine, limbs, rows
        self.mode = "both"
        self._max: dict[str, torch.Tensor] = {}
        self._parts: dict[str, dict] = {}  # parameter -> {site: [sum, scale, kind]}
        self._shapes: dict[str, torch.Size] = {}  # weights kept as 2-d views (a conv's)
        self._checked: set[int] = set()

    def _check(self, per_row: int) -> None:
        """Refuse sums over ``rows * per_row`` rows too long to be exact (checked once each)."""
        if per_row not in self._checked:
            check_contraction(self.rows * per_row, self.limbs)
            self._checked.add(per_row)

    def _bits(self, per_row: int) -> int:
        """Operand bits of exact column sums over ``rows * per_row`` rows."""
        self._check(per_row)
        return operand_bits(self.rows * per_row, 0)

    def _observe(self, key: str, value: torch.Tensor) -> None:
        old = self._max.get(key)
        self._max[key] = value if old is None else torch.maximum(old, value)

    def _add(self, name: str, site: str, total, scale, kind: str) -> None:
        parts = self._parts.setdefault(name, {})
        site = f"{kind[0]}:{site}"  # a tied parameter's uses: one entry each
        if site in parts:
            if kind == "weight":
                parts[site][0].add(total)
            else:
                parts[site][0] += total
        else:
            parts[site] = [total, scale, kind]

    def linear(self, wname: str, bname: str, g: torch.Tensor, qa: Operand, per_row: int = 1,
               shape: torch.Size | None = None) -> None:
        """A linear map's weight (and bias, unless ``bname`` is empty) gradients; ``shape``:
        the weight parameter's, where it is not (out, in). A batch in one piece on a small
        CPU tensor takes one exact C call for both (the same bits)."""
        if shape is not None:
            self._shapes[wname] = shape
        if bname and self.mode == "both" and native.small(g, self.engine.fuse):
            bits_b = self._bits(per_row)
            if (qa.has_q64 and native_linear.exact(g.shape[0], self.limbs)
                    and wname not in self._parts and bname not in self._parts):  # the product too, rounded
                dw, db = native_linear.weight_grad(g, qa, bits_b)
                self._add(wname, "", dw, None, "final")
                self._add(bname, "", db, None, "final")
                return
            q64, down, sb, down_b = native.grad_columns(g, qa.scale, limb_bits(self.limbs), bits_b)
            dwt = self.engine.matmul(qa.transposed(), Operand(None, down, self.limbs, q64=q64))
            self._add(wname, "", dwt, None, "rounded")
            self._add(bname, "", sb, down_b, "columns")
            return
        self.weight(wname, g, qa, per_row=per_row)
        if bname:
            self.columns(bname, g, per_row=per_row)

    def weight(self, name: str, g: torch.Tensor, qa: Operand, site: str = "", per_row: int = 1) -> None:
        """``dW = G.T @ a`` for ``W`` named ``name`` (out, in): ``g`` (rows, out), ``qa`` the
        forward's quantised rows of ``a`` (rows, in)."""
        key = f"{name}|{site}|w"
        fuse = self.engine.fuse
        self._check(per_row)
        if self.mode in ("observe", "both"):
            self._observe(key, intgemm_fused.run("column_maxima", fuse, g, qa.scale)[0])
        if self.mode in ("add", "both"):
            right = quantize_scaled_columns(g, qa.scale, self._max[key], self.limbs, fuse)
            left = qa.transposed()
            if self.mode == "both":  # the whole batch: rounded at once (the same bits)
                self._add(name, site, self.engine.matmul(left, right), None, "rounded")
            else:
                self._add(name, site, self.engine.exact_sum(left, right), right.scale, "weight")

    def columns(self, name: str, v: torch.Tensor, site: str = "", per_row: int = 1) -> None:
        """Column sums of ``v`` (rows, n) for the parameter ``name`` (n,)."""
        key = f"{name}|{site}|c"
        if self.mode == "both" and native_chains.usable(v, self.engine.fuse):  # one C pass, the same bits
            total, down = native_chains.column_sums(v, self._bits(per_row))
            self._add(name, site, total, down, "columns")
            return
        if self.mode in ("observe", "both"):
            self._observe(key, v.abs().amax(0))
        if self.mode in ("add", "both"):
            up, down = power_scales(self._max[key], self._bits(per_row))
            total = intgemm_fused.run("scaled_column_sums", self.engine.fuse, v, up)
            self._add(name, site, total, down, "columns")

    def scatter(self, name: str, g: torch.Tensor, index: torch.Tensor, num: int, site: str = "") -> None:
        """Rows of ``g`` (rows, d) added into rows ``index`` of the table ``name`` (num, d)."""
        key = f"{name}|{site}|s"
        if self.mode in ("observe", "both"):
            self._observe(key, g.abs().amax(0))
        if self.mode in ("add", "both"):
            up, down = power_scales(self._max[key], self._bits(1))
            q = torch.round(g.to(F64) * up)
            total = torch.zeros((num, g.shape[1]), dtype=F64, device=g.device).index_add_(0, index, q)
            self._add(name, site, total, down, "scatter")

    def result(self) -> dict[str, torch.Tensor]:
        """float32 gradients by parameter name (each contribution rounded once), in the
        parameters' shapes."""
        out = {}
        for name, parts in self._parts.items():
            grad = None
            for total, scale, kind in parts.values():
                if kind == "weight":
                    g = total.finish(None, scale, self.engine.fuse).T
                elif kind == "rounded":
                    g = total.T
                elif kind == "final":  # rounded in the parameter's shape
                    g = total
                else:  # +0.0: a zero sum is +0.0 whatever sign it was built with
                    g = total.add(0.0).mul_(scale).to(F32)
                grad = g.contiguous() if grad is None else grad + g
            shape = self._shapes.get(name)
            out[name] = grad if shape is None else grad.view(shape)
        return out
