"""The one-step calls of the LM's and the Adam(W) update's kinds (see :mod:`.openings`):
LayerNorm, the causal softmax (row sums, element, backward), GELU, the embedding's gather
and scatter, the add, dropout, Adam and its beta powers. The softmax's scores and
probabilities (N, T, T) are described as rows (N·T, T), its row sums as (N·T, 2)."""

from __future__ import annotations

import numpy as np

from .kinds_lm import key_bytes
from .openings import NONE, OneStepCall, _f32, _Tensor


def _f64(v: float) -> int:
    return int(np.float64(v).view(np.uint64))


def _rows(t: _Tensor) -> _Tensor:
    """A (N, T, T) tensor described as its rows (N·T, T)."""
    last = t.t.shape[-1]
    return _Tensor(t.t, (t.t.numel() // last, last))


def lm_call(app, ins: list[_Tensor], trace, element: int, want: int) -> OneStepCall | None:
    """The verifier call of ``element`` of ``app``'s output, or None for a kind not here."""
    at, kind, pick = app.attrs, app.kind, app.output
    cols = app.shape[-1] if app.shape else 1
    i, j = divmod(element, cols)
    descs = [x.desc for x in ins]
    if kind == "layernorm":
        x, w, b = ins
        return OneStepCall("OneStepLayerNormHarness", "layerNormElement",
                           (descs, _f64(at["eps_f64"]), i, j, [x.row(i), w.open(j), b.open(j)]), want)
    if kind == "layernorm_backward":
        x, g, w = ins
        return OneStepCall("OneStepLayerNormHarness", "layerNormBackwardElement",
                           (descs, _f64(at["eps_f64"]), i, j, [x.row(i), g.row(i), w.open(0, w.t.numel())]),
                           want, pick)
    if kind == "softmax_row_sum":
        s = _rows(ins[0])
        return OneStepCall("OneStepSoftmaxHarness", "rowSumElement", (s.desc, element, s.row(element)), want)
    if kind in ("softmax", "softmax_backward"):
        t = app.shape[-1]
        r, j = divmod(element, t)
        a = _rows(ins[0])
        if kind == "softmax":
            sums = _Tensor(ins[1].t, (ins[1].t.numel(), 2))
            return OneStepCall("OneStepSoftmaxHarness", "softmaxElement",
                               ([a.desc, sums.desc], r, j, [a.row(r), sums.row(r)]), want)
        dp = _rows(ins[1])
        return OneStepCall("OneStepSoftmaxHarness", "softmaxBackwardElement",
                           ([a.desc, dp.desc], _f32(at["scale"]), r, j, [a.row(r), dp.row(r)]), want)
    if kind == "gelu":
        return OneStepCall("OneStepGeluHarness", "geluElement", (descs[0], element, ins[0].open(element)), want)
    if kind in ("gelu_backward", "add"):
        b = ins[1]
        contract, fn = (("OneStepGeluHarness", "geluBackwardElement") if kind == "gelu_backward"
                        else ("OneStepElementwiseHarness", "addElement"))
        return OneStepCall(contract, fn, (descs, element, [ins[0].open(element), b.open(element % b.t.numel())]),
                           want)
    if kind == "embedding":
        ids, table = _Tensor(ins[0].t, (1, ins[0].t.numel())), ins[1]
        row = int(trace.tensor(app.inputs[0]).reshape(-1)[i])
        return OneStepCall("OneStepElementwiseHarness", "embeddingElement",
                           (ids.desc, table.desc, i, j, [ids.open(i), table.open(row * table.cols + j)]), want)
    if kind == "dropout":
        key = key_bytes(trace.tensor(app.inputs[1]))  # the step's key: a batch tensor
        d = ("0x" + key.hex(), at["site"].encode(), _f64(at["p_f64"]), at["first"])
        return OneStepCall("OneStepElementwiseHarness", "dropoutElement", (d, descs[0], element,
                                                                           ins[0].open(element)), want)
    if kind == "scatter":
        gt, ids = ins[0], _Tensor(ins[1].t, (1, ins[1].t.numel()))
        return OneStepCall("OneStepExactSumHarness", "scatterElement",
                           ([gt.desc, ids.desc], at["rows"], i, j, [gt.row(j), ids.open(0, ids.cols)]), want)
    if kind in ("adam", "adam_powers"):
        if kind == "adam":  # the harness takes the rate (the last input) as its attribute
            lr, ins, descs = float(ins[-1].t), ins[:-1], descs[:-1]
        s = (_f32(lr) if kind == "adam" else 0, _f32(at.get("weight_decay", 0.0)), _f32(at["beta1"]),
             _f32(at["beta2"]), _f32(at.get("eps", 0.0)), bool(at.get("decoupled", 0)), bool(at.get("clipped", 0)))
        if kind == "adam_powers":
            return OneStepCall("OneStepOptimHarness", "adamPowersElement", (s, descs, [x.open(0) for x in ins]),
                               want, pick)
        opens = [x.open(element) for x in ins[:4]] + [x.open(0) for x in ins[4:]]
        pad = 7 - len(ins)
        return OneStepCall("OneStepOptimHarness", "adamElement",
                           (s, descs + [NONE] * pad, element, opens + [(b"", [])] * pad), want, pick)
    return None
