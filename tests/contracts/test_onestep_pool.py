"""The one-step 2x2 max pooling (contracts/numerics/OneStepPool.sol): a pooled element with its
mask, and an element of the backward, against the engine (truetrain/training/ops/conv.py's
torch route and the C kernels) and the reference (truetrain/numerics/pool.py), bit for bit:
2,000+ generated elements a kind through OneStepPoolHarness's batches
(tests/contracts/pool_cases.py), then single elements opened against their roots (the
window's four elements, the pooled gradient and the mask), NaN and signed zeros pinned, the
custom errors, the headroom."""

from __future__ import annotations

import brownie
import numpy as np
import pytest
import torch

from tests.contracts.helpers import assert_headroom
from tests.contracts.onestep_kinds import assert_kind_matches, descriptor, opening as _open, tensor_of
from tests.contracts.pool_cases import check, values
from truetrain.numerics.ieee import NAN32, ONE32, bits32
from truetrain.numerics.pool import pool, unpool
from truetrain.numerics.tensor_merkle import TensorTree
from truetrain.training import native
from truetrain.training.ops import conv


def _harness(OneStepPoolHarness, accounts):
    return OneStepPoolHarness.deploy({"from": accounts[0]})


@pytest.mark.parametrize("kind", ["pool", "unpool"])
def test_maps_matchEngineAndReference_bitForBit(OneStepPoolHarness, accounts, kind):
    assert assert_kind_matches(_harness(OneStepPoolHarness, accounts), check, kind) >= 2_000


def _window(v) -> tuple[int, list[int]]:
    out, mask = pool(bits32(np.array(v, np.float32)), (1, 2, 2, 1))
    return int(out.reshape(-1)[0]), [int(m) for m in mask.reshape(-1)]


def test_windows_nanAndSignedZeros_asTheEngine():
    z, nz, one = 0, 0x80000000, ONE32
    assert _window([-0.0, 0.0, 0.0, 0.0]) == (nz, [one, 0, 0, 0])  # the first of equal maxima
    assert _window([0.0, -0.0, -0.0, 0.0]) == (z, [one, 0, 0, 0])
    assert _window([-1.0, np.nan, 2.0, np.inf]) == (NAN32, [0, 0, 0, 0])  # a NaN wins, no mask
    assert _window([-np.inf, -np.inf, -np.inf, -np.inf]) == (0xFF800000, [one, 0, 0, 0])
    assert _window([1.0, 3.0, 3.0, 2.0]) == (0x40400000, [0, one, 0, 0])
    for v in ([-0.0, 0.0, 0.0, 0.0], [0.0, -0.0, -0.0, 0.0], [-1.0, np.nan, 2.0, np.inf], [1.0, 3.0, 3.0, 2.0]):
        t = torch.tensor(v).view(1, 2, 2, 1)
        for route in (conv.pool(t), native.pool(t)):
            assert (int(bits32(route[0].numpy()).reshape(-1)[0]), list(bits32(route[1].numpy()).reshape(-1))) == \
                _window(v)


def test_elements_openWindowsGradientsAndMasks_matchEngine(OneStepPoolHarness, accounts):
    harness = _harness(OneStepPoolHarness, accounts)
    rng = np.random.default_rng(12)
    shape = (2, 14, 6, 3)  # rows of the map straddle leaves
    b, h, w, c = shape
    a = values(rng, b * h * w * c)
    out, mask = pool(a, shape)
    ta = TensorTree(tensor_of(a))
    da = descriptor(ta, b * h * w, c)
    engine_out, engine_mask = conv.pool(tensor_of(a).view(shape))
    assert (bits32(engine_out.numpy()).reshape(-1) == out.reshape(-1)).all()
    pooled = out.size
    for i in (0, 7, pooled // 2, pooled - 1):
        first = ((2 * (i // c // (w // 2))) * w + 2 * (i // c % (w // 2))) * c + i % c
        opens = [_open(ta, first + ((t >> 1) * w + (t & 1)) * c) for t in range(4)]
        got = harness.poolElement.call(da, shape, i, opens)
        assert (got[0], list(got[1])) == (int(out.reshape(-1)[i]), [int(m) for m in mask.reshape(-1)[4 * i:4 * i + 4]])
    g = values(rng, pooled)
    tg, tm = TensorTree(tensor_of(g)), TensorTree(tensor_of(mask))
    ds = [descriptor(tg, pooled // c, c), descriptor(tm, pooled, 4)]
    want = unpool(g, mask, shape).reshape(-1)
    engine = bits32(conv.unpool(tensor_of(g).view(b, h // 2, w // 2, c), engine_mask).numpy()).reshape(-1)
    assert (engine == want).all()
    for i in (0, 1, c, w * c, w * c + c + 2, a.size - 1):
        y, x = i // c // w % h, i // c % w
        src = ((i // c // w // 2) * (w // 2) + x // 2) * c + i % c
        opens = [_open(tg, src), _open(tm, 4 * src + 2 * (y % 2) + x % 2)]
        assert harness.unpoolElement.call(ds, shape, i, opens) == int(want[i]), i


def test_elements_badInputs_revertByName(OneStepPoolHarness, accounts):
    harness = _harness(OneStepPoolHarness, accounts)
    shape = (1, 4, 4, 2)
    a = bits32(np.arange(32, dtype=np.float32))
    ta = TensorTree(tensor_of(a))
    da = descriptor(ta, 16, 2)
    opens = [_open(ta, k) for k in (0, 2, 8, 10)]
    with brownie.reverts("OneStepPoolShapeInvalid: 3, 4"):
        harness.poolElement.call(da, (1, 3, 4, 2), 0, opens)
    with brownie.reverts("OneStepPoolShapeInvalid: 4, 4"):
        harness.poolElement.call(da, (2, 4, 4, 2), 0, opens)
    with brownie.reverts("TensorRangeOutOfBounds: 8, 1, 8"):
        harness.poolElement.call(da, shape, 8, opens)
    changed = bytearray(opens[3][0])
    changed[43] ^= 1  # the last bit of element 10
    with brownie.reverts(f"TensorOpeningInvalid: {ta.root!r}, 0, 1"):
        harness.poolElement.call(da, shape, 0, opens[:3] + [(bytes(changed), opens[3][1])])
    _, mask = pool(a, shape)
    tg, tm = TensorTree(tensor_of(a[:8])), TensorTree(tensor_of(mask))
    ds = [descriptor(tg, 4, 2), descriptor(tm, 8, 4)]
    with brownie.reverts("OneStepOperandsMismatch: 1"):
        harness.unpoolElement.call([ds[0], descriptor(tm, 8, 3)], shape, 0, [_open(tg, 0), _open(tm, 0)])
    with brownie.reverts("TensorRangeOutOfBounds: 32, 1, 32"):
        harness.unpoolElement.call(ds, shape, 32, [_open(tg, 0), _open(tm, 0)])
    with brownie.reverts("OneStepHarnessBatchMalformed: 8, 32"):
        harness.poolBatch.call(shape, b"\x00" * 8)
    with brownie.reverts("OneStepHarnessBatchMalformed: 8, 32"):
        harness.unpoolBatch.call(shape, b"\x00" * 8, b"\x00" * 128)
    assert_headroom(harness)
