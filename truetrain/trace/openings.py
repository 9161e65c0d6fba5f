"""The one-step transaction of one element of one entry, from a trace: the function of the
kind's verifier (contracts/numerics/OneStep*.sol, exposed by the harnesses in
contracts/test/), its arguments in their ABI (tensor descriptors ``(root, rows, cols)`` and
range openings ``(chunks, proof)`` against the inputs' roots), and the element's value in
the trace. The inputs' tensors come from the trace (``build_trace(..., keep=...)`` with the
entry's input entries kept); their trees are rebuilt here.

A tensor is described as 2-D: a 0-dim one (1, 1), a vector (1, n), else (its first
dimension, the rest); a float64 or int64 tensor's columns are its words (two an element)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..errors import TraceError
from ..numerics.tensor_merkle import TensorTree, canonical_bits, words_of
from .builder import Trace, committed
from .program import Program, dims2


@dataclass(frozen=True)
class OneStepCall:
    """``function(*args)`` of the kind's verifier; its result (or result[``pick``] for a
    kind of several outputs) is ``want`` when the trace's element is the chain's."""

    contract: str
    function: str
    args: tuple
    want: int
    pick: int | None = None

    def result(self, got) -> int:
        return int(got if self.pick is None else list(got)[self.pick])


def _dims(t: torch.Tensor) -> tuple[int, int]:
    return dims2(t.shape, words_of(t.dtype))


class _Tensor:
    """One input: its tree, descriptor and openings."""

    def __init__(self, t: torch.Tensor, dims: tuple[int, int] | None = None):
        self.t = committed(t)
        self.tree = TensorTree(self.t)
        self.rows, self.cols = dims or _dims(self.t)

    @property
    def desc(self):
        return ("0x" + self.tree.root.hex(), self.rows, self.cols)

    def open(self, start: int, count: int = 1):
        chunks, proof = self.tree.open(start, count)
        return (chunks, ["0x" + p.hex() for p in proof])

    def row(self, i: int):
        return self.open(i * self.cols, self.cols)


def one_step_call(program: Program, trace: Trace, t: int, element: int) -> OneStepCall:
    """The verifier call recomputing element ``element`` (flat, row-major; a float64
    tensor's element, not word) of entry ``t``'s output from its inputs."""
    app = program.entries[t]
    if t not in trace.outputs:
        raise TraceError(f"entry {t}'s output was not kept")
    out = trace.outputs[t]
    bits = canonical_bits(committed(out))
    want = int(bits[2 * element]) << 32 | int(bits[2 * element + 1]) if app.words == 2 else int(bits[element])
    ins = [_Tensor(trace.tensor(r)) for r in app.inputs]
    cols = out.shape[-1] if out.dim() else 1
    i, j = divmod(element, cols)
    at = app.attrs
    if app.kind == "linear":
        a, bt = ins[0], ins[1]
        bias = ins[2] if at["bias"] else None
        args = (a.desc, bt.desc, bias.desc if bias else NONE, at["limbs"], i, j, a.row(i), bt.row(j),
                bias.open(j) if bias else (b"", []))
        return OneStepCall("OneStepGemmHarness", "linearElement", args, want)
    if app.kind == "relu":
        return OneStepCall("OneStepElementwiseHarness", "reluElement", (ins[0].desc, element, ins[0].open(element)),
                           want, app.output)
    if app.kind == "apply_mask":
        return OneStepCall("OneStepElementwiseHarness", "applyMaskElement",
                           ([x.desc for x in ins], element, [x.open(element) for x in ins]), want)
    if app.kind == "permute":
        shape, perm = list(at["shape"]), list(at["perm"])
        src = _permute_source(app, ins[0].t.numel(), element)
        return OneStepCall("OneStepElementwiseHarness", "permuteElement",
                           (ins[0].desc, shape, perm, element, ins[0].open(src)), want)
    if app.kind == "column_sum":
        return OneStepCall("OneStepExactSumHarness", "columnSumElement", (ins[0].desc, element, ins[0].row(element)),
                           want)
    if app.kind == "xent_partial_sum":
        return OneStepCall("OneStepXentHarness", "partialSumElement", (ins[0].desc, at["width"], i, j, ins[0].row(i)),
                           want)
    if app.kind in ("xent_grad", "xent_loss"):
        row = element if app.kind == "xent_loss" else i
        descs, opens = [x.desc for x in ins], [ins[0].row(row), ins[1].row(row), ins[2].open(row)]
        if app.kind == "xent_loss":
            return OneStepCall("OneStepXentHarness", "lossElement", (descs, row, opens), want)
        return OneStepCall("OneStepXentHarness", "gradElement", (descs, at["total_rows"], i, j, opens), want)
    if app.kind == "sgd":
        s = (_f32(at["lr"]), _f32(at["weight_decay"]), _f32(at["momentum"]))
        descs = [x.desc for x in ins] + [("0x" + "00" * 32, 0, 0)] * (3 - len(ins))
        opens = [x.open(element) for x in ins] + [(b"", [])] * (3 - len(ins))
        return OneStepCall("OneStepOptimHarness", "sgdElement", (s, descs, element, opens), want, app.output)
    from .openings_lm import lm_call

    call = lm_call(app, ins, trace, element, want)
    if call is None:
        raise TraceError(f"no one-step call for the kind {app.kind!r} here")
    return call


def _permute_source(app, numel: int, element: int) -> int:
    """The flat source index of element ``element`` of a permute entry over ``numel`` values."""
    at = app.attrs
    return int(np.arange(numel).reshape(list(at["shape"])).transpose(list(at["perm"])).reshape(-1)[element])


def _f32(v: float) -> int:
    return int(np.float32(v).view(np.uint32))


_EMPTY = (b"", [])
#: the descriptor of an absent input (no bias)
NONE = ("0x" + "00" * 32, 0, 0)


def game_openings(program: Program, trace: Trace, t: int, element: int) -> list:
    """The openings of the step game's one-step (contracts/StepGame.sol, ``oneStep``) of
    element ``element`` of entry ``t``, in the order its kind contract takes them
    (contracts/numerics/StepKindsCore.sol, StepKindsXent.sol), from ``trace``'s kept inputs
    (each described as :func:`.program.dims2` describes it, as the entry's ``dims`` do)."""
    app = program.entries[t]
    ins = [_Tensor(trace.tensor(r)) for r in app.inputs]
    cols = app.shape[-1] if app.shape else 1
    i, j = divmod(element, cols)
    if app.kind == "linear":
        return [ins[0].row(i), ins[1].row(j), ins[2].open(j) if len(ins) > 2 else _EMPTY]
    if app.kind == "relu":
        return [ins[0].open(element)]
    if app.kind == "permute":  # the source element in its input (several inputs: one after another)
        k, src = divmod(_permute_source(app, ins[0].t.numel() * len(ins), element), ins[0].t.numel())
        return [ins[k].open(src)]
    if app.kind in ("apply_mask", "add"):
        return [ins[0].open(element), ins[1].open(element % ins[1].t.numel())]
    if app.kind in ("column_sum", "softmax_row_sum"):
        return [ins[0].row(element)]
    if app.kind == "xent_partial_sum":
        return [ins[0].row(i)]
    if app.kind in ("softmax", "softmax_backward"):  # row i of the scores (rows of T) and of the other input
        return [ins[0].row(i), ins[1].row(i)]
    if app.kind in ("xent_grad", "xent_loss"):
        row = element if app.kind == "xent_loss" else i
        return [ins[0].row(row), ins[1].row(row), ins[2].open(row)]
    if app.kind == "sgd":
        return [x.open(element) for x in ins] + [_EMPTY] * (3 - len(ins))
    from .kind_openings import openings_of  # StepKindsQuant, Norm, Optim, Data (imports this module)
    return openings_of(app, ins, element)
