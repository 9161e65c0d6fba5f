"""Linear maps and embeddings: stock (PyTorch's ops) or repro (the integer GEMM engine,
parameter gradients through the step's :class:`~.book.GradBook`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import intgemm_fused, native_linear
from .step import ReproStep


class _Linear(torch.autograd.Function):
    """``x @ W.T + b`` for rows ``x`` (rows, in), then a ReLU where ``relu`` (its mask
    kept for the backward): each row quantised on its own, so a row's output depends on
    that row alone."""

    @staticmethod
    def forward(ctx, x, weight, bias, step: ReproStep, wname: str, bname: str, per_row: int, relu: bool):
        x, b = x.detach().contiguous(), None if bias is None else bias.detach()
        ctx.step, ctx.names, ctx.weight, ctx.per_row = step, (wname, bname), weight, per_row
        ctx.small = native_linear.usable(x, weight, step.engine) and native_linear.exact(x.shape[1], step.limbs)
        if ctx.small:  # one C call, the same bits
            out, ctx.qa = native_linear.product(x, step.weight(wname, weight, "forward"), b, relu)
        else:
            ctx.qa = step.quantize_rows(x)
            out = step.engine.matmul(ctx.qa, step.weight(wname, weight, "forward"), b)
            if relu:
                out = intgemm_fused.run("relu", step.fuse, out)
        if not relu:
            ctx.mask = None
            return out
        out, ctx.mask = out
        return out

    @staticmethod
    def backward(ctx, g):
        step, g = ctx.step, g.contiguous()
        if ctx.mask is not None:
            g = intgemm_fused.run("apply_mask", step.fuse, ctx.mask, g)
        wname, bname = ctx.names
        weight = ctx.weight
        step.book.linear(wname, bname, g, ctx.qa, ctx.per_row, weight.shape if weight.dim() != 2 else None)
        dx = None
        if ctx.needs_input_grad[0] and ctx.small and native_linear.exact(g.shape[1], step.limbs):
            dx = native_linear.product(g, step.weight(wname, weight, "input"), None)[0]
        elif ctx.needs_input_grad[0]:
            dx = step.engine.matmul(step.quantize_rows(g), step.weight(wname, weight, "input"))
        return dx, None, None, None, None, None, None, None


def linear_rows(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, step: ReproStep,
                wname: str, bname: str, per_row: int = 1, relu: bool = False) -> torch.Tensor:
    """Repro ``x @ W.T + b`` for rows ``x`` (rows, in) and ``W`` (out, in, or (out, ...)
    flattened to it: a convolution's); each row of
    the step's batch gives ``per_row`` rows here (a convolution's patches). ``relu``: then
    a ReLU (the bits of ``ops.relu`` after the map, in the same autograd node)."""
    return _Linear.apply(x, weight, bias, step, wname, bname if bias is not None else "", per_row, relu)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, step: ReproStep | None,
           name: str, weight_name: str | None = None, relu: bool = False) -> torch.Tensor:
    """``x @ W.T + b`` over the last dimension of ``x`` (any leading shape), then a ReLU
    where ``relu``. ``name`` is the layer's (parameters ``name.weight``, ``name.bias``);
    ``weight_name`` overrides the weight's (a tied weight)."""
    if step is None:
        out = F.linear(x, weight, bias)
        return torch.relu(out) if relu else out
    lead = x.shape[:-1]
    out = linear_rows(x.reshape(-1, x.shape[-1]), weight, bias, step, weight_name or name + ".weight",
                      name + ".bias", relu=relu)
    return out.view(*lead, weight.shape[0])


class _Embedding(torch.autograd.Function):
    """Rows of a table picked by indices; the gradient adds rows back (exact integer sums)."""

    @staticmethod
    def forward(ctx, index, table, step: ReproStep, name: str):
        ctx.step, ctx.name, ctx.shape = step, name, table.shape
        ctx.save_for_backward(index)
        return table.detach().index_select(0, index)

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        ctx.step.book.scatter(ctx.name, g.contiguous(), index, ctx.shape[0])
        return None, None, None, None


def embedding(index: torch.Tensor, table: torch.Tensor, step: ReproStep | None, name: str) -> torch.Tensor:
    """``table[index]`` for integer ``index`` of any shape: (*index.shape, d)."""
    if step is None:
        return F.embedding(index, table)
    flat = index.reshape(-1)
    return _Embedding.apply(flat, table, step, name).view(*index.shape, table.shape[1])
