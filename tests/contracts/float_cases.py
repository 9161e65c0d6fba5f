"""Generated cases and the numpy/torch reference for the on-chain IEEE-754 library
(contracts/numerics: Float32, Float64 through contracts/test/FloatHarness.sol).

Shared by tests/contracts/test_float_library.py (``make test``: 2,000 cases an operation)
and scripts/float_fuzz.py (``make fuzz``: over a million). Each operation has a generator
that mixes edge values (±0, ±inf, NaNs with any payload and sign, the least and greatest
subnormals and normals), uniformly random bit patterns, values of moderate size, operands
built to round at a tie, to cancel exactly or to land on the overflow and underflow
boundaries, and a reference computed by numpy (x86, no flush to zero) or by the engine's own
torch code where the engine has its own routine (``_to_float64_odd``, ``pow2``, ``sqrt32``).

NaN results: the library returns one canonical quiet NaN per format; a reference NaN (with
whatever payload numpy's x86 instructions give) is matched by exactly that pattern. Sign
operations (neg, abs, copysign) are bit operations in IEEE-754 and are compared bit for bit,
NaNs included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from truetrain.training.intgemm import _quantize_with, _to_float64_odd, pow2_scales
from truetrain.training.repro_ops import exp64, log64, pow2, sqrt32, sqrt64


@dataclass(frozen=True)
class Fmt:
    """A binary interchange format: width, significand bits (hidden bit included), numpy types."""

    w: int
    p: int
    uint: type
    flt: type

    @property
    def sign(self) -> int:
        return 1 << (self.w - 1)

    @property
    def inf(self) -> int:
        return ((1 << (self.w - self.p)) - 1) << (self.p - 1)

    @property
    def nan(self) -> int:
        return self.inf | (1 << (self.p - 2))

    @property
    def bias(self) -> int:
        return (1 << (self.w - self.p - 1)) - 1

    @property
    def max_field(self) -> int:
        return 2 * self.bias  # the greatest finite exponent field


F32 = Fmt(32, 24, np.uint32, np.float32)
F64 = Fmt(64, 53, np.uint64, np.float64)


def as_float(bits: np.ndarray, f: Fmt) -> np.ndarray:
    return bits.astype(f.uint).view(f.flt)


def as_bits(x: np.ndarray, f: Fmt) -> np.ndarray:
    return np.asarray(x, dtype=f.flt).view(f.uint).astype(object)


# --- operand generators -----------------------------------------------------------------


def edge_values(f: Fmt) -> list[int]:
    """Specials and boundaries: zeros, infinities, NaNs of several payloads and signs, the
    least/greatest subnormal and normal, one and its neighbours, halves for rounding."""
    one = f.bias << (f.p - 1)
    frac = (1 << (f.p - 1)) - 1
    pos = [0, f.inf, f.nan, f.inf | 1, f.inf | frac, 1, frac, 1 << (f.p - 1), (f.max_field << (f.p - 1)) | frac,
           f.max_field << (f.p - 1), one, one + 1, one - 1, one + (1 << (f.p - 2)), (f.bias + 1) << (f.p - 1),
           (f.bias - 1) << (f.p - 1), ((f.bias - 1) << (f.p - 1)) | (1 << (f.p - 2)), 2, frac - 1, (1 << (f.p - 1)) + 1]
    return pos + [v | f.sign for v in pos]


def random_floats(rng: np.random.Generator, n: int, f: Fmt) -> np.ndarray:
    """A mix: a quarter uniform bit patterns, a quarter moderate exponents (|e| <= 30), an
    eighth subnormal or just normal, an eighth near the largest finite values, an eighth
    with short significands (products and halves that tie), the rest edge values."""
    out = np.empty(n, dtype=object)
    kinds = rng.integers(0, 8, n)
    signs = rng.integers(0, 2, n).astype(object) * f.sign
    fracs = rng.integers(0, 1 << (f.p - 1), n, dtype=np.uint64).astype(object)
    edges = edge_values(f)
    for i in range(n):
        k = kinds[i]
        if k <= 1:
            out[i] = int(rng.integers(0, 1 << f.w, dtype=np.uint64))
            continue
        if k <= 3:
            field = f.bias + int(rng.integers(-30, 31))
        elif k == 4:
            field = int(rng.integers(0, 3))
        elif k == 5:
            field = f.max_field - int(rng.integers(0, 3))
        elif k == 6:
            # an integer of at most (p+1)/2 bits times a moderate power of two
            m = int(rng.integers(1, 1 << ((f.p + 1) // 2)))
            e = int(rng.integers(-20, 20))
            out[i] = int(as_bits(np.array([np.ldexp(float(m), e)]), f)[0]) | signs[i]
            continue
        else:
            out[i] = edges[int(rng.integers(0, len(edges)))]
            continue
        out[i] = (field << (f.p - 1)) | fracs[i] | signs[i]
    return out


def _field(bits: int, f: Fmt) -> int:
    return (bits >> (f.p - 1)) & ((1 << (f.w - f.p)) - 1)


def related_pairs(rng: np.random.Generator, a: np.ndarray, f: Fmt) -> np.ndarray:
    """For each ``a``, a ``b`` made to stress add/sub/mul/div: a tie (exactly half or one
    and a half of a's last place), an exact cancellation (-a), a close neighbour, a nearby
    exponent, or an exponent that puts a product or quotient at the overflow or underflow
    boundary."""
    b = np.empty(len(a), dtype=object)
    kinds = rng.integers(0, 6, len(a))
    for i, x in enumerate(a):
        x = int(x)
        fa = _field(x, f)
        sign = int(rng.integers(0, 2)) * f.sign
        frac = int(rng.integers(0, 1 << (f.p - 1)))
        k = kinds[i]
        if k == 0 and fa > f.p:  # half or 1.5 of a's last place: round-half-even territory
            up = int(rng.integers(0, 2))
            b[i] = ((fa - f.p + up) << (f.p - 1)) | ((1 << (f.p - 2)) if up else 0) | sign
        elif k == 1:
            b[i] = x ^ f.sign if int(rng.integers(0, 2)) else x
        elif k == 2:
            b[i] = (x + int(rng.integers(-3, 4))) % (1 << f.w)
        elif k == 3:
            field = min(max(fa - int(rng.integers(0, f.p + 5)), 0), f.max_field)
            b[i] = (field << (f.p - 1)) | frac | sign
        else:
            # a product/quotient exponent near the top (k == 4) or the subnormal range (k == 5)
            target = f.bias + int(rng.integers(-2, 2)) if k == 4 else -f.bias - int(rng.integers(-3, f.p + 3))
            field = target - (fa - f.bias) + f.bias if int(rng.integers(0, 2)) else (fa - f.bias) - target + f.bias
            b[i] = (min(max(field, 0), f.max_field) << (f.p - 1)) | frac | sign
    return b


def random_ints(rng: np.random.Generator, n: int, p: int) -> np.ndarray:
    """int64 values of every bit length, with ties at ``p`` bits (odd significands of p + 1
    bits, shifted) and the int64 extremes."""
    lengths = rng.integers(0, 64, n)
    out = np.empty(n, dtype=object)
    for i, bits in enumerate(lengths):
        if i % 5 == 4 and bits > p + 1:  # p+1-bit odd significand: exactly halfway
            v = ((1 << p) | (int(rng.integers(0, 1 << (p - 1))) << 1) | 1) << int(rng.integers(0, 63 - p))
        else:
            v = int(rng.integers(0, 1 << int(bits), dtype=np.uint64)) if bits else 0
        out[i] = -v if rng.integers(0, 2) else v
    fixed = [0, 1, -1, 2**63 - 1, -(2**63), 2**62, (1 << p) + 1, -((1 << p) + 1), (1 << (p + 1)) + 2]
    out[: len(fixed)] = fixed
    return out


# --- references -------------------------------------------------------------------------


def _float_op(fn: Callable, f: Fmt, arity: int):
    def ref(a, b):
        x = as_float(np.array(a, dtype=object).astype(f.uint), f)
        with np.errstate(all="ignore"):
            y = fn(x) if arity == 1 else fn(x, as_float(np.array(b, dtype=object).astype(f.uint), f))
        return as_bits(y, f)
    return ref


def _sqrt32_engine(x):
    return sqrt32(torch.from_numpy(x)).numpy()


def _extremum(f: Fmt, take_max: bool):
    """IEEE 754-2019 maximum/minimum: numpy's (NaN propagates), with +0 above -0 (numpy and
    torch pick either zero depending on the code path)."""
    base = _float_op(np.maximum if take_max else np.minimum, f, 2)

    def ref(a, b):
        out = base(a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            if (int(x) | int(y)) & ~f.sign & ((1 << f.w) - 1) == 0:  # both zeros
                out[i] = (int(x) & int(y)) if take_max else (int(x) | int(y))
        return out
    return ref


def _compare(fn: Callable, f: Fmt):
    def ref(a, b):
        x = as_float(np.array(a, dtype=object).astype(f.uint), f)
        y = as_float(np.array(b, dtype=object).astype(f.uint), f)
        with np.errstate(all="ignore"):
            return fn(x, y).astype(int).astype(object)
    return ref


def _convert(src: Fmt, dst: Fmt):
    def ref(a, _b):
        with np.errstate(all="ignore"):
            return as_bits(as_float(np.array(a, dtype=object).astype(src.uint), src).astype(dst.flt), dst)
    return ref


def _to_int64(f: Fmt):
    def ref(a, _b):
        with np.errstate(all="ignore"):
            v = as_float(np.array(a, dtype=object).astype(f.uint), f).astype(np.int64)
        return np.array([int(x) % (1 << 256) for x in v], dtype=object)
    return ref


def _from_int(f: Fmt):
    def ref(a, _b):
        return as_bits(np.array([_signed(x) for x in a], dtype=np.int64).astype(f.flt), f)
    return ref


def _from_int_odd(a, _b):
    v = torch.tensor([_signed(x) for x in a], dtype=torch.int64)
    return as_bits(_to_float64_odd(v).numpy(), F64)


def _frexp(a, _b):
    mant, exp = np.frexp(as_float(np.array(a, dtype=object).astype(np.uint64), F64))
    bits = as_bits(mant, F64)
    return np.array([(F64.nan if np.isnan(m) else int(b)) | ((int(e) + 2**15) << 64)
                     for m, b, e in zip(mant, bits, exp)], dtype=object)


def _pow2(a, _b):
    return as_bits(pow2(torch.tensor([_signed(x) for x in a], dtype=torch.int64)).numpy(), F64)


def _signed(word: int) -> int:
    word = int(word)
    return word - (1 << 256) if word >> 255 else word


def _bitwise(fn: Callable, f: Fmt):
    return lambda a, b: np.array([fn(int(x), int(y) if b is not None else 0, f) for x, y in
                                  zip(a, b if b is not None else a)], dtype=object)


@dataclass(frozen=True)
class Op:
    """One harness op: its reference, operand generator, and how NaN results compare."""

    name: str
    ref: Callable
    gen: Callable  # (rng, n) -> (a, b or None)
    fmt: Fmt | None  # the result's float format (None: an integer or boolean result)
    canonical_nan: bool = True  # a NaN result must be the canonical pattern
    gas: int = 2_500  # an upper bound on one case's gas (bench/float_gas.py), to size batches

    def batch(self, largest: int, call_gas: int = 25_000_000) -> int:
        """Cases per eth_call: ``largest``, or fewer where they would pass ``call_gas``."""
        return max(1, min(largest, call_gas // self.gas))


def _binary(f: Fmt):
    def gen(rng, n):
        a = random_floats(rng, n, f)
        b = random_floats(rng, n, f)
        related = rng.integers(0, 2, n).astype(bool)
        b[related] = related_pairs(rng, a[related], f)
        return a, b
    return gen


def _unary(f: Fmt):
    def gen(rng, n):
        a = random_floats(rng, n, f)
        # halves and quarters around small integers: ties for round, exact cases for sqrt
        half = rng.integers(0, 4, n) == 0
        vals = (rng.integers(-64, 64, half.sum()) + rng.integers(0, 4, half.sum()) / 4.0)
        a[half] = as_bits(vals, f)
        return a, None
    return gen


def _ints(p: int, limit: int = 1 << 63):
    """int64 operands; ``limit``: the engine's domain (``_to_float64_odd`` takes |v| < 2**62)."""
    def gen(rng, n):
        vals = [x if abs(x) < limit else x // 4 for x in random_ints(rng, n, p)]
        return np.array([x % (1 << 256) for x in vals], dtype=object), None
    return gen


def _exponents(rng, n):
    n_vals = rng.integers(-1022, 1024, n)
    n_vals[:2] = [-1022, 1023]
    return np.array([int(x) % (1 << 256) for x in n_vals], dtype=object), None


def _ops_for(f: Fmt, other: Fmt, tag: str) -> list[Op]:
    sqrt = _float_op(_sqrt32_engine, f, 1) if tag == "32" else _float_op(np.sqrt, f, 1)
    return [
        Op(f"add{tag}", _float_op(np.add, f, 2), _binary(f), f),
        Op(f"sub{tag}", _float_op(np.subtract, f, 2), _binary(f), f),
        Op(f"mul{tag}", _float_op(np.multiply, f, 2), _binary(f), f),
        Op(f"div{tag}", _float_op(np.divide, f, 2), _binary(f), f),
        Op(f"sqrt{tag}", sqrt, _unary(f), f),
        Op(f"round{tag}", _float_op(np.rint, f, 1), _unary(f), f),
        Op(f"floor{tag}", _float_op(np.floor, f, 1), _unary(f), f),
        Op(f"max{tag}", _extremum(f, True), _binary(f), f),
        Op(f"min{tag}", _extremum(f, False), _binary(f), f),
        Op(f"eq{tag}", _compare(np.equal, f), _binary(f), None),
        Op(f"lt{tag}", _compare(np.less, f), _binary(f), None),
        Op(f"le{tag}", _compare(np.less_equal, f), _binary(f), None),
        Op(f"f{tag}_to_f{other.w}", _convert(f, other), _unary(f), other),
        Op(f"f{tag}_to_int64", _to_int64(f), _unary(f), None),
        Op(f"int_to_f{tag}", _from_int(f), _ints(f.p), f),
        Op(f"neg{tag}", _bitwise(lambda x, _y, g: x ^ g.sign, f), _unary(f), f, False),
        Op(f"abs{tag}", _bitwise(lambda x, _y, g: x & ~g.sign & ((1 << g.w) - 1), f), _unary(f), f, False),
        Op(f"copysign{tag}", _float_op(np.copysign, f, 2), _binary(f), f, False),
    ]


def _engine64(fn: Callable):
    """A float64 engine routine (torch) on bit patterns."""
    def ref(a, _b):
        x = torch.from_numpy(as_float(np.array(a, dtype=object).astype(np.uint64), F64).copy())
        return as_bits(fn(x).numpy(), F64)
    return ref


def _exp_operands(rng, n):
    """Around exp's range ([-708, 709] and past both ends), small values, and edges."""
    a = random_floats(rng, n, F64)
    wide = rng.integers(0, 3, n) > 0
    vals = np.where(rng.integers(0, 2, wide.sum()) == 0, rng.uniform(-760, 760, wide.sum()),
                    rng.uniform(-1, 1, wide.sum()) * 2.0 ** rng.integers(-60, 4, wide.sum()))
    a[wide] = as_bits(vals, F64)
    a[:min(n, 6)] = as_bits(np.array([-708.0, 709.0, np.nextafter(-708.0, -1000), np.nextafter(709.0, 1000), 0.0, -0.0]), F64)[:min(n, 6)]
    return a, None


def _f32_tensor(words) -> torch.Tensor:
    return torch.from_numpy(as_float(np.array([int(v) & 0xFFFFFFFF for v in words], dtype=object).astype(np.uint32),
                                     F32).copy())


def _f32_words(t: torch.Tensor) -> np.ndarray:
    return t.view(torch.int32).numpy().astype(np.uint32).astype(object)


def _scales_ref(a, b):
    bits = np.array([int(v) for v in b])
    amax = _f32_tensor(a)
    out = np.empty(len(a), dtype=object)
    for k in set(bits.tolist()):
        up, down = pow2_scales(amax[torch.from_numpy(bits == k)], k)
        out[bits == k] = _f32_words(up) | (_f32_words(down) << 32)
    return out


def _scales_operands(rng, n):
    """Row maxima: magnitudes (``x.abs().amax()``), so the sign bit is clear, NaN included."""
    return random_floats(rng, n, F32) & ~F32.sign, np.array([int(x) for x in rng.choice([13, 20], n)], dtype=object)


def _quantize_ref(a, b):
    x, up = _f32_tensor(a), _f32_tensor(b)
    bits = np.array([int(v) >> 32 for v in b])
    out = np.empty(len(a), dtype=object)
    for k in set(bits.tolist()):
        sel = torch.from_numpy(bits == k)
        out[bits == k] = _f32_words(_quantize_with(x[sel], up[sel], k))
    return out


def _quantize_operands(rng, n):
    """An element of a row and that row's scale (from a random maximum, 13 or 20 bits):
    mostly within the maximum, some at it or beyond (clamped), a tenth edge values."""
    amax, bits = _scales_operands(rng, n)
    scales = _scales_ref(amax, bits)
    with np.errstate(over="ignore", invalid="ignore"):  # signalling NaNs widen; 1.1 x the largest float32 is inf
        m = _f32_tensor(amax).numpy().astype(np.float64)
        x = np.where(np.isfinite(m), rng.uniform(-1.1, 1.1, n) * np.nan_to_num(m), rng.uniform(-1, 1, n))
        x = np.where(rng.integers(0, 8, n) == 0, m, x)
        a = as_bits(x.astype(np.float32), F32)
    edge = rng.integers(0, 10, n) == 0
    a[edge] = random_floats(rng, int(edge.sum()), F32)
    words = np.array([(int(s) & 0xFFFFFFFF) | (int(k) << 32) for s, k in zip(scales, bits)], dtype=object)
    return a, words


#: The harness's op table, in its order (op code = index); 0 is the identity (gas baseline).
OPS: list[Op] = ([Op("noop", lambda a, _b: np.array([int(x) for x in a], dtype=object),
                     lambda rng, n: (random_floats(rng, n, F64), None), None)]
                 + _ops_for(F32, F64, "32") + _ops_for(F64, F32, "64")
                 + [Op("int_to_f64_odd", _from_int_odd, _ints(F64.p, 1 << 62), F64),
                    Op("frexp64", _frexp, _unary(F64), None),
                    Op("pow2_64", _pow2, _exponents, None),
                    Op("sqrt64_repro", _engine64(sqrt64), _unary(F64), F64, gas=20_000),
                    Op("exp64", _engine64(exp64), _exp_operands, F64, gas=45_000),
                    Op("log64", _engine64(log64), _unary(F64), F64, gas=50_000),
                    Op("pow2_scales32", _scales_ref, _scales_operands, None),
                    Op("quantize32", _quantize_ref, _quantize_operands, F32, gas=6_000)])
OP_CODES = {op.name: code for code, op in enumerate(OPS)}


def mismatches(op: Op, a, b, got) -> list[str]:
    """Each case where ``got`` differs from the reference, as one readable line."""
    want = op.ref(a, b)
    bad = []
    for i, (g, r) in enumerate(zip(got, want)):
        g, r = int(g), int(r)
        if op.fmt is not None and op.canonical_nan and (r & ~op.fmt.sign & ((1 << op.fmt.w) - 1)) > op.fmt.inf:
            r = op.fmt.nan  # a NaN result: the canonical one
        if g != r:
            args = f"{int(a[i]):#x}" + ("" if b is None else f", {int(b[i]):#x}")
            bad.append(f"{op.name}({args}) = {g:#x}, numpy/engine {r:#x}")
    return bad


def check(call: Callable, op: Op, rng: np.random.Generator, n: int, batch: int) -> tuple[int, list[str]]:
    """Generate ``n`` cases for ``op``, evaluate them in batches of up to ``batch`` (fewer for
    costly operations, :meth:`Op.batch`) through ``call(code, a, b)`` (one eth_call each) and
    return ``(cases, mismatch lines)``."""
    a, b = op.gen(rng, n)
    batch = op.batch(batch)
    code = OP_CODES[op.name]
    bad: list[str] = []
    for start in range(0, n, batch):
        sa = [int(x) for x in a[start:start + batch]]
        sb = [] if b is None else [int(x) for x in b[start:start + batch]]
        got = call(code, sa, sb)
        bad += mismatches(op, sa, None if b is None else sb, got)
    return n, bad
