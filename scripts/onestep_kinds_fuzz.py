"""`make fuzz`'s part for the one-step kinds past the linear product: the update and
aggregation elements (contracts/numerics/OneStepOptim.sol: Adam(W) with clipping, SGD with
momentum, FedAvg, DiLoCo's outer step) and the elementwise and data-movement elements
(contracts/numerics/OneStepElementwise.sol: ReLU and its mask, broadcast add, permute, the
embedding's gather, dropout), GELU's (OneStepGelu.sol: GELU, its gradient, erf64),
LayerNorm's (OneStepLayerNorm.sol), the exact gradient sums' (OneStepExactSum.sol: column
sums, the embedding's scatter), the causal softmax's (OneStepSoftmax.sol: row sum,
forward, backward), the cross-entropy's (OneStepXent.sol: partial sums, gradient, loss) and
the quantised products' (OneStepQuant.sol: row scales, the weight gradient, bmm_exact),
each against the engine and the reference (truetrain/numerics/optim_element.py,
elementwise.py, special.py, layernorm.py, exact_sum.py, softmax.py, xent.py, quant.py, clip.py,
pool.py) on 100,000+ generated elements a kind (the generators of ``make test``:
tests/contracts/optim_cases.py, elementwise_cases.py, gelu_cases.py, layernorm_cases.py,
exact_sum_cases.py, softmax_cases.py, xent_cases.py, quant_cases.py, clip_cases.py, pool_cases.py;
another seed each run unless --seed is given), on a fresh Anvil, 256 elements an eth_call.
Prints one line per kind and exits non-zero on any mismatch, listing the first ones.

    .venv/bin/python scripts/onestep_kinds_fuzz.py                 # 100,000+ a kind
    .venv/bin/python scripts/onestep_kinds_fuzz.py --cases 5000     # fewer
    .venv/bin/python scripts/onestep_kinds_fuzz.py --kinds adam,gelu  # some kinds
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from tests.contracts import (clip_cases, elementwise_cases, exact_sum_cases, gelu_cases,  # noqa: E402
                             layernorm_cases, optim_cases, pool_cases, quant_cases, softmax_cases, xent_cases)
from tests.contracts.float_chain import CALL_GAS, harness_on_devnet  # noqa: E402

TOTAL = 100_000
PER_CALL = 256
FAMILIES = {"OneStepOptimHarness": optim_cases, "OneStepElementwiseHarness": elementwise_cases,
            "OneStepGeluHarness": gelu_cases, "OneStepLayerNormHarness": layernorm_cases,
            "OneStepExactSumHarness": exact_sum_cases, "OneStepSoftmaxHarness": softmax_cases,
            "OneStepXentHarness": xent_cases, "OneStepQuantHarness": quant_cases,
            "OneStepClipHarness": clip_cases, "OneStepPoolHarness": pool_cases}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=TOTAL, help="elements a kind")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: a new one, printed)")
    parser.add_argument("--kinds", default="", help="comma-separated kinds to run (default: all)")
    args = parser.parse_args()
    only = set(filter(None, args.kinds.split(",")))
    seed = args.seed if args.seed is not None else int(time.time())
    print(f"one-step kinds fuzz: {args.cases:,} elements a kind, seed {seed}")
    failed, start, n = 0, time.monotonic(), 0
    for name, family in FAMILIES.items():
        if only and not only & set(family.KINDS):
            continue
        with harness_on_devnet(name=name) as harness:
            def call(fn, *a):
                return getattr(harness.functions, fn)(*a).call({"gas": CALL_GAS})

            for kind in family.KINDS:
                rng = np.random.default_rng([seed, n])
                n += 1
                if only and kind not in only:
                    continue
                t0, total, bad = time.monotonic(), 0, []
                while total < args.cases:
                    done, wrong = family.check(call, kind, rng, PER_CALL)
                    total += done
                    bad += wrong
                print(f"  {kind:<18} {total:>9,} elements  {len(bad):>5} mismatches  {time.monotonic() - t0:6.1f} s")
                for line in bad[:5]:
                    print("    " + line)
                failed += len(bad)
    print(f"one-step kinds fuzz: {time.monotonic() - start:.0f} s, {failed} mismatches (seed {seed})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
