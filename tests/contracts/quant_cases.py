"""Generated cases for the one-step quantised products (contracts/numerics/OneStepQuant.sol):
row scales, the weight gradient's elements and attention's batched products, each through
the engine's routes (which must agree), against the chain and the reference
(truetrain/numerics/quant.py). Shared by tests/contracts/test_onestep_quant.py and
scripts/onestep_kinds_fuzz.py.

* ``row_scale``: rows of 1 to 1,024 (the linear element's kinds, tests/contracts/onestep_cases.py:
  scales 2^±40, wide exponents, zeros and ±0, subnormal rows and rows under the clamp, limb
  extremes, quantisation ties, results near the float32 boundaries, inf and NaN; maxima on a
  binade's edge; the float library's edge values) through ``intgemm.quantize`` per row and per
  column, eager and fused, ``native_planes.quantize_planes``, attention's ``_quantized`` and
  ``native_chains.quantize_batched``.
* ``weight_grad``: batches of 1 to 1,024 rows (the LM's 1,024 tokens, 2 and 3 limbs), the
  input rows of those kinds, the output gradient's columns on scales 2^±40, wide, zeros,
  quantisation ties of ``g · sa``, products that underflow into the subnormals or overflow,
  inf and NaN, edge values, through ``GradBook.weight`` (float64 route, int8 route, fused),
  in two micro-batches observed then added, and ``GradBook.linear``'s C route.
* ``bmm``: (N, M, K) @ (N, K, P) for K = 1 to 1,024 through ``bmm_exact`` on the float64,
  C-chain and int8 routes (the right operand contiguous or a transposed view), times the
  scores' scale (1, 1/8, 1/√48, a subnormal, 1e30).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from tests.contracts.float_cases import F32 as FMT32, random_floats
from tests.contracts.onestep_cases import _matrix
from tests.contracts.onestep_kinds import mismatches
from truetrain.numerics.ieee import bits32
from truetrain.numerics.quant import bmm_elements, row_scales, weight_grads
from truetrain.training import native, native_chains, native_planes
from truetrain.training.intgemm import GemmEngine, operand_bits, quantize
from truetrain.training.ops.attention import _quantized, bmm_exact
from truetrain.training.ops.book import GradBook

KS = [1, 3, 7, 64, 100, 128, 256, 1024]
BATCHES = [1, 2, 3, 7, 32, 64, 100, 257, 1024]
ROW_KINDS = ("random", "wide", "zeros", "subnormal", "limb_extremes", "quantise_ties", "boundary", "specials",
             "binade", "edge")
GRAD_KINDS = ("normal", "wide", "zeros", "ties", "underflow", "overflow", "specials", "edge")
SCALES = [1.0, 0.125, 1 / math.sqrt(48), 2.0**-149, 1e30]
VALUES = 16_384  # floats read by one eth_call, at most


def _ready() -> None:
    if not native.ready():
        raise AssertionError(f"the engine's C kernels are not in use: {native._state.get('reason')}")


def _f32(a) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.ascontiguousarray(a, dtype=np.float32)


def rows_of(kind: str, rng, rows: int, k: int, bits: int) -> np.ndarray:
    """float32 (rows, k) of a row kind (the linear element's, a binade's edge, edge values)."""
    if kind == "edge":
        return random_floats(rng, rows * k, FMT32).astype(np.uint64).astype(np.uint32).view(np.float32).reshape(rows, k)
    if kind == "binade":  # maxima exactly 2^t or just under it (2 - 2^-23) 2^(t-1)
        x = rng.standard_normal((rows, k)) * 0.1
        top = np.where(rng.random(rows) < 0.5, 1.0, 1 - 2.0**-24) * np.exp2(rng.integers(-130, 127, rows))
        x = x * top[:, None]
        x[:, 0] = top * rng.choice([-1.0, 1.0], rows)
        return _f32(x)
    return _f32(_matrix(kind, rng, rows, k, bits))


def _bits(t: torch.Tensor) -> np.ndarray:
    return bits32(t.to(torch.float32).numpy()).reshape(-1)


def row_scale_case(rng, n: int, call):
    _ready()
    limbs, k = int(rng.choice([2, 3])), KS[int(rng.integers(len(KS)))]
    bits = operand_bits(limbs)
    kind = ROW_KINDS[int(rng.integers(len(ROW_KINDS)))]
    x = torch.from_numpy(rows_of(kind, rng, max(1, min(n, VALUES // k)), k, bits))
    engines = [_bits(quantize(x, 1, limbs).scale), _bits(quantize(x, 1, limbs, fuse=True).scale),
               _bits(quantize(x.T.contiguous(), 0, limbs).scale), _bits(quantize(x.T, 0, limbs, fuse=True).scale),
               _bits(native_planes.quantize_planes(x, 1, bits, limbs)[1]),
               _bits(native_chains.quantize_batched(x[None], -1, bits)[1]), _bits(_quantized(x, -1, bits)[1])]
    xb = bits32(x.numpy())
    chain = np.array(call("rowScales", limbs, k, xb.astype(">u4").tobytes()), np.uint32)
    return chain, row_scales(xb, limbs), engines, {"kind": kind, "k": k, "limbs": limbs}


def _grad(kind: str, rng, m: int, nout: int, sa: np.ndarray, bits: int) -> np.ndarray:
    """float32 (m, nout) output gradient of a kind; ``sa`` the input rows' scales (float32)."""
    if kind == "normal":
        return _f32(rng.standard_normal((m, nout)) * np.exp2(rng.integers(-40, 40, (1, nout))))
    if kind == "wide":
        return _f32(rng.standard_normal((m, nout)) * np.exp2(rng.integers(-60, 60, (m, nout))))
    if kind == "zeros":
        g = rng.standard_normal((m, nout))
        g[rng.random((m, nout)) < 0.7] = 0.0
        g[rng.random((m, nout)) < 0.3] = -0.0
        return _f32(g)
    if kind in ("underflow", "overflow"):  # g · sa past the float32 range (the inputs set sa)
        lo, hi = (-60, -20) if kind == "underflow" else (10, 60)
        return _f32(rng.standard_normal((m, nout)) * np.exp2(rng.integers(lo, hi, (m, nout))))
    if kind == "specials":
        g = rng.standard_normal((m, nout))
        g[rng.integers(m), rng.integers(nout)] = rng.choice([np.inf, -np.inf, np.nan])
        return _f32(g)
    if kind == "ties":  # g' = g · sa at odd multiples of half the column's quantum
        e = rng.integers(-40, 40, nout)
        quantum = np.exp2(e + 1 - bits)
        k = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), (m, nout)) + 0.5
        gp = k * quantum
        gp[0] = 1.5 * np.exp2(e)
        with np.errstate(all="ignore"):
            return _f32(gp / sa.astype(np.float64)[:, None])
    return rows_of("edge", rng, m, nout, bits)


def _input_kind(grad_kind: str, rng) -> tuple[str, tuple[int, int] | None]:
    """The input rows' kind and scale range for a gradient kind (its products' ranges)."""
    if grad_kind == "underflow":
        return "random", (-90, -70)
    if grad_kind == "overflow":
        return "random", (80, 110)
    if grad_kind == "ties":
        return "random", (-20, 20)
    return ROW_KINDS[int(rng.integers(len(ROW_KINDS)))], None


def _book_grads(a: torch.Tensor, g: torch.Tensor, limbs: int) -> list[np.ndarray]:
    """dW through GradBook.weight on three engines, in two micro-batches, and GradBook.linear's
    C route (the bias gradient beside it)."""
    out = []
    for engine in (GemmEngine(), GemmEngine(route="int8", small_product=0), GemmEngine(fuse=True)):
        book = GradBook(engine, limbs, a.shape[0])
        book.weight("w", g, quantize(a, 1, limbs, fuse=engine.fuse))
        out.append(_bits(book.result()["w"]))
    book = GradBook(GemmEngine(), limbs, a.shape[0])
    halves = (slice(0, a.shape[0] // 2), slice(a.shape[0] // 2, None))
    for mode in ("observe", "add"):
        book.mode = mode
        for part in halves:
            if a[part].shape[0]:
                book.weight("w", g[part], quantize(a[part], 1, limbs))
    out.append(_bits(book.result()["w"]))
    book = GradBook(GemmEngine(fuse=True), limbs, a.shape[0])
    book.linear("w", "b", g, quantize(a, 1, limbs, fuse=True))
    out.append(_bits(book.result()["w"]))
    return out


def weight_grad_case(rng, n: int, call):
    _ready()
    limbs, m = int(rng.choice([2, 3])), BATCHES[int(rng.integers(len(BATCHES)))]
    bits = operand_bits(limbs)
    side = max(1, min(16, math.isqrt(max(1, n)), VALUES // (4 * m)))  # g · sa: ~2,500 gas a value
    gkind = GRAD_KINDS[int(rng.integers(len(GRAD_KINDS)))]
    akind, span = _input_kind(gkind, rng)
    if span is None:
        a = rows_of(akind, rng, m, side, bits)
    else:
        a = _f32(rng.standard_normal((m, side)) * np.exp2(rng.integers(*span, (m, 1))))
    ab = bits32(a)
    sa = row_scales(ab, limbs)
    g = _grad(gkind, rng, m, side, sa.view(np.float32), bits)
    ta, tg = torch.from_numpy(a), torch.from_numpy(g)
    if not np.array_equal(_bits(quantize(ta, 1, limbs).scale), sa):
        raise AssertionError("the engine's row scales differ from the reference's")
    engines = _book_grads(ta, tg, limbs)
    at, gt = ab.T.copy(), bits32(g).T.copy()
    chain = np.array(call("weightGrads", limbs, m, at.astype(">u4").tobytes(), gt.astype(">u4").tobytes(),
                          sa.astype(">u4").tobytes()), np.uint32)
    return chain, weight_grads(at, gt, sa, limbs), engines, {"a": akind, "g": gkind, "m": m, "limbs": limbs}


def bmm_case(rng, n: int, call):
    _ready()
    limbs, k = int(rng.choice([2, 3])), KS[int(rng.integers(len(KS)))]
    bits = operand_bits(limbs)
    nb = int(rng.integers(1, 4))
    side = max(1, math.isqrt(max(1, min(n, VALUES // k) // nb)))
    kinds = [ROW_KINDS[int(rng.integers(len(ROW_KINDS)))] for _ in range(2)]
    a = torch.from_numpy(rows_of(kinds[0], rng, nb * side, k, bits).reshape(nb, side, k))
    bt = torch.from_numpy(rows_of(kinds[1], rng, nb * side, k, bits).reshape(nb, side, k))
    b = bt.transpose(1, 2) if rng.random() < 0.5 else bt.transpose(1, 2).contiguous()
    scale = float(np.float32(SCALES[int(rng.integers(len(SCALES)))]))
    engines = [_bits(bmm_exact(a, b, limbs, fuse, int8) * scale) for fuse, int8 in ((False, False), (True, False),
                                                                                     (True, True))]
    ab, bb = bits32(a.numpy()), bits32(bt.numpy())
    rows_a = np.repeat(ab, side, axis=1).reshape(-1, k)  # pair (n, i, j): row i of a[n], row j of bt[n]
    rows_b = np.tile(bb, (1, side, 1)).reshape(-1, k)
    sbits = int(np.float32(scale).view(np.uint32))
    chain = np.array(call("bmms", limbs, k, sbits, rows_a.astype(">u4").tobytes(), rows_b.astype(">u4").tobytes()),
                     np.uint32)
    return chain, bmm_elements(rows_a, rows_b, limbs, sbits), engines, {"kinds": kinds, "k": k, "limbs": limbs,
                                                                        "scale": scale}


KINDS = {"row_scale": row_scale_case, "weight_grad": weight_grad_case, "bmm": bmm_case}


def check(call, kind: str, rng, n: int) -> tuple[int, list[str]]:
    """``(elements, mismatches described)`` of one batch (about ``n`` outputs, one eth_call
    through ``call(function, *args)``): the chain against the reference and every engine route."""
    chain, want, engines, info = KINDS[kind](rng, n, call)
    return np.asarray(chain).size, mismatches(kind, chain, want, engines, info)
