"""Generated cases for the one-step exact sums (contracts/numerics/OneStepExactSum.sol): a
batch's gradient columns run through the engine's ``GradBook`` (truetrain/training/ops/book.py:
``columns`` eagerly, through the C kernel ``tt_column_sums`` and in two micro-batches
observed then added; a linear layer's bias through ``linear``'s C routes, ``native_linear``
and ``tt_grad_columns``; ``scatter`` whole and in two micro-batches), which must agree, against
the chain and the reference (truetrain/numerics/exact_sum.py).

Columns of 1, 2, 3, 7, 64, 100, 257 and 1,024 rows (the scale's bits from 24 down to 42 - 53
limits, the LM's 1,024 tokens): normal columns on scales 2^-140 to 2^120, wide exponents
within a column (most values round to ±0), all-zero columns with ±0, subnormal columns
(scales past 2^-149), columns holding ±inf or NaN, columns near the largest float32 (sums
that overflow), quantisation ties (values at odd multiples of half the quantum), sums that
cancel to 0, and the float library's edge-rich values. Scatters into tables of 1 to 40 rows,
ids drawn to leave rows empty. Shared by tests/contracts/test_onestep_exact_sum.py and
scripts/onestep_kinds_fuzz.py.
"""

from __future__ import annotations

import numpy as np
import torch

from tests.contracts.float_cases import F32 as FMT32, random_floats
from tests.contracts.onestep_kinds import mismatches
from truetrain.numerics.exact_sum import column_sums, scatter_sums, sum_bits
from truetrain.numerics.ieee import bits32
from truetrain.training import native
from truetrain.training.intgemm import GemmEngine, Operand, quantize
from truetrain.training.ops.book import GradBook

ROWS = [1, 2, 3, 7, 64, 100, 257, 1024]
COLUMN_KINDS = ("normal", "wide", "zero", "subnormal", "specials", "large", "ties", "cancel", "edge")
LIMBS = 2


def _column(rng, n: int) -> np.ndarray:
    kind = COLUMN_KINDS[int(rng.integers(len(COLUMN_KINDS)))]
    if kind == "normal":
        return (rng.standard_normal(n) * np.exp2(rng.integers(-140, 120))).astype(np.float32)
    if kind == "wide":
        return (rng.standard_normal(n) * np.exp2(rng.integers(-60, 60, n))).astype(np.float32)
    if kind == "zero":
        return np.where(rng.random(n) < 0.5, np.float32(0.0), np.float32(-0.0)).astype(np.float32)
    if kind == "subnormal":
        return (rng.integers(-(1 << 12), 1 << 12, n) * np.exp2(-149.0)).astype(np.float32)
    if kind == "specials":
        out = rng.standard_normal(n).astype(np.float32)
        for _ in range(int(rng.integers(1, 3))):
            out[rng.integers(n)] = rng.choice([np.inf, -np.inf, np.nan])
        return out
    if kind == "large":
        return (rng.choice([-1.0, 1.0], n) * (1.0 + rng.random(n)) * 2.0**127).astype(np.float32)
    if kind in ("ties", "cancel"):
        # the quantum is 2^(e - bits + 1) for e the exponent of the largest magnitude
        bits, e = sum_bits(n), int(rng.integers(-100, 100))
        quantum = np.exp2(e - bits + 1)
        k = rng.integers(-(1 << (bits - 2)), 1 << (bits - 2), n)  # k + 1/2 fits float32
        out = ((k + (0.5 if kind == "ties" else 0.0)) * quantum).astype(np.float32)
        out[0] = np.float32(np.exp2(e) * 1.5)
        if kind == "cancel" and n > 1:
            out[1:] = 0
            out[-1] = -out[0]
        return out
    return random_floats(rng, n, FMT32).astype(np.uint64).astype(np.uint32).view(np.float32)


def _inputs(rng, n_elements: int, per_column: int = 1) -> tuple[int, np.ndarray]:
    """``(n, v (n, cols))``: a batch's gradient of ``cols`` columns, each of a kind, each
    giving ``per_column`` outputs (8,192 values read in all, at most: one eth_call's gas)."""
    if not native.ready():
        raise AssertionError(f"the engine's C kernels are not in use: {native._state.get('reason')}")
    n = ROWS[int(rng.integers(len(ROWS)))]
    cols = max(1, min(n_elements, 8192 // n) // per_column)
    return n, np.stack([_column(rng, n) for _ in range(cols)], axis=1)


def _book(fuse: bool, rows: int) -> GradBook:
    return GradBook(GemmEngine(fuse=fuse), LIMBS, rows)


def _engine(v: np.ndarray, record) -> list[np.ndarray]:
    """The parameter gradient ``record(book, slice)`` gives, through a book fed the batch whole
    (eager, then fused: the C kernels) and in two micro-batches (observed, then added)."""
    t = torch.from_numpy(v.copy())
    out = []
    for fuse in (False, True):
        book = _book(fuse, len(v))
        record(book, t, slice(None))
        out.append(bits32(book.result()["p"].numpy()))
    half = slice(0, len(v) // 2), slice(len(v) // 2, None)
    book = _book(False, len(v))
    for mode in ("observe", "add"):
        book.mode = mode
        for part in half:
            if t[part].shape[0]:
                record(book, t, part)
    out.append(bits32(book.result()["p"].numpy()))
    return out


def _linear_bias(v: np.ndarray, rng) -> list[np.ndarray]:
    """A linear layer's bias gradient from its output gradient ``v`` as ``GradBook.linear``
    takes it on small CPU tensors: with the weight's in one C call (``native_linear``), and
    through ``native.grad_columns`` (forward rows without their float64 integers)."""
    qa = quantize(torch.from_numpy(rng.standard_normal((len(v), 3)).astype(np.float32)), 1, LIMBS, fuse=True)
    out = []
    for rows in (qa, Operand(qa.q, qa.scale, qa.limbs)):
        book = _book(True, len(v))
        book.linear("w", "p", torch.from_numpy(v.copy()), rows)
        out.append(bits32(book.result()["p"].numpy()))
    return out


def column_sum_case(rng, n_elements: int, call):
    n, v = _inputs(rng, n_elements)
    engine = _engine(v, lambda book, t, part: book.columns("p", t[part])) + _linear_bias(v, rng)
    vt = bits32(v).T.copy()
    chain = np.array(call("columnSums", n, vt.astype(">u4").tobytes()), np.uint32)
    return chain, column_sums(vt), engine, {"n": n}


def scatter_case(rng, n_elements: int, call):
    num = int(rng.choice([1, 2, 5, 40]))
    n, v = _inputs(rng, n_elements, num)
    ids = rng.integers(0, max(1, num - int(rng.integers(0, 2))), n)  # the last row sometimes empty
    index = torch.from_numpy(ids)
    engine = _engine(v, lambda book, t, part: book.scatter("p", t[part], index[part], num))
    gt = bits32(v).T.copy()
    chain = np.array(call("scatterSums", n, num, gt.astype(">u4").tobytes(),
                          ids.astype(">u4").tobytes()), np.uint32)
    return chain, scatter_sums(gt, ids, num), engine, {"n": n, "num": num}


KINDS = {"column_sum": column_sum_case, "scatter": scatter_case}


def check(call, kind: str, rng, n: int) -> tuple[int, list[str]]:
    """``(elements, mismatches described)`` of one batch of columns (about ``n`` output
    elements, one eth_call through ``call(function, *args)``): the chain against the reference
    and every engine route."""
    chain, want, engines, info = KINDS[kind](rng, n, call)
    return np.asarray(chain).size, mismatches(kind, chain, want, engines, info)
