"""Gas of each operation of the on-chain IEEE-754 library (contracts/numerics: Float32,
Float64), measured inside the EVM by FloatHarness.gasOf (gasleft() around one call through
an internal function pointer, less the same call of the identity), on a fresh Anvil.

Columns: the median and the greatest gas over 500 typical operands (normal numbers with
exponents within ±30 of 1, positive for sqrt and log, exp's argument in [-40, 0] as in a
softmax row, int64 values of any length, exponents in range), and the
greatest over 2,000 of the edge-rich cases that ``make test`` uses (NaN, ±inf, ±0,
subnormals, ties, overflow and underflow). Issue 28 keeps a dispute's one-step
transaction under 10 M gas; the last line says how many typical float64 multiply-adds
that is.

    .venv/bin/python bench/float_gas.py
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from tests.contracts.float_cases import F32, F64, OPS, Op, as_bits, random_ints  # noqa: E402
from tests.contracts.float_chain import CALL_GAS, harness_on_devnet  # noqa: E402

TYPICAL, EDGE = 500, 2_000
ONE_STEP_LIMIT = 10_000_000


def typical_floats(rng, n: int, f) -> list[int]:
    fields = f.bias + rng.integers(-30, 31, n)
    fracs = rng.integers(0, 1 << (f.p - 1), n, dtype=np.uint64)
    signs = rng.integers(0, 2, n)
    return [(int(e) << (f.p - 1)) | int(m) | (int(s) << (f.w - 1)) for e, m, s in zip(fields, fracs, signs)]


UNARY = {"sqrt32", "round32", "floor32", "f32_to_f64", "f32_to_int64", "neg32", "abs32", "sqrt64", "round64",
         "floor64", "f64_to_f32", "f64_to_int64", "neg64", "abs64", "frexp64", "sqrt64_repro", "exp64", "log64"}


def typical_operands(rng, op: Op) -> tuple[list[int], list[int]]:
    if op.name.startswith("int_to"):
        return [x % (1 << 256) for x in random_ints(rng, TYPICAL, 53)], []
    if op.name == "pow2_64":
        return [int(x) % (1 << 256) for x in rng.integers(-1022, 1024, TYPICAL)], []
    if op.name == "exp64":  # softmax's range: x - rowmax <= 0, down to exp's floor
        return [int(x) for x in as_bits(rng.uniform(-40, 0, TYPICAL), F64)], []
    if op.name in ("pow2_scales32", "quantize32"):
        a, b = op.gen(rng, TYPICAL)
        return [int(x) for x in a], [int(x) for x in b]
    f = F32 if ("32" in op.name.split("_")[0] or op.name.startswith("f32")) else F64
    a = typical_floats(rng, TYPICAL, f)
    if op.name.startswith(("sqrt", "log")):
        a = [x & ~f.sign for x in a]
    return a, ([] if op.name in UNARY else typical_floats(rng, TYPICAL, f))


def main() -> None:
    rng = np.random.default_rng(28)
    rows = []
    with harness_on_devnet() as harness:
        def gas(code, a, b):
            return list(harness.functions.gasOf(code, a, b).call({"gas": CALL_GAS}))

        for code, op in enumerate(OPS[1:], start=1):
            typical = gas(code, *typical_operands(rng, op))
            a, b = op.gen(rng, EDGE)
            edge = []
            for s in range(0, EDGE, 500):
                edge += gas(code, [int(x) for x in a[s:s + 500]], [] if b is None else [int(x) for x in b[s:s + 500]])
            rows.append((op.name, int(statistics.median(typical)), max(typical), max(edge)))
    print(f"{'operation':<16} {'typical median':>15} {'typical max':>12} {'any-case max':>13}")
    for name, med, top, worst in rows:
        print(f"{name:<16} {med:>15,} {top:>12,} {worst:>13,}")
    table = {name: med for name, med, _, _ in rows}
    fma = table["mul64"] + table["add64"]
    print(f"\na float64 multiply then add: {fma:,} gas typical; {ONE_STEP_LIMIT // fma:,} of them fit in "
          f"the one-step transaction's {ONE_STEP_LIMIT:,} gas")


if __name__ == "__main__":
    main()
