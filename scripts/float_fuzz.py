"""`make fuzz`'s float part: the on-chain IEEE-754 library (contracts/numerics) against numpy
and the engine's torch routines on over a million generated cases (every operation of
FloatHarness, the same generators as ``make test``'s 2,000 a piece, another seed each run
unless --seed is given), 4,000 a call on a fresh Anvil. Prints one line per operation and
exits non-zero on any mismatch, listing the first ones.

    .venv/bin/python scripts/float_fuzz.py                # 1,000,000+ cases (~3-4 min on 2 cores)
    .venv/bin/python scripts/float_fuzz.py --cases 1000   # per operation
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from tests.contracts.float_cases import OPS, check  # noqa: E402
from tests.contracts.float_chain import harness_on_devnet, runner  # noqa: E402

TOTAL = 1_000_000
BATCH = 4_000


def main() -> int:
    ops = OPS[1:]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=-(-TOTAL // len(ops)), help="cases per operation")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: a new one, printed)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else int(time.time())
    print(f"float fuzz: {len(ops)} operations x {args.cases:,} cases, seed {seed}")
    failed, total, start = 0, 0, time.monotonic()
    with harness_on_devnet() as harness:
        call = runner(harness)
        for code, op in enumerate(ops, start=1):
            rng = np.random.default_rng([seed, code])
            t0 = time.monotonic()
            cases, bad = check(call, op, rng, args.cases, BATCH)
            total += cases
            print(f"  {op.name:<16} {cases:>9,} cases  {len(bad):>5} mismatches  {time.monotonic() - t0:6.1f} s")
            for line in bad[:5]:
                print("    " + line)
            failed += bool(bad)
    print(f"float fuzz: {total:,} cases in {time.monotonic() - start:.0f} s, "
          f"{failed} operation(s) with mismatches (seed {seed})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
