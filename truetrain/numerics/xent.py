"""One element of repro mode's softmax cross-entropy, on float bit patterns: the semantics
the engine (truetrain/training/repro_ops.py ``softmax_xent`` and ``xent_loss``, the C kernel
``tt_softmax_xent``) and the one-step verifier (contracts/numerics/OneStepXent.sol) compute.

Logits (R, C), labels (R,) in [0, C), the mean over ``total_rows``. Per row, float64:
``m`` = the row's largest logit (NaN if one is), ``d = z - m``,
``e = exp_core(max(d, -708))`` (the clamp keeps ``exp(-708)`` for smaller values; NaN stays
NaN), ``k = 53 - ceil_log2(C)``:

* **partial sums** (an application of its own: a row of the LM's 256 classes is 256 exp64s,
  over the 10 M gas limit, so it is cut into blocks of ``width`` columns):
  ``P[b] = sum(round(e[j] * 2**k))`` over the block's columns, an integer (float64, exact);
* ``S = (sum(P) + 0) * 2**-k`` (the engine's ``sumexp``: integer sums are exact in any
  grouping);
* the **gradient** ``float32(((e[j] / S) + (-1 if j == y else 0)) / total_rows)`` (the
  ``-1`` one float64 addition, ``scatter_add_``'s);
* the **loss** of a row, float64: ``log64(S) - (z[y] - m)`` (``xent_loss`` of ``sumexp``
  and ``target``).
"""

from __future__ import annotations

import numpy as np

from .ieee import NAN64, add64, bits64, div64, int_to64, sub64, to32, to64
from .special import EXP_MIN, exp64, log64

NEG_ONE64 = 0xBFF0000000000000


def _exps(logits) -> tuple[np.ndarray, np.ndarray]:
    """``(d, e)`` float64 bits (R, C): the logits less the row maximum, and their clamped exps."""
    z = np.asarray(to64(np.asarray(logits, np.uint32)), np.uint64)
    zf = z.view(np.float64)
    nan = np.isnan(zf)
    m = np.where(nan.any(axis=-1), np.nan, np.where(nan, -np.inf, zf).max(axis=-1))
    d = np.asarray(sub64(z, bits64(m)[:, None]), np.uint64)
    with np.errstate(all="ignore"):
        clamped = bits64(np.maximum(d.view(np.float64), EXP_MIN))  # NaN stays NaN
    return d, np.asarray(exp64(clamped), np.uint64)


def _k(classes: int) -> int:
    return 53 - max(0, (classes - 1).bit_length())


def partial_sums(logits, width: int) -> np.ndarray:
    """float64 bits (R, B) of each row's integer partial sums over blocks of ``width`` columns."""
    _, e = _exps(logits)
    q = np.rint(e.view(np.float64) * 2.0 ** _k(e.shape[-1]))
    blocks = [q[:, b:b + width].sum(axis=-1) for b in range(0, e.shape[-1], width)]
    s = np.stack(blocks, axis=-1)
    return np.where(np.isnan(s), np.uint64(NAN64), s.view(np.uint64))


def row_sums(partials, classes: int) -> np.ndarray:
    """float64 bits (R,) of ``sumexp`` from the partial sums (R, B)."""
    with np.errstate(all="ignore"):
        s = (np.asarray(partials, np.uint64).view(np.float64).sum(axis=-1) + 0.0) * 2.0 ** -_k(classes)
    return bits64(s)


def xent_grad(logits, labels, partials, total_rows: int) -> np.ndarray:
    """float32 bits (R, C) of the mean loss's gradient."""
    _, e = _exps(logits)
    s = np.asarray(row_sums(partials, e.shape[-1]), np.uint64)
    p = np.asarray(div64(e, s[:, None]), np.uint64)
    hit = np.arange(e.shape[-1])[None, :] == np.asarray(labels, np.int64)[:, None]
    p = np.where(hit, np.asarray(add64(p, NEG_ONE64), np.uint64), p)
    return np.asarray(to32(div64(p, int_to64(total_rows))), np.uint32)


def xent_loss(logits, labels, partials) -> np.ndarray:
    """float64 bits (R,) of each row's loss ``log64(sumexp) - target``."""
    d, e = _exps(logits)
    target = np.take_along_axis(d, np.asarray(labels, np.int64)[:, None], axis=-1)[:, 0]
    return np.asarray(sub64(log64(row_sums(partials, e.shape[-1])), target), np.uint64)
