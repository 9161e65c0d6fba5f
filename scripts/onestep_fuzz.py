"""`make fuzz`'s one-step part: the on-chain linear element (contracts/numerics/OneStepGemm.sol)
against the engine (float64, int8 and fused routes, which must agree) and the reference
(truetrain/numerics/gemm_element.py) on 100,000+ generated cases (the generators of
``make test``, tests/contracts/onestep_cases.py, another seed each run unless --seed is
given), over contraction lengths from 1 to 1,024 and both limb counts, on a fresh Anvil.
Prints one line per length and exits non-zero on any mismatch, listing the first ones.

    .venv/bin/python scripts/onestep_fuzz.py                 # 100,000+ cases
    .venv/bin/python scripts/onestep_fuzz.py --cases 2000    # fewer
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from tests.contracts.float_chain import CALL_GAS, harness_on_devnet  # noqa: E402
from tests.contracts.onestep_cases import cases, check  # noqa: E402

TOTAL = 100_000
# contraction lengths and their shares of the cases (the default LM's 256 and 1,024, the
# digits MLP's 64, 128 and 10, and odd ones that leave rows straddling 64-element leaves)
LENGTHS = {1: 0.08, 2: 0.06, 3: 0.06, 7: 0.06, 10: 0.08, 31: 0.06, 64: 0.12, 100: 0.08, 128: 0.12,
           256: 0.14, 1024: 0.14}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=TOTAL, help="cases in all")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: a new one, printed)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else int(time.time())
    print(f"one-step fuzz: {args.cases:,} linear elements, seed {seed}")
    failed, total, start = 0, 0, time.monotonic()
    with harness_on_devnet(name="OneStepGemmHarness") as harness:
        def call(limbs, k, a, b, bias):
            return harness.functions.elements(limbs, k, a, b, bias).call({"gas": CALL_GAS})

        for k, share in LENGTHS.items():
            for limbs in (2, 3):
                rng = np.random.default_rng([seed, k, limbs])
                t0 = time.monotonic()
                batch = cases(rng, k, limbs, max(1, int(args.cases * share / 2)), rows=8, cols=8)
                bad = check(call, batch)
                total += len(batch.expected)
                print(f"  K={k:<5} limbs={limbs} {len(batch.expected):>8,} cases  {len(bad):>5} mismatches  "
                      f"{time.monotonic() - t0:6.1f} s")
                for line in bad[:5]:
                    print("    " + line)
                failed += len(bad)
    print(f"one-step fuzz: {total:,} cases in {time.monotonic() - start:.0f} s, {failed} mismatches (seed {seed})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
