"""Generated cases for the one-step linear element (contracts/numerics/OneStepGemm.sol):
products ``x @ W.T + b`` run through the engine (truetrain/training/intgemm.py) on its
float64, int8 and fused routes, which must agree, cut into one case per output element
(row of x, row of W, bias, the engine's bits). Shared by tests/contracts/test_onestep_gemm.py
and scripts/onestep_fuzz.py.

Each matrix is of one kind, so that every kind reaches every contraction length: random
rows on scales 2**±40, wide exponents in one row, zeros (and ±0, all-zero rows), subnormal
rows and rows whose maximum is below the clamp, limb extremes (the integers ±(2**bits - 1),
-2**bits, and maxima that round up to 2**bits and are clamped), exact quantisation ties,
sums built to tie at the final float32 rounding, results near the float32 subnormal and
overflow boundaries, and rows holding inf or NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from truetrain.numerics.gemm_element import linear_element
from truetrain.numerics.tensor_merkle import canonical_bits
from truetrain.training.intgemm import GemmEngine, operand_bits, quantize

ENGINES = (GemmEngine(route="float64"), GemmEngine(route="int8", small_product=0), GemmEngine(fuse=True))
KINDS = ("random", "wide", "zeros", "subnormal", "limb_extremes", "quantise_ties", "final_ties",
         "boundary", "specials")
F32 = torch.float32


@dataclass
class Batch:
    """Cases of one contraction length ``k``: rows as big-endian bytes, bias words (bit 32
    set: a bias), the engine's bits."""

    k: int
    limbs: int
    rows_a: list[bytes]
    rows_b: list[bytes]
    bias: list[int]
    expected: list[int]


def _f32(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))


def _scaled(rng, shape, lo: int, hi: int) -> np.ndarray:
    """Normal values, each row on a power-of-two scale in [lo, hi)."""
    return rng.standard_normal(shape) * np.exp2(rng.integers(lo, hi, (shape[0], 1)))


def _integers(rng, rows: int, k: int, bits: int, extreme: bool) -> np.ndarray:
    """Integer rows whose first element fixes the scale (magnitude 2**bits - 1, in the top
    binade, so ``x * up`` gives the integers back)."""
    top = 1 << bits
    q = rng.integers(-(top - 1), top, (rows, k)).astype(np.float64)
    if extreme:
        picks = np.array([-top, top - 1, -(top - 1), 0, 1, -1, top // 2, -(top // 2)], np.float64)
        q = np.where(rng.random((rows, k)) < 0.6, rng.choice(picks, (rows, k)), q)
    q[:, 0] = rng.choice([top - 1, -(top - 1)], rows)
    return q


def _matrix(kind: str, rng, rows: int, k: int, bits: int) -> np.ndarray:
    if kind == "random":
        return _scaled(rng, (rows, k), -40, 40)
    if kind == "wide":
        return rng.standard_normal((rows, k)) * np.exp2(rng.integers(-60, 60, (rows, k)))
    if kind == "zeros":
        x = _scaled(rng, (rows, k), -10, 10)
        x[rng.random((rows, k)) < 0.7] = 0.0
        x[rng.random((rows, k)) < 0.2] = -0.0
        x[0] = 0.0
        return x
    if kind == "subnormal":  # subnormal rows, and rows whose maximum is under the clamp
        return rng.standard_normal((rows, k)) * np.exp2(rng.integers(-149, -100, (rows, 1)))
    if kind == "boundary":  # S * 2**exp near the float32 subnormal range, or past the largest
        lo, hi = (-75, -55) if rng.random() < 0.5 else (58, 70)
        return _scaled(rng, (rows, k), lo, hi)
    if kind == "specials":  # inf or NaN in some rows
        x = _scaled(rng, (rows, k), -10, 10)
        x[0, rng.integers(k)] = rng.choice([np.inf, -np.inf, np.nan])
        x[-1, rng.integers(k)] = rng.choice([np.inf, np.nan])
        return x
    q = _integers(rng, rows, k, bits, kind == "limb_extremes")
    scale = np.exp2(rng.integers(-20, 20, (rows, 1)).astype(np.float64))
    if kind == "quantise_ties" and k > 1:  # x * up lands on n + 1/2
        q[:, 1:] = np.clip(q[:, 1:] + 0.5 * np.sign(rng.standard_normal((rows, k - 1))), -(1 << bits) + 1, (1 << bits) - 1)
    x = q * scale
    if kind == "limb_extremes" and k > 1:  # maxima just under the next binade: round up to 2**bits, clamped
        x[::2, 0] = np.sign(x[::2, 0]) * ((1 << bits) - 2.0**-10) * scale[::2, 0]
    return x


def _tie(rng, xq: np.ndarray, wq: np.ndarray, bits: int) -> bool:
    """Set ``xq[-1] = 1`` and ``wq[-1]`` so that the integer sum ties at float32's rounding
    (its bits below the kept 24 exactly one half); False where no such ``wq[-1]`` fits."""
    if len(xq) < 2:
        return False
    xq[-1] = 1
    rest = int(np.dot(xq[:-1].astype(np.int64), wq[:-1].astype(np.int64)))
    unit = 1 << max(1, abs(rest).bit_length() - 24)
    target = (rest // unit) * unit + unit // 2
    d = target - rest
    if abs(d) >= (1 << bits) - 1 or abs(target).bit_length() != abs(rest).bit_length() or abs(rest) < 1 << 25:
        return False
    wq[-1] = d
    return True


def _final_ties(rng, rows: int, cols: int, k: int, bits: int):
    """Integer products (scales 2**t) whose sums tie at the final rounding, where they can."""
    xq, wq = _integers(rng, rows, k, bits, False), _integers(rng, cols, k, bits, False)
    for i in range(rows):
        for j in range(cols):
            if (i + j) % max(rows, cols) == 0:  # one pair per row: its sum ties
                _tie(rng, xq[i], wq[j], bits)
    tx = np.exp2(rng.integers(-20, 20, (rows, 1)).astype(np.float64))
    tw = np.exp2(rng.integers(-20, 20, (cols, 1)).astype(np.float64))
    return xq * tx, wq * tw


def product(kind: str, rng, rows: int, cols: int, k: int, limbs: int, with_bias: bool):
    """``(x, w, b, out)`` for one product of ``kind`` (b None without a bias): the engine's
    output, every route agreeing."""
    bits = operand_bits(limbs)
    if kind == "final_ties":
        x, w = _final_ties(rng, rows, cols, k, bits)
    else:
        x, w = _matrix(kind, rng, rows, k, bits), _matrix(kind, rng, cols, k, bits)
    x, w = _f32(x), _f32(w)
    b = None
    if with_bias:
        b = _f32(rng.standard_normal(cols) * np.exp2(rng.integers(-30, 10, cols)))
        b[rng.random(cols) < 0.2] = -0.0
    outs = [canonical_bits(e.matmul(quantize(x, 1, limbs), quantize(w.T, 0, limbs), b)) for e in ENGINES]
    for other in outs[1:]:
        if not np.array_equal(outs[0], other):
            raise AssertionError(f"the engine's routes disagree on a {kind} product")
    return x, w, b, outs[0].reshape(rows, cols)


def cases(rng, k: int, limbs: int, count: int, rows: int = 4, cols: int = 4) -> Batch:
    """At least ``count`` cases of contraction length ``k``, the kinds in turn, half the
    products with a bias."""
    batch = Batch(k, limbs, [], [], [], [])
    n = 0
    while len(batch.expected) < count:
        kind = KINDS[n % len(KINDS)]
        x, w, b, out = product(kind, rng, rows, cols, k, limbs, n % 2 == 1)
        n += 1
        xb, wb = canonical_bits(x).reshape(rows, k), canonical_bits(w).reshape(cols, k)
        bb = None if b is None else canonical_bits(b)
        for i in range(rows):
            for j in range(cols):
                batch.rows_a.append(xb[i].astype(">u4").tobytes())
                batch.rows_b.append(wb[j].astype(">u4").tobytes())
                batch.bias.append(0 if bb is None else (1 << 32) | int(bb[j]))
                batch.expected.append(int(out[i, j]))
    return batch


def words(row: bytes) -> list[int]:
    """A big-endian row's bit patterns."""
    return [int.from_bytes(row[i:i + 4], "big") for i in range(0, len(row), 4)]


def per_call(k: int) -> int:
    """Cases an eth_call holds for rows of ``k`` (about 1,000 gas a product, 16 a byte of
    calldata, under the 30 M call gas)."""
    return max(1, min(500, 16_000_000 // (1_300 * k + 20_000)))


def check(call, batch: Batch) -> list[str]:
    """Each case of ``batch`` through ``call(limbs, k, rows_a, rows_b, bias)`` (one
    eth_call of OneStepGemmHarness.elements a slice) against the engine's bits and the
    reference's (truetrain/numerics/gemm_element.py); the mismatches, described."""
    bad, step = [], per_call(batch.k)
    for lo in range(0, len(batch.expected), step):
        hi = min(lo + step, len(batch.expected))
        got = call(batch.limbs, batch.k, b"".join(batch.rows_a[lo:hi]), b"".join(batch.rows_b[lo:hi]),
                   batch.bias[lo:hi])
        for c, value in zip(range(lo, hi), got):
            bias = batch.bias[c] & 0xFFFFFFFF if batch.bias[c] >> 32 else None
            ref = linear_element(words(batch.rows_a[c]), words(batch.rows_b[c]), batch.limbs, bias)
            if not value == ref == batch.expected[c]:
                bad.append(f"K={batch.k} limbs={batch.limbs} case {c}: chain {value:#010x} reference {ref:#010x} "
                           f"engine {batch.expected[c]:#010x}")
    return bad
