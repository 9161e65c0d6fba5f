"""The integer GEMM engine: exact integer sums, the same bits on both routes, across thread
counts and batch splits; the exactness self-test and its fallback."""

from __future__ import annotations

import logging
import math

import pytest
import torch

from truetrain.errors import ReproducibilityError
from truetrain.training import gemm_check
from truetrain.training.gemm_check import KernelCheck, self_test
from truetrain.training.intgemm import (INT8_K_CHUNK, ExactSum, GemmEngine, Operand, check_contraction,
                                        operand_bits, pad_for_cuda, quantize, quantize_scaled_columns,
                                        split_planes)

# the engine's own tests run the compiled kernels on small tensors too
pytestmark = pytest.mark.usefixtures("fused_kernels_at_every_size")

INT8 = GemmEngine("cpu", "int8", small_product=0)
FLOAT64 = GemmEngine("cpu", "float64")


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _exact_int(left: Operand, right: Operand) -> list[list[int]]:
    """Python-integer reference of qL @ qR (arbitrary precision)."""
    a = [[int(v) for v in row] for row in left.q.tolist()]
    b = [[int(v) for v in row] for row in right.q.T.tolist()]
    return [[sum(x * y for x, y in zip(r, c)) for c in b] for r in a]


@pytest.mark.parametrize("limbs", [2, 3])
def test_splitPlanes_extremesAndRandom_balancedDigitsAndPairSums(limbs):
    bits = operand_bits(limbs)
    q = torch.cat([torch.tensor([-(2.0 ** bits), 2.0 ** bits - 1, 0.0, -1.0, 63.0, 64.0, -64.0, -65.0]),
                   torch.randint(-(2 ** bits), 2 ** bits, (500,), generator=_gen(1)).float()])
    d = split_planes(q.view(2, -1), limbs).to(torch.int64)
    assert d.shape == (limbs * (limbs + 1) // 2, 2, 254)
    assert int(d[1:limbs].min()) >= -64 and int(d[1:limbs].max()) <= 63  # lower digits balanced
    assert int(d[0].min()) >= -64 and int(d[0].max()) <= 64  # the top one too, one wider
    back = sum(d[i] * 128 ** (limbs - 1 - i) for i in range(limbs))
    assert torch.equal(back.view(-1), q.to(torch.int64))
    pairs = [(i, j) for i in range(limbs) for j in range(i + 1, limbs)]
    assert all(torch.equal(d[limbs + n], d[i] + d[j]) for n, (i, j) in enumerate(pairs))
    # the extremes: -2**b is (-64, 0, ...), 2**b - 1 is (64, -1, ...)
    assert d[0].view(-1)[0] == -64 and d[0].view(-1)[1] == 64 and d[limbs - 1].view(-1)[1] == -1


@pytest.mark.parametrize("limbs", [2, 3])
def test_quantize_rowScalesArePowersOfTwo_andKeepBits(limbs):
    x = torch.randn(6, 50, generator=_gen(2)) * torch.logspace(-20, 20, 6).unsqueeze(1)
    x[5] = 0.0
    op = quantize(x, 1, limbs)
    bits = operand_bits(limbs)
    assert op.q.abs().max() <= 2 ** bits and torch.equal(op.q, op.q.round())
    mant, _ = torch.frexp(op.scale)
    assert torch.all(mant == 0.5)  # every scale a power of two
    assert torch.all(op.q[:5].abs().amax(1) >= 2 ** (bits - 1))  # no bit wasted
    assert torch.equal(op.q[5], torch.zeros(50))
    rel = ((op.q * op.scale.unsqueeze(1)).double() - x.double()).abs().amax(1) / x.abs().amax(1)
    assert float(rel[:5].max()) <= 2.0 ** -bits


@pytest.mark.parametrize("limbs", [2, 3])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (5, 13, 7), (37, 300, 50), (64, 784, 128)])
def test_matmul_int8EqualsFloat64Route_andExactIntegers(limbs, m, k, n):
    a = torch.randn(m, k, generator=_gen(m + k)) * 3
    b = torch.randn(k, n, generator=_gen(n))
    left, right = quantize(a, 1, limbs), quantize(b, 0, limbs)
    fast = INT8.exact_sum(left, right).exact()
    assert torch.equal(fast, FLOAT64.exact_sum(left, right).exact())
    if m * k * n <= 5 * 13 * 7:
        assert fast.tolist() == _exact_int(left, right)
    assert torch.equal(INT8.matmul(left, right), FLOAT64.matmul(left, right))


@pytest.mark.parametrize("limbs,tolerance", [(2, 4e-4), (3, 4e-6)])
def test_matmul_closeToFloat64Reference(limbs, tolerance):
    a = torch.randn(64, 784, generator=_gen(5))
    b = torch.randn(784, 128, generator=_gen(6))
    ref = a.double() @ b.double()
    out = INT8.matmul(quantize(a, 1, limbs), quantize(b, 0, limbs))
    assert out.dtype == torch.float32
    assert float((out.double() - ref).abs().max() / ref.abs().max()) < tolerance


@pytest.mark.parametrize("limbs", [2, 3])
def test_matmul_longK_extremes_splitAndExact(limbs):
    """K beyond one int8 call (2**16) and beyond float64's exact chunk at 3 limbs, with
    every operand at -2**b: both routes give the exact integer K * 2**(2b)."""
    bits = operand_bits(limbs)
    k = INT8_K_CHUNK + 40
    left = Operand(torch.full((3, k), -(2.0 ** bits)), None, limbs)
    right = Operand(torch.full((k, 2), -(2.0 ** bits)), None, limbs)
    want = k * 2 ** (2 * bits)
    for engine in (INT8, FLOAT64):
        assert engine.exact_sum(left, right).exact().flatten().tolist() == [want] * 6
    mixed = Operand(torch.cat([torch.full((1, k), -(2.0 ** bits)),
                               torch.full((1, k), 2.0 ** bits - 1)]), None, limbs)
    assert torch.equal(INT8.exact_sum(mixed, right).exact(),
                       FLOAT64.exact_sum(mixed, right).exact())


@pytest.mark.parametrize("engine", [INT8, FLOAT64], ids=["int8", "float64"])
def test_matmul_rowAloneOrInBatch_andThreads_sameBits(engine):
    a = torch.randn(37, 300, generator=_gen(1))
    b = torch.randn(300, 50, generator=_gen(2))
    right = quantize(b, 0, 2)
    full = engine.matmul(quantize(a, 1, 2), right)
    for rows in (slice(0, 1), slice(5, 6), slice(10, 20)):
        assert torch.equal(engine.matmul(quantize(a[rows], 1, 2), right), full[rows])
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = engine.matmul(quantize(a, 1, 2), right)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, full)


def test_matmul_zeroAndNegativeZero_givePositiveZero():
    a = torch.zeros(3, 4)
    a[1] = torch.tensor([1.0, -1.0, 0.5, -0.5])
    a[2] = -0.0
    for engine in (INT8, FLOAT64):
        out = engine.matmul(quantize(a, 1, 2), quantize(torch.ones(4, 2), 0, 2))
        assert torch.equal(out, torch.zeros(3, 2)) and not torch.signbit(out).any()


def test_exactSums_ofSlices_addToTheWhole():
    """Slices that share the whole batch's scales sum to exactly the whole's integers."""
    g = torch.randn(40, 9, generator=_gen(3))
    a = torch.randn(40, 30, generator=_gen(4))
    amax = g.abs().amax(0)
    right = quantize(a, 1, 2).unscaled()
    whole = INT8.exact_sum(quantize(g.T, 1, 2, amax=amax), right)
    parts = None
    for lo in range(0, 40, 13):
        part = INT8.exact_sum(quantize(g[lo:lo + 13].T, 1, 2, amax=amax),
                              Operand(right.q[lo:lo + 13], None, 2))
        parts = part if parts is None else parts.add(part)
    assert torch.equal(parts.exact(), whole.exact())
    assert torch.equal(parts.finish(None, None), whole.finish(None, None))


def test_operandBits_unknownLimbs_raises():
    assert operand_bits(2) == 13 and operand_bits(3) == 20
    with pytest.raises(ReproducibilityError, match="limbs must be one of"):
        operand_bits(4)


def test_padForCuda_multiplesOfEight_sameProduct():
    a = torch.randint(-128, 128, (5, 13), dtype=torch.int8, generator=_gen(8))
    b = torch.randint(-128, 128, (13, 7), dtype=torch.int8, generator=_gen(9))
    pa, pb = pad_for_cuda(a, b)
    assert pa.shape == (17, 16) and pb.shape == (16, 8)
    assert torch.equal(torch._int_mm(pa, pb)[:5, :7], torch._int_mm(a, b))


def test_selfTest_thisCpu_passes():
    check = self_test("cpu")
    assert check == KernelCheck("cpu", "int8", "exact on every test vector")


def _saturating_kernel(a, b):
    """A deliberately faulty int8 kernel: it saturates the sum of each pair of products at
    int16, like AVX2's vpmaddubsw, and so is wrong at the extremes."""
    k = a.shape[1]
    if k % 2:
        a, b = torch.nn.functional.pad(a, (0, 1)), torch.nn.functional.pad(b, (0, 0, 0, 1))
    pa = a.double().view(a.shape[0], -1, 2)
    pb = b.double().view(-1, 2, b.shape[1])
    pairs = torch.einsum("mpk,pkn->mpn", pa, pb).clamp(-32768, 32767)
    return pairs.sum(1).to(torch.int32)


def _broken_kernel(a, b):
    """A deliberately faulty kernel that is missing altogether on this 'device'."""
    raise RuntimeError("_int_mm: not implemented for this device\nmore detail")


def test_selfTest_faultyKernels_fallBackToFloat64():
    sat = self_test("cpu", kernel=_saturating_kernel)
    assert sat.route == "float64" and sat.reason.startswith("int8 kernel inexact on (17, 65536)")
    broken = self_test("cpu", kernel=_broken_kernel)
    assert broken == KernelCheck("cpu", "float64",
                                 "int8 kernel unavailable: _int_mm: not implemented for this device")


def test_engineFor_logsRouteOnce_andForcedRouteSticks(caplog, monkeypatch):
    monkeypatch.setattr(gemm_check, "_engines", {})
    monkeypatch.setattr(gemm_check, "_checks", {})
    with caplog.at_level(logging.INFO, logger="truetrain.training.gemm_check"):
        first = gemm_check.engine_for("cpu")
        again = gemm_check.engine_for("cpu", route="float64")
    assert first is again and first.route == "int8"
    assert [r.getMessage() for r in caplog.records] == [
        "GEMM route on cpu: int8 (exact on every test vector)"]
    monkeypatch.setattr(gemm_check, "_engines", {})
    monkeypatch.setattr(gemm_check, "_checks", {})
    assert gemm_check.engine_for("cpu", route="float64").route == "float64"
    assert gemm_check.kernel_check("cpu").reason == "chosen in the settings"
    with pytest.raises(ValueError, match="route must be one of"):
        gemm_check.engine_for("cuda:3", route="fast")


def test_engineFor_int8Insisted_faultyKernel_refuses(monkeypatch):
    monkeypatch.setattr(gemm_check, "_engines", {})
    monkeypatch.setattr(gemm_check, "_checks", {})
    monkeypatch.setattr(gemm_check, "self_test",
                        lambda device, fuse=False: self_test(device, kernel=_saturating_kernel))
    with pytest.raises(ReproducibilityError, match="^the int8 GEMM kernel failed its self-test on cpu: "
                                                   r"int8 kernel inexact on \(17, 65536\)"):
        gemm_check.engine_for("cpu", route="int8")
    assert gemm_check.engine_for("cpu").route == "float64"  # auto: falls back instead


FUSED = GemmEngine("cpu", "int8", small_product=0, fuse=True)


@pytest.mark.parametrize("limbs", [2, 3])
def test_fusedKernels_sameBitsAsEager(limbs):
    """The compiled split and combine kernels give the eager engine's bits, both layouts."""
    gen = _gen(20 + limbs)
    for m, k, n in ((33, 300, 50), (5, 13, 7), (64, 784, 128)):
        a, b = torch.randn(m, k, generator=gen) * 5, torch.randn(k, n, generator=gen)
        left, right = quantize(a, 1, limbs), quantize(b, 0, limbs)
        eager = INT8.matmul(quantize(a, 1, limbs), quantize(b, 0, limbs))
        assert torch.equal(FUSED.matmul(left, right), eager)
        assert torch.equal(left.left_planes(), split_planes(left.q, limbs).permute(1, 0, 2))
    assert self_test("cpu", fuse=True).route == "int8"


@pytest.mark.parametrize("limbs", [2, 3])
def test_weightGradient_transposedSums_sameBitsAsDirect_fusedAndEager(limbs):
    """dW = G'.T @ qa (G' = G * sa, quantised per column with the batch's maxima) taken as
    dW.T = qa.T @ G': the same integers, so the same bits on every engine."""
    gen = _gen(40 + limbs)
    m, k, n = 96, 70, 40
    a, g = torch.randn(m, k, generator=gen) * 3, torch.randn(m, n, generator=gen) * 1e-3
    qa = quantize(a, 1, limbs)
    gp = g * qa.scale.unsqueeze(1)
    amax = gp.abs().amax(0)
    direct = INT8.matmul(quantize(gp.T, 1, limbs, amax), qa.unscaled())
    for engine in (INT8, FUSED, FLOAT64):
        fq = quantize(a, 1, limbs, fuse=engine.fuse)
        right = quantize_scaled_columns(g, fq.scale, amax, limbs, fuse=engine.fuse)
        assert torch.equal(engine.matmul(fq.transposed(), right).T, direct)
        sums = engine.exact_sum(fq.transposed(), right)
        assert torch.equal(sums.finish(None, right.scale).T, direct)


def test_fusedReluAndMask_sameBitsAsEager_signedZerosAndNaN():
    """relu and the backward masks: +0.0 for -0.0 and every masked value, NaN kept, on the
    eager ops (x * mask + 0.0) and the compiled selects alike."""
    from truetrain.training import intgemm_fused
    from truetrain.training.ops.conv import apply_mask as _apply

    def _relu(h, fuse):
        return intgemm_fused.run("relu", fuse, h)

    h = torch.tensor([1.5, -0.0, 0.0, -2.0, math.nan, math.inf, -math.inf, 1e-40])
    for fuse in (False, True):
        out, mask = _relu(h, fuse)
        assert out[[0, 5, 7]].tolist() == h[[0, 5, 7]].tolist() and math.isnan(out[4])
        assert out[[1, 2, 3]].view(torch.int32).tolist() == [0, 0, 0]  # +0.0, never -0.0
        assert math.isnan(out[6])  # -inf * 0: NaN, as the eager mask multiply gives
        assert mask.tolist() == [1, 0, 0, 0, 0, 1, 0, 1]
        masked = _apply(torch.tensor([0.0, 1, 1, 0, 0, 1, 0, 1]), h, fuse)
        assert masked.view(torch.int32)[[0, 1, 2, 3]].tolist() == [0, 0, 0, 0]
        assert math.isnan(masked[4]) and masked[5] == math.inf and math.isnan(masked[6])
    assert intgemm_fused.twins_agree("relu", h) and intgemm_fused.twins_agree("apply_mask", mask, h)


@pytest.mark.fuse_threshold
def test_fusedKernels_onlyOnLargeTensors_unlessEverySize():
    from truetrain.training import intgemm_fused

    big = intgemm_fused.MIN_ELEMENTS
    assert intgemm_fused.worth_it(True, big, "cpu") and not intgemm_fused.worth_it(True, big - 1, "cpu")
    assert intgemm_fused.ready("cpu")  # the self-test ran on first asking, and passed
    assert not intgemm_fused.worth_it(False, big)
    with intgemm_fused.every_size():
        assert intgemm_fused.worth_it(True, 1)
    assert not intgemm_fused.worth_it(True, 1)
    # below the threshold a fused engine quantises in one C call (float64 integers, no planes),
    # above it straight to int8 planes (no integers kept)
    small, big = quantize(torch.ones(4, 4), 1, 2, fuse=True), quantize(torch.ones(512, 512), 1, 2, fuse=True)
    assert small._q64 is not None and small._left is None
    assert big._q is None and big._q64 is None and big._left is not None


def _relu_keeping_signed_zeros(h):
    """A deliberately wrong compiled relu: ``h * mask`` keeps -0.0 where the eager route
    gives +0.0 (the bits a worker and its verifier would disagree on)."""
    mask = (h > 0).to(torch.float32)
    return h * mask, mask


@pytest.mark.fuse_threshold
def test_fusedKernels_failingSelfTest_deviceStaysEager_sameBits(monkeypatch, caplog):
    """A compiled kernel that differs from its eager twin is found by the self-test on first
    use; the device then runs the eager kernels for good (a warning says so), same bits."""
    from truetrain.training import intgemm_fused

    monkeypatch.setattr(intgemm_fused, "_verified", {})
    monkeypatch.setattr(intgemm_fused, "_kernels", {})
    monkeypatch.setitem(intgemm_fused._COMPILED_FROM, "relu", _relu_keeping_signed_zeros)
    caplog.set_level(logging.INFO, logger="truetrain.training.intgemm_fused")
    big = torch.randn(512, 600, generator=_gen(5))
    assert not intgemm_fused.worth_it(True, big.numel(), big.device)
    assert [r.getMessage() for r in caplog.records] == [
        "fused GEMM kernels refused on cpu (fused kernel relu differs at 2 limbs): the eager int8 "
        "kernels run, same bits"]
    w = torch.randn(600, 300, generator=_gen(6))
    fused = FUSED.matmul(quantize(big, 1, 2, fuse=True), quantize(w, 0, 2, fuse=True))
    assert torch.equal(fused, FLOAT64.matmul(quantize(big, 1, 2), quantize(w, 0, 2)))
    assert len(caplog.records) == 1  # decided once per device


def test_keepFreedMemory_glibcAcceptsOnce():
    from truetrain.training.allocator import keep_freed_memory

    assert keep_freed_memory() is True and keep_freed_memory() is True


def _nearest_float32(s: int) -> float:
    """The float32 nearest the integer ``s`` (ties to even), by exact comparison."""
    from fractions import Fraction

    import numpy as np

    guess = np.float32(float(s))
    cands = [np.nextafter(guess, np.float32(-np.inf)), guess, np.nextafter(guess, np.float32(np.inf))]
    return float(min(cands, key=lambda c: (abs(Fraction(float(c)) - s), int(np.float32(c).view(np.int32)) & 1)))


def test_exactSums_pastTwoTo53_slicesEqualWhole_andRoundOnce():
    """3 limbs, 16,000 rows of near-full-scale products: S passes 2**53. Slices (float64
    each, exact) add in int64 to the whole's S, and both round S once, to nearest."""
    k = 16000
    gen = _gen(31)
    left = Operand(torch.randint(2 ** 19, 2 ** 20, (1, k), generator=gen).float(), None, 3)
    right = Operand(torch.full((k, 1), 2.0 ** 20 - 1), None, 3)
    exact = sum(int(v) for v in left.q[0].tolist()) * (2 ** 20 - 1)
    assert exact > 2 ** 53
    whole = INT8.exact_sum(left, right)
    parts = None
    for lo in range(0, k, 1000):  # 1,000 rows: each slice's float64 sum is exact
        part = (INT8 if lo % 2000 else FLOAT64).exact_sum(
            Operand(left.q[:, lo:lo + 1000], None, 3), Operand(right.q[lo:lo + 1000], None, 3))
        parts = part if parts is None else parts.add(part)
    assert int(whole.exact()) == int(parts.exact()) == exact
    want = _nearest_float32(exact)
    assert float(whole.finish(None, None)) == float(parts.finish(None, None)) == want
    # the helper's case: RNE to float64 then to float32 would give the wrong neighbour
    s = ExactSum(torch.tensor([[24760990046355458]]), 0)
    assert float(s.finish(None, None)) == _nearest_float32(24760990046355458)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nonFiniteInput_givesNaNRow_onBothRoutes(bad):
    a = torch.ones(3, 40)
    a[1, 7] = bad
    b = torch.randn(40, 5, generator=_gen(40))
    for limbs in (2, 3):
        outs = [e.matmul(quantize(a, 1, limbs), quantize(b, 0, limbs)) for e in (INT8, FLOAT64)]
        for out in outs:
            assert torch.isnan(out[1]).all() and torch.isfinite(out[[0, 2]]).all()
        assert torch.equal(outs[0][[0, 2]], outs[1][[0, 2]])


def test_contractionTooLongForInt64_isRefused():
    check_contraction(2 ** 30, 2)  # 2 limbs: 2**56 fits
    check_contraction(2 ** 22 - 1, 3)
    with pytest.raises(ReproducibilityError, match="^a sum over 4194304 rows is too long for "
                                                   "exact 3-limb products"):
        check_contraction(2 ** 22, 3)
