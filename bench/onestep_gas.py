"""Gas of the one-step linear element (contracts/numerics/OneStepGemm.sol) for the products
of the default LM (d256 x 4 layers, batch 8 x 128 = 1,024 tokens, vocabulary 256) and of the
digits MLP (64-128-10, batch 32): the whole transaction (eth_estimateGas of
OneStepGemmHarness.linearElement: 21,000 + calldata + both rows and the bias opened by range
proofs + the quantisation and exact sum of K products + one rounding), on a fresh Anvil.
Issue 28 keeps every transaction at or under 10 M gas.

The gas depends on the contraction length K (the rows opened) and on the trees' depths
(the tensors' sizes), not on the values: each row is random normal.

    .venv/bin/python bench/onestep_gas.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from tests.contracts.float_chain import harness_on_devnet  # noqa: E402
from truetrain.numerics.tensor_merkle import TensorTree  # noqa: E402

LIMIT = 10_000_000
TOKENS, DIGITS_BATCH = 8 * 128, 32
# (model, product, M, K, N): C (M, N) = A (M, K) @ Bt (N, K).T; the backward's products
# read the transposed operands as tensors of their own in the trace
PRODUCTS = [
    ("LM", "attention q/k/v/out, FFN up (x @ W.T)", TOKENS, 256, 1024),
    ("LM", "tied head (x @ E.T)", TOKENS, 256, 256),
    ("LM", "FFN down (h @ W.T)", TOKENS, 1024, 256),
    ("LM", "input gradient of FFN up (g @ W)", TOKENS, 1024, 256),
    ("LM", "weight gradient's shape (K = 1,024 tokens)", 1024, TOKENS, 256),
    ("MLP", "fc1 (x @ W1.T)", DIGITS_BATCH, 64, 128),
    ("MLP", "fc2 (h @ W2.T)", DIGITS_BATCH, 128, 10),
    ("MLP", "input gradient of fc2 (g @ W2)", DIGITS_BATCH, 10, 128),
    ("MLP", "weight gradient's shape (K = 32 samples)", 128, DIGITS_BATCH, 64),
]


def _opening(tree: TensorTree, start: int, count: int):
    chunks, proof = tree.open(start, count)
    return chunks, ["0x" + p.hex() for p in proof]


def measure(harness, w3, m: int, k: int, n: int, limbs: int) -> tuple[int, int, int]:
    """``(gas, calldata bytes, proof nodes)`` of one element's transaction (the middle one)."""
    torch.manual_seed(m + k + n)
    a, bt, bias = torch.randn(m, k), torch.randn(n, k), torch.randn(n)
    ta, tb, tc = TensorTree(a), TensorTree(bt), TensorTree(bias)
    i, j = m // 2, n // 2
    ra, rb, rc = _opening(ta, i * k, k), _opening(tb, j * k, k), _opening(tc, j, 1)
    fn = harness.functions.linearElement(
        ("0x" + ta.root.hex(), m, k), ("0x" + tb.root.hex(), n, k), ("0x" + tc.root.hex(), 1, n),
        limbs, i, j, ra, rb, rc)
    tx = fn.build_transaction({"from": w3.eth.accounts[0], "gas": 29_000_000})
    gas = w3.eth.estimate_gas({"from": tx["from"], "to": tx["to"], "data": tx["data"]})
    return gas, len(bytes.fromhex(tx["data"][2:])), sum(len(r[1]) for r in (ra, rb, rc))


def main() -> None:
    rows = []
    with harness_on_devnet(name="OneStepGemmHarness") as harness:
        w3 = harness.w3
        for model, what, m, k, n in PRODUCTS:
            for limbs in ((2, 3) if k == 1024 and "down" in what else (2,)):
                gas, size, nodes = measure(harness, w3, m, k, n, limbs)
                rows.append((model, what, f"{m}x{k}x{n}", k, limbs, gas, size, nodes))
    head = ("model", "product", "M x K x N", "K", "limbs", "tx gas", "gas / K", "calldata B", "proof nodes", "of 10 M")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for model, what, shape, k, limbs, gas, size, nodes in rows:
        print(f"| {model} | {what} | {shape} | {k:,} | {limbs} | {gas:,} | {gas // k:,} | {size:,} | {nodes} | "
              f"{100 * gas / LIMIT:.1f} % |")
    worst = max(r[5] for r in rows)
    print(f"\nlargest transaction: {worst:,} gas ({'within' if worst <= LIMIT else 'OVER'} the 10 M limit)")


if __name__ == "__main__":
    main()
