"""`make fuzz`'s update part: the on-chain update and aggregation elements
(contracts/numerics/OneStepOptim.sol: Adam(W) with clipping, SGD with momentum, FedAvg and
DiLoCo's outer step) against the engine (truetrain/training/optim.py ``repro_update``,
truetrain/training/aggregate.py) and the reference (truetrain/numerics/optim_element.py) on
100,000+ generated elements a kind (the generators of ``make test``,
tests/contracts/optim_cases.py, another seed each run unless --seed is given), on a fresh
Anvil, 256 elements an eth_call. Prints one line per kind and exits non-zero on any
mismatch, listing the first ones.

    .venv/bin/python scripts/onestep_optim_fuzz.py                 # 100,000+ a kind
    .venv/bin/python scripts/onestep_optim_fuzz.py --cases 5000     # fewer
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from tests.contracts.float_chain import CALL_GAS, harness_on_devnet  # noqa: E402
from tests.contracts.optim_cases import KINDS, check  # noqa: E402

TOTAL = 100_000
PER_CALL = 256  # elements an eth_call: an aggregation case is an MLP of 8 x 31 weights and 8 biases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=TOTAL, help="elements a kind")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: a new one, printed)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else int(time.time())
    print(f"one-step update fuzz: {args.cases:,} elements a kind, seed {seed}")
    failed, start = 0, time.monotonic()
    with harness_on_devnet(name="OneStepOptimHarness") as harness:
        def call(fn, *a):
            return getattr(harness.functions, fn)(*a).call({"gas": CALL_GAS})

        for n, (kind, make) in enumerate(KINDS.items()):
            rng = np.random.default_rng([seed, n])
            t0, total, bad = time.monotonic(), 0, []
            while total < args.cases:
                case = make(rng, 31, 8) if kind == "aggregate" else make(rng, PER_CALL)
                done, wrong = check(call, kind, case)
                total += done
                bad += wrong
            print(f"  {kind:<10} {total:>9,} elements  {len(bad):>5} mismatches  {time.monotonic() - t0:6.1f} s")
            for line in bad[:5]:
                print("    " + line)
            failed += len(bad)
    print(f"one-step update fuzz: {time.monotonic() - start:.0f} s, {failed} mismatches (seed {seed})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
