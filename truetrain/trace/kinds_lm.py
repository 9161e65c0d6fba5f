"""The transformer LM's kinds and the Adam(W) update's, evaluated by the engine's own
functions (ops/attention.py, ops/elementwise.py, ops/dropout.py, the GradBook, optim.py,
schedule.py), as :mod:`.kinds` does the MLP's. What the engine computes inside one call
and the program splits (the softmax's row sums, the clip factor's block maxima and sums)
is computed here with the engine's own functions up to that point."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..errors import TraceError
from ..training import intgemm_fused, native, native_chains
from ..training.ops import GradBook, bmm_exact
from ..training.ops.attention import _causal_mask
from ..training.ops.dropout import keep_mask
from ..training.optim import OptimizerSpec, repro_update
from ..training.repro_ops import _EXP_COEFFS, EXACT_BITS, F64, ceil_log2, exp64, unit_row_sum
from ..training.schedule import clip_of_norm, norm_of_sum, square_grid, square_terms

if TYPE_CHECKING:
    from .kinds import Context


def untransposed(ins, ctx: Context, i: int) -> torch.Tensor:
    """Input ``i``, a transpose's output, transposed back (the transpose's input where the
    transpose kept it: ``kinds._permute``)."""
    plain = ctx.saved.get(("plain", ctx.ref(i)))
    return plain.contiguous() if plain is not None else ins[i].T.contiguous()

SUMS_SOURCE = Path(__file__).with_name("softmax_sums.c")
_state: dict = {}


def _part(x: torch.Tensor, part: int) -> torch.Tensor:
    """Part ``part`` of a (parts, N, M, K) tensor; a (N, M, K) one is its only part."""
    return x[part] if x.dim() == 4 else x


def _bmm(ins, at, ctx: Context):
    a, bt = _part(ins[0], at["a_part"]), _part(ins[1], at["b_part"])
    out = bmm_exact(a, bt.transpose(1, 2), ctx.limbs, ctx.fuse, ctx.engine.route == "int8")
    return (out * at["scale"] if at["scale"] != 1.0 else out,)


def _eager_row_sums(s: torch.Tensor) -> torch.Tensor:
    """``softmax_causal``'s exact row sums, by its eager ops up to the sum."""
    n, t, _ = s.shape
    z = s.to(F64).masked_fill(_causal_mask(t, s.device), float("-inf"))
    return unit_row_sum(exp64(z - z.amax(-1, keepdim=True)).view(n * t, t))


def _sums_kernel():
    """``softmax_sums.c`` (the engine's C softmax up to its sum), or None where the engine
    has no C kernels; built and checked against the eager ops once a process."""
    if "sums" not in _state:
        lib = None
        if native.ready():
            lib = ctypes.CDLL(str(native.build_library(
                "softmax-sums", [SUMS_SOURCE], [*native.FLAGS, f"-I{native.CHAIN_SOURCE.parent}"],
                extra=(native.CHAIN_SOURCE,), args=("-lm", str(native._compile())))))  # its other kernels
            lib.tt_softmax_row_sums.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int,
                                                ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
            lib.tt_softmax_row_sums.restype = ctypes.c_int
            gen = torch.Generator().manual_seed(28)
            for n, t, scale in ((3, 7, 1.0), (2, 64, 30.0), (1, 128, 1e-3)):
                s = torch.randn(n, t, t, generator=gen) * scale
                s[0, -1, 0], s[-1, 1, 1] = float("-inf"), float("nan")
                if not torch.equal(*(_canonical(x) for x in (_c_row_sums(lib, s), _eager_row_sums(s)))):
                    raise TraceError("the C softmax row sums differ from the eager ops'")
        _state["sums"] = lib
    return _state["sums"]


def _canonical(x: torch.Tensor) -> torch.Tensor:
    """float64 bits with every NaN one pattern (as a tensor's tree holds them)."""
    return torch.where(x.isnan(), torch.full_like(x, float("nan")), x).view(torch.int64)


def _c_row_sums(lib, s: torch.Tensor) -> torch.Tensor:
    s = s.contiguous()
    n, t, _ = s.shape
    out = torch.empty(n * t, dtype=F64)
    coeffs = torch.tensor(_EXP_COEFFS, dtype=F64)
    if lib.tt_softmax_row_sums(s.data_ptr(), n * t, t, EXACT_BITS - ceil_log2(t), coeffs.data_ptr(), out.data_ptr(),
                               torch.get_num_threads()):
        raise MemoryError("tt_softmax_row_sums: no scratch memory")
    return out


def _softmax_row_sum(ins, at, ctx: Context):
    """The row sums as a column (N·T, 1)."""
    s = ins[0]
    lib = _sums_kernel() if native_chains.usable(s, ctx.fuse) else None
    return ((_c_row_sums(lib, s) if lib is not None else _eager_row_sums(s)).view(-1, 1),)


def _softmax(ins, at, ctx: Context):
    return (intgemm_fused.run("softmax_causal", ctx.fuse, ins[0].contiguous()),)


def _softmax_backward(ins, at, ctx: Context):
    return (intgemm_fused.run("softmax_backward", ctx.fuse, ins[0], ins[1].contiguous(), at["scale"]),)


def _layernorm(ins, at, ctx: Context):
    y, xhat, rstd = intgemm_fused.run("ln_forward", ctx.fuse, ins[0], ins[1], ins[2], at["eps_f64"])
    ctx.saved[("ln", ctx.ref(0))] = (xhat, rstd)
    return (y,)


def _layernorm_backward(ins, at, ctx: Context):
    x, g, w = ins
    saved = ctx.saved.pop(("ln", ctx.ref(0)), None)
    if saved is None:  # the forward's float64 rows, recomputed (they do not read the gain)
        _, *saved = intgemm_fused.run("ln_forward", ctx.fuse, x, w, torch.zeros_like(w), at["eps_f64"])
    return tuple(intgemm_fused.run("ln_backward", ctx.fuse, g.contiguous(), saved[0], saved[1], w))


def _gelu(ins, at, ctx: Context):
    x = ins[0]
    if native_chains.usable(x, ctx.fuse):  # the engine's route: the slope kept for the backward
        y, slope = native_chains.gelu_slope(x)
        ctx.saved[("slope", ctx.ref(0))] = slope
        return (y,)
    return (intgemm_fused.run("gelu", ctx.fuse, x),)


def _gelu_backward(ins, at, ctx: Context):
    x, g = ins[0], ins[1].contiguous()
    slope = ctx.saved.pop(("slope", ctx.ref(0)), None)
    if slope is not None:
        return (native_chains.times_slope(g, slope),)
    if native_chains.usable(x, ctx.fuse):
        return (native_chains.times_slope(g, native_chains.gelu_slope(x)[1]),)
    return (intgemm_fused.run("gelu_backward", ctx.fuse, x, g),)


def _embedding(ins, at, ctx: Context):
    return (ins[1].index_select(0, ins[0].reshape(-1).long()),)


def _add(ins, at, ctx: Context):
    a, b = ins
    if a.shape == b.shape:
        return (a + b,)
    return ((a.reshape(-1, b.numel()) + b.reshape(-1)).view(a.shape),)  # b repeated (positions over a batch)


def key_bytes(words: torch.Tensor) -> bytes:
    """A dropout key's 32 bytes from its batch tensor of 8 int32 words (big-endian)."""
    return b"".join(int(w).to_bytes(4, "big", signed=True) for w in words.reshape(-1).tolist())


def _dropout(ins, at, ctx: Context):
    x = ins[0]
    return (x * keep_mask(x.shape, key_bytes(ins[1]), at["site"], at["first"], at["p_f64"], x.device),)


def _scatter(ins, at, ctx: Context):
    gt, ids = ins
    book = GradBook(ctx.engine, ctx.limbs, gt.shape[1])
    book.scatter("t", untransposed(ins, ctx, 0), ids.reshape(-1).long(), at["rows"])
    return (book.result()["t"],)


def _increment(ins, at, ctx: Context):
    return (ins[0] + 1,)


def _adam_powers(ins, at, ctx: Context):
    return ins[0] * at["beta1"], ins[1] * at["beta2"]


def _adam(ins, at, ctx: Context):
    """``repro_update`` on one parameter: the step's rate (the last input, a 0-dim batch
    tensor) at schedule step 0 of a flat schedule is that rate itself."""
    spec = OptimizerSpec("adamw" if at["decoupled"] else "adam", lr=float(ins[-1]), weight_decay=at["weight_decay"],
                         betas=(at["beta1"], at["beta2"]), eps=at["eps"], min_lr_ratio=1.0,
                         clip_norm=1.0 if at["clipped"] else 0.0)
    params = {"p": ins[0].clone()}
    state = {"exp_avg.p": ins[2].clone(), "exp_avg_sq.p": ins[3].clone(), "beta1_power": ins[4].clone(),
             "beta2_power": ins[5].clone(), "lr_step": torch.zeros((), dtype=torch.int64)}
    repro_update(spec, params, {"p": ins[1]}, state, clip=ins[6] if at["clipped"] else None)
    return params["p"], state["exp_avg.p"], state["exp_avg_sq.p"]


def _ranges(grads, width: int) -> list[torch.Tensor]:
    """Every gradient, in order, cut into ranges of ``width`` values (flat views)."""
    return [f[i:i + width] for g in grads for f in (g.reshape(-1),) for i in range(0, f.numel(), width)]


def _clip_max(ins, at, ctx: Context):
    return (torch.stack([r.abs().amax() for r in _ranges(ins, at["width"])]),)


def _clip_sum(ins, at, ctx: Context):
    """Each range's squares (``schedule.square_terms``) on ``global_norm``'s grid, summed."""
    *grads, maxima = ins
    largest = maxima.to(F64).amax().square()  # the largest square: exact
    up, _ = square_grid(largest, at["count"])
    return (torch.stack([torch.mul(s, up).round_().sum() for s in square_terms(_ranges(grads, at["width"]))]),)


def _clip_factor(ins, at, ctx: Context):
    maxima, sums = ins
    _, down = square_grid(maxima.to(F64).amax().square(), at["count"])
    norm = norm_of_sum(sums.sum(), down)  # integers below 2**53: exact in any order
    return (clip_of_norm(norm, at["clip_norm_f64"]),)


LM_EVALUATORS = {
    "bmm": _bmm, "softmax_row_sum": _softmax_row_sum, "softmax": _softmax, "softmax_backward": _softmax_backward,
    "layernorm": _layernorm, "layernorm_backward": _layernorm_backward, "gelu": _gelu,
    "gelu_backward": _gelu_backward, "embedding": _embedding, "add": _add, "dropout": _dropout,
    "scatter": _scatter, "increment": _increment,
    "adam_powers": _adam_powers, "adam": _adam, "clip_max": _clip_max, "clip_sum": _clip_sum,
    "clip_factor": _clip_factor,
}
