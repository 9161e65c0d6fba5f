"""The one-step linear element (contracts/numerics/OneStepGemm.sol) against the engine
(truetrain/training/intgemm.py: float64, int8 and fused routes) and the reference
(truetrain/numerics/gemm_element.py), bit for bit: 2,000+ generated cases through
OneStepGemmHarness.elements (tests/contracts/onestep_cases.py: limb extremes, zeros,
subnormals, quantisation and final-rounding ties, overflow, inf/NaN rows, the longest
contraction K = 1024), then elements of real-shaped products opened against their tensor
roots by range proofs (TensorMerkle), and the custom errors of openings that do not open."""

from __future__ import annotations

import brownie
import numpy as np
import pytest
import torch

from tests.contracts.helpers import assert_headroom
from tests.contracts.onestep_cases import cases, check, product
from truetrain.numerics.tensor_merkle import CHUNK, TensorTree, canonical_bits, range_root

# (contraction length, cases): 2,016 in all; K = 1024 is the default LM's longest (the FFN's
# down-projection, and the weight gradients' sums over 8 x 128 tokens)
PLAN = [(1, 160), (3, 160), (7, 160), (64, 320), (100, 160), (128, 320), (256, 384), (1024, 352)]


@pytest.fixture(scope="module")
def harness(OneStepGemmHarness, accounts):
    return OneStepGemmHarness.deploy({"from": accounts[0]})


def _call(harness):
    return lambda limbs, k, a, b, bias: harness.elements.call(limbs, k, a, b, bias)


def test_elements_matchEngine_bitForBit(harness):
    rng = np.random.default_rng(28)
    total, bad = 0, []
    for index, (k, count) in enumerate(PLAN):
        batch = cases(rng, k, 2 if index % 2 == 0 else 3, count)
        total += len(batch.expected)
        bad += check(_call(harness), batch)
    assert total >= 2_000
    assert not bad, f"{len(bad)} of {total} differ, e.g.\n" + "\n".join(bad[:10])


def test_elements_threeLimbs_longestContraction(harness):
    batch = cases(np.random.default_rng(3), 1024, 3, 32)
    assert check(_call(harness), batch) == []


def _opening(tree: TensorTree, start: int, count: int):
    chunks, proof = tree.open(start, count)
    return (chunks, ["0x" + p.hex() for p in proof])


def _tensor(tree: TensorTree, rows: int, cols: int):
    return ("0x" + tree.root.hex(), rows, cols)


NO_BIAS = ("0x" + "00" * 32, 0, 0)
EMPTY = (b"", [])


@pytest.mark.parametrize("rows,cols,k,limbs,kind", [
    (16, 128, 64, 2, "random"),    # the digits MLP's first layer (batch 16)
    (16, 10, 128, 2, "zeros"),     # its second layer
    (12, 20, 100, 3, "random"),    # rows straddle chunks
    (8, 8, 256, 2, "limb_extremes"),  # the default LM's d256 products
    (4, 4, 1024, 2, "random"),     # the FFN's down-projection
])
def test_linearElement_opensRoots_matchesEngine(harness, rows, cols, k, limbs, kind):
    rng = np.random.default_rng(k + rows)
    x, w, b, out = product(kind, rng, rows, cols, k, limbs, True)
    tx, tw, tb = TensorTree(x), TensorTree(w), TensorTree(b)
    picks = {(0, 0), (rows - 1, cols - 1)} | {(int(rng.integers(rows)), int(rng.integers(cols))) for _ in range(6)}
    for i, j in sorted(picks):
        got = harness.linearElement.call(
            _tensor(tx, rows, k), _tensor(tw, cols, k), _tensor(tb, 1, cols), limbs, i, j,
            _opening(tx, i * k, k), _opening(tw, j * k, k), _opening(tb, j, 1))
        assert got == int(out[i, j]), (i, j)


def test_linearElement_withoutBias_matchesEngine(harness):
    x, w, _, out = product("random", np.random.default_rng(5), 6, 6, 70, 2, False)
    tx, tw = TensorTree(x), TensorTree(w)
    got = harness.linearElement.call(_tensor(tx, 6, 70), _tensor(tw, 6, 70), NO_BIAS, 2, 5, 3,
                                     _opening(tx, 5 * 70, 70), _opening(tw, 3 * 70, 70), EMPTY)
    assert got == int(out[5, 3])


@pytest.mark.parametrize("numel", [1, 64, 65, 130, 64 * 5 + 7, 64 * 16])
def test_openRange_everyShape_matchesPython(harness, numel):
    t = torch.randn(numel)
    t[0] = float("nan")  # opened as the canonical NaN
    tree = TensorTree(t)
    bits = [int(v) for v in canonical_bits(t)]
    assert bits[0] == 0x7FC00000
    for start, count in {(0, numel), (0, 1), (numel - 1, 1), (numel // 3, max(1, numel // 2)),
                         (min(CHUNK - 1, numel - 1), 1)}:
        chunks, proof = tree.open(start, count)
        assert range_root(numel, start, count, chunks, proof) == tree.root
        got = harness.openRange.call("0x" + tree.root.hex(), numel, start, count, chunks,
                                     ["0x" + p.hex() for p in proof])
        assert list(got) == bits[start:start + count]


def test_tamperedOpening_revertsTensorOpeningInvalid(harness):
    t = torch.randn(40, 100)
    tree = TensorTree(t)
    root = "0x" + tree.root.hex()
    chunks, proof = _opening(tree, 3 * 100, 100)
    assert len(proof) > 0
    changed = bytearray(chunks)
    changed[7] ^= 1  # one bit of one element
    with brownie.reverts(f"TensorOpeningInvalid: {tree.root!r}, 4, 3"):
        harness.openRange.call(root, 4000, 300, 100, bytes(changed), proof)
    proof[0] = "0x" + bytes(32).hex()
    with brownie.reverts(f"TensorOpeningInvalid: {tree.root!r}, 4, 3"):
        harness.openRange.call(root, 4000, 300, 100, chunks, proof)
    # the right opening under another tensor's root
    other = TensorTree(t + 1).root
    with brownie.reverts(f"TensorOpeningInvalid: {other!r}, 4, 3"):
        harness.openRange.call("0x" + other.hex(), 4000, 300, 100, *_opening(tree, 300, 100))


def test_linearElement_wrongRow_reverts(harness):
    """Row 2's opening offered as row 3's: its leaves sit elsewhere in the tree."""
    x, w, b, _ = product("random", np.random.default_rng(6), 8, 8, 64, 2, True)
    tx, tw, tb = TensorTree(x), TensorTree(w), TensorTree(b)
    with brownie.reverts(f"TensorOpeningInvalid: {tx.root!r}, 3, 1"):
        harness.linearElement.call(_tensor(tx, 8, 64), _tensor(tw, 8, 64), _tensor(tb, 1, 8), 2, 3, 1,
                                   _opening(tx, 2 * 64, 64), _opening(tw, 64, 64), _opening(tb, 1, 1))


def test_malformedOpenings_revertWithTheirErrors(harness):
    tree = TensorTree(torch.randn(300))
    root = "0x" + tree.root.hex()
    chunks, proof = _opening(tree, 10, 100)
    with brownie.reverts(f"TensorOpeningMalformed: {len(chunks) - 256}, {len(chunks)}, {len(proof)}, {len(proof)}"):
        harness.openRange.call(root, 300, 10, 100, chunks[256:], proof)
    with brownie.reverts(f"TensorOpeningMalformed: {len(chunks)}, {len(chunks)}, {len(proof) + 1}, {len(proof)}"):
        harness.openRange.call(root, 300, 10, 100, chunks, proof + proof[:1])
    with brownie.reverts("TensorRangeOutOfBounds: 250, 51, 300"):
        harness.openRange.call(root, 300, 250, 51, chunks, proof)
    with brownie.reverts("TensorRangeOutOfBounds: 0, 0, 300"):
        harness.openRange.call(root, 300, 0, 0, chunks, proof)


def test_badLimbsAndShapes_revert(harness):
    x, w, b, _ = product("random", np.random.default_rng(7), 4, 4, 64, 2, True)
    tx, tw, tb = TensorTree(x), TensorTree(w), TensorTree(b)
    args = [_tensor(tx, 4, 64), _tensor(tw, 4, 64), _tensor(tb, 1, 4), 2, 1, 1,
            _opening(tx, 64, 64), _opening(tw, 64, 64), _opening(tb, 1, 1)]
    with brownie.reverts("OneStepLimbsInvalid: 4"):
        harness.linearElement.call(*args[:3], 4, *args[4:])
    with brownie.reverts("OneStepShapeInvalid: 1, 4"):
        harness.linearElement.call(*args[:5], 4, *args[6:])
    with brownie.reverts("OneStepShapeInvalid: 1, 1"):
        harness.linearElement.call(args[0], _tensor(tw, 2, 128), *args[2:])
    with brownie.reverts("OneStepShapeInvalid: 1, 1"):
        harness.linearElement.call(*args[:2], _tensor(tb, 1, 5), *args[3:])
    with brownie.reverts("OneStepHarnessBatchMalformed: 8, 4, 1, 1"):
        harness.elements.call(2, 1, b"\x00" * 8, b"\x00" * 4, [0])


def test_harness_keepsBytecodeHeadroom(harness):
    assert_headroom(harness)
