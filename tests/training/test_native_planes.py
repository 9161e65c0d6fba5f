"""The int8 route's C plane kernels (native_planes): the torch twins' bits at any thread
count, the engine's and attention's products the float64 route's bits, and fixed short runs
ending on the checkpoint hashes the route before these kernels gave."""

from __future__ import annotations

import math

import pytest
import torch

from truetrain.hashing import keccak256, to_hex32
from truetrain.training import build_manifest, decode_shard, intgemm_fused, native, native_planes, task_start
from truetrain.training.intgemm import GemmEngine, _quantize_with, pow2_scales, quantize
from truetrain.training.intgemm_fused import planes_eager
from truetrain.training.ops import bmm_exact
from truetrain.training.text import demo_corpus, encode_text_shard, split_text
from truetrain.training.trainer import TrainRun, as_shard

FLOAT64 = GemmEngine("cpu", "float64")
FUSED = GemmEngine("cpu", "int8", small_product=0, fuse=True)


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


def _same(a, b):
    return native._same(a, b)


def _values(rows: int, cols: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=gen) * torch.logspace(-6, 6, cols)
    x[0, :6] = torch.tensor([0.0, -0.0, 2.5, -3.5, 1e-42, 3.4e38])
    x[1, 3], x[2] = 4.5, -0.0  # a tie, a zero row
    return x


def test_planeKernels_anyThreadCount_torchTwinsBits(threads):
    assert native.ready()
    x = _values(300, 260, 1)
    rows = torch.ldexp(torch.ones(300), torch.arange(300) % 40 - 20)
    gen = torch.Generator().manual_seed(2)
    for limbs, bits in ((2, 13), (3, 20)):
        count = limbs * (limbs + 1) // 2
        sums = torch.randint(-2 ** 20, 2 ** 20, (1, count, 300, 260), generator=gen, dtype=torch.int32)
        rs, cs = torch.ldexp(torch.ones(300), -rows.log2().int()), torch.ldexp(torch.ones(260), torch.arange(260) % 9)
        want_combine = intgemm_fused._combine(list(sums[0]), rs.double(), cs.double())
        for dim, scale in ((1, None), (0, None), (0, rows)):
            src = x if scale is None else x * scale.unsqueeze(1)
            up, down = pow2_scales(src.abs().amax(dim), bits)
            want = planes_eager(_quantize_with(src, up.unsqueeze(1) if dim == 1 else up, bits), limbs, dim)
            for count_threads in (1, 2, 3):
                threads(count_threads)
                got, got_down = native_planes.quantize_planes(x, dim, bits, limbs, rscale=scale)
                assert torch.equal(got, want) and _same(got_down, down), (limbs, dim, count_threads)
        for count_threads in (1, 2):
            threads(count_threads)
            assert _same(native_planes.combine(sums, limbs, rs, cs)[0], want_combine)
            assert all(_same(a, b) for a, b in zip(native_planes.column_maxima(x, rows),
                                                   intgemm_fused._column_maxima(x, rows)))


@pytest.mark.parametrize("limbs", [2, 3])
def test_engineProducts_cPlanes_sameBitsAsFloat64Route(limbs):
    x, w = _values(512, 256, 3), _values(384, 256, 4)  # 2**17 and more elements: planes
    bias = torch.randn(384, generator=torch.Generator().manual_seed(5))
    left, right = quantize(x, 1, limbs, fuse=True), quantize(w.T, 0, limbs, fuse=True)
    assert left.left_planes() is not None and right.right_planes() is not None
    want = FLOAT64.matmul(quantize(x, 1, limbs), quantize(w.T, 0, limbs), bias)
    assert _same(FUSED.matmul(left, right, bias), want)
    g = torch.randn(512, 384, generator=torch.Generator().manual_seed(6))
    right = quantize(w, 0, limbs, fuse=True)  # contiguous (K, N): the input-gradient product
    assert _same(FUSED.matmul(quantize(g, 1, limbs, fuse=True), right),
                 FLOAT64.matmul(quantize(g, 1, limbs), quantize(w, 0, limbs)))


def test_attentionProducts_int8Planes_sameBitsAsFloat64Route():
    gen = torch.Generator().manual_seed(7)
    a = torch.randn(6, 40, 24, generator=gen) * torch.logspace(-5, 5, 24)
    b = torch.randn(6, 24, 40, generator=gen)
    a[0, 0, :2], b[1, :, 3] = torch.tensor([-0.0, math.inf]), 0.0
    for limbs in (2, 3):
        for left in (a, a.transpose(1, 2).contiguous().transpose(1, 2)):
            for right in (b, b.transpose(1, 2).contiguous().transpose(1, 2)):
                want = bmm_exact(left, right, limbs)
                assert _same(bmm_exact(left, right, limbs, True, True), want)


def test_fusedAttentionProducts_anyThreadCountBothPaths_planeProductsBits(threads):
    assert native.ready()
    gen = torch.Generator().manual_seed(8)
    a = torch.randn(5, 67, 129, generator=gen) * torch.logspace(-5, 5, 129)  # odd sizes: padding
    b = torch.randn(5, 129, 45, generator=gen)
    a[0, 0], b[0, :, 0] = -1.99995, -1.99995  # q = -2**13 throughout: sums past int32
    a[1, 2, 7], b[2, 5, 1], b[3, :, 2] = math.nan, math.inf, -0.0
    causal = (a * torch.ones(67, 129).tril(), a * torch.ones(67, 129).triu(20))  # zero runs: skipped k pairs
    for left_in in (a, a.transpose(1, 2).contiguous().transpose(1, 2), *causal):
        for right_in in (b, b.transpose(1, 2).contiguous().transpose(1, 2)):
            left, sa = native_planes._batched_side(left_in, True, 13, 2)
            right, sb = native_planes._batched_side(right_in, False, 13, 2)
            want = native_planes.combine(native_planes.plane_products(left, right), 2, sa, sb)
            for count_threads, portable in ((1, False), (2, False), (3, True)):
                threads(count_threads)
                assert _same(native_planes.fused_bmm(left_in, right_in, 13, portable), want)


def _manifest(model: dict, shard: bytes, samples: int, steps: int, limbs: int, optimizer: dict):
    ref = {"cid": "x", "hash": to_hex32(keccak256(shard)), "samples": samples}
    return build_manifest(name="h", seed=5, model=model, numeric_mode="repro", limbs=limbs, optimizer=optimizer,
                          batch_size=8 if model["kind"] == "lm" else 64, steps_per_task=steps,
                          checkpoint_interval=steps, rounds=1, shards=[ref], test_set={"cid": "x", "hash": ref["hash"]})


ADAMW = {"kind": "adamw", "lr": 0.004, "warmup_steps": 2}
#: Final checkpoint hashes of these runs on the route before the plane kernels (main at
#: 48027b4: compiled quantisers and combine, attention's products on the float64 BLAS).
RUNS = {
    "mlp": ({"kind": "mlp", "widths": [64, 128, 10]}, 3, 2, {"kind": "sgd", "lr": 0.1, "momentum": 0.9},
            "0x09e5784ba5548008e47ab481559630e6589bb477d50dde07a5e11771a45b6b64"),
    "cnn": ({"kind": "cnn", "in_shape": [1, 8, 8], "channels": [8, 16], "kernel": 3, "classes": 10}, 3, 2, ADAMW,
            "0x8d92fa605732c57ee1646f59191d2dd672eac8dedf1ff95587c1d7e308a41bd7"),
    "lm": ({"kind": "lm", "d_model": 64, "n_layers": 2, "n_heads": 2, "seq_len": 64}, 3, 3, ADAMW,
           "0xe16b67b050d893055fcf1e52d6b749241b916a7b393d55cd79fd81dddbd17bda"),
}


@pytest.mark.parametrize("case", sorted(RUNS))
def test_fixedShortRuns_cPlanesAndFloat64Route_sameCheckpointAsBefore(case, digits1):
    model, steps, limbs, optimizer, before = RUNS[case]
    if model["kind"] == "lm":
        text = split_text(demo_corpus(60_000), 1, 128)[0][0]
        shard, samples = encode_text_shard(text), len(text)
    else:
        shard = digits1[0][0]
        samples = len(decode_shard(shard))
    manifest = _manifest(model, shard, samples, steps, limbs, optimizer)
    hashes = []
    for engine in (None, FLOAT64):  # the worker's engine (fused, C planes), the reference route
        run = TrainRun(manifest, as_shard(shard, manifest), task_start(manifest, None, 0, 0), engine=engine)
        for _ in range(steps):
            run.run_step()
        hashes.append("0x" + keccak256(run.checkpoint().to_bytes()).hex())
    assert hashes == [before, before]
