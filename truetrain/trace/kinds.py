"""Each application kind evaluated by the engine's own functions (the repro ops, the GEMM
engine, the step's GradBook, the optimizer), unchanged: what the step computes, one
application at a time. An evaluator takes the input tensors (float32; ids and labels as
int64), the attributes and the step's :class:`Context`, and returns every output of the
kind (a tuple; the program's entries pick theirs by ``output``).

Some outputs are not tensors the engine keeps (the cross-entropy's partial sums, a bias
gradient's transposed rows): they are computed here with the engine's functions
(``_exp64_core``, ``transpose``), as docs/onestep.md says."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..errors import TraceError
from ..training.intgemm import GemmEngine, quantize
from ..training.ops import GradBook
from ..training.ops.loss import softmax_xent
from ..training.optim import OptimizerSpec, repro_update
from ..training import intgemm_fused, native, native_linear
from .kinds_lm import LM_EVALUATORS, untransposed
from .program import APP, Ref
from ..training.repro_ops import _EXP_MIN, EXACT_BITS, F64, _exp64_core, ceil_log2, operand_bits, xent_loss


@dataclass
class Context:
    """What every application of one step shares; ``app`` is the application being
    evaluated, ``saved`` what a later application reuses (the engine's own saved values:
    a linear's quantised rows, LayerNorm's normalised rows, GELU's slope), by the input's
    reference."""

    engine: GemmEngine
    limbs: int
    app: object = None
    index: int = -1
    saved: dict = field(default_factory=dict)

    @property
    def fuse(self) -> bool:
        return self.engine.fuse

    def ref(self, i: int):
        return self.app.inputs[i]

    def release(self, ref) -> None:
        """Forget what was saved for ``ref`` (its tensor is no longer read)."""
        for key in [k for k in self.saved if k[1] == ref]:
            del self.saved[key]



def _linear(ins, at, ctx: Context):
    a, bt = ins[0].contiguous(), ins[1]
    bias = ins[2] if at["bias"] else None
    # bt's rows are the right operand's columns, one scale each (the engine's
    # ReproStep.weight: W.T in the forward, W itself for the input gradient)
    right = quantize(bt.T, 0, ctx.limbs, fuse=ctx.fuse)
    if native_linear.usable(a, bt, ctx.engine) and native_linear.exact(a.shape[1], ctx.limbs):
        out, qa = native_linear.product(a, right, bias)  # one C call, as _Linear's
    else:
        qa = quantize(a, 1, ctx.limbs, fuse=ctx.fuse)
        out = ctx.engine.matmul(qa, right, bias)
    ctx.saved[("rows", ctx.ref(0))] = qa
    return (out,)


def _quantized_rows(a: torch.Tensor, ctx: Context, i: int):
    """Input ``i`` (rows, k) quantised as a left operand: the forward product's, where one
    quantised it (the engine's backward reuses its forward's)."""
    qa = ctx.saved.get(("rows", ctx.ref(i)))
    return qa if qa is not None else quantize(a.contiguous(), 1, ctx.limbs, fuse=ctx.fuse)


def _relu(ins, at, ctx: Context):
    return tuple(intgemm_fused.run("relu", ctx.fuse, ins[0].contiguous()))


def _apply_mask(ins, at, ctx: Context):
    return (intgemm_fused.run("apply_mask", ctx.fuse, ins[1].contiguous(), ins[0].contiguous()),)


def _permute(ins, at, ctx: Context):
    """The inputs one after another (one input: itself) viewed as ``shape``, permuted."""
    if len(ins) == 1 and tuple(at["perm"]) == (1, 0) and ins[0].dim() == 2:  # a transpose: its readers may want the rows as they were
        ctx.saved[("plain", Ref(APP, ctx.index))] = ins[0]
    flat = ins[0] if len(ins) == 1 else torch.cat([x.reshape(-1) for x in ins])
    return (flat.reshape(at["shape"]).permute(*at["perm"]).contiguous().view(ctx.app.shape),)


def _row_scales(ins, at, ctx: Context):
    qa = _quantized_rows(ins[0], ctx, 0)
    ctx.saved[("scales", Ref(APP, ctx.index))] = qa  # the weight gradient reads these rows' integers
    return (qa.scale.reshape(-1),)


def _weight_grad(ins, at, ctx: Context):
    """``dW`` from ``gᵀ``, ``aᵀ`` and ``a``'s row scales: the forward's quantised rows of
    ``a`` (as the engine's backward reuses them), ``g`` as the step's book takes it."""
    g, a, scales = untransposed(ins, ctx, 0), untransposed(ins, ctx, 1), ins[2]
    qa = ctx.saved.pop(("scales", ctx.ref(2)), None)
    qa = qa if qa is not None else quantize(a, 1, ctx.limbs, fuse=ctx.fuse)
    if not torch.equal(qa.scale.reshape(-1), scales.reshape(-1)):
        raise TraceError("weight_grad_transposed: the row scales given are not the rows' own")
    if native.small(g, ctx.fuse) and qa.has_q64 and native_linear.exact(g.shape[0], ctx.limbs):
        return (native_linear.weight_grad(g, qa, operand_bits(a.shape[0], 0))[0],)  # as GradBook.linear's
    book = GradBook(ctx.engine, ctx.limbs, a.shape[0])
    book.weight("w", g, qa)
    return (book.result()["w"],)


def _column_sum(ins, at, ctx: Context):
    vt = ins[0]
    book = GradBook(ctx.engine, ctx.limbs, vt.shape[1])
    book.columns("b", untransposed(ins, ctx, 0))
    return (book.result()["b"],)


def _xent_partial_sum(ins, at, ctx: Context):
    """``P[r][b]``: the engine's ``softmax_xent`` up to its integers, summed by blocks."""
    z = ins[0].to(F64)
    e = _exp64_core((z - z.amax(dim=1, keepdim=True)).clamp_min(_EXP_MIN))
    q = torch.round(e * 2.0 ** (EXACT_BITS - ceil_log2(e.shape[1])))
    width = at["width"]
    return (torch.stack([q[:, b:b + width].sum(dim=1) for b in range(0, q.shape[1], width)], dim=1),)


def _xent(ins, at, ctx: Context, total_rows: int):
    key = ("xent", ctx.ref(0), ctx.ref(2), total_rows)  # the gradient and the loss share one call
    if key not in ctx.saved:
        ctx.saved[key] = softmax_xent(ins[0].contiguous(), ins[2].reshape(-1).long(), total_rows, ctx.fuse)
    return ctx.saved[key]


def _xent_grad(ins, at, ctx: Context):
    return (_xent(ins, at, ctx, at["total_rows"])[0],)


def _xent_loss(ins, at, ctx: Context):
    _, sumexp, target = _xent(ins, at, ctx, ins[0].shape[0])
    return (xent_loss(sumexp, target),)


def _sgd(ins, at, ctx: Context):
    spec = OptimizerSpec("sgd", lr=at["lr"], momentum=at["momentum"], weight_decay=at["weight_decay"])
    params = {"p": ins[0].clone()}
    state = {"momentum.p": ins[2].clone()} if len(ins) > 2 else {}
    repro_update(spec, params, {"p": ins[1]}, state)
    return (params["p"],) + tuple(state.values())


EVALUATORS = {
    "linear": _linear, "relu": _relu, "apply_mask": _apply_mask, "permute": _permute,
    "row_scales": _row_scales, "weight_grad_transposed": _weight_grad, "column_sum": _column_sum,
    "xent_partial_sum": _xent_partial_sum, "xent_grad": _xent_grad, "xent_loss": _xent_loss,
    "sgd": _sgd,
}


EVALUATORS.update(LM_EVALUATORS)


def evaluate(index: int, app, inputs: list[torch.Tensor], ctx: Context) -> tuple[torch.Tensor, ...]:
    """Every output of one application ``app``."""
    if app.kind not in EVALUATORS:
        raise TraceError(f"no evaluator for the kind {app.kind!r}")
    ctx.app, ctx.index = app, index
    with torch.no_grad():
        return EVALUATORS[app.kind](inputs, app.attrs, ctx)
