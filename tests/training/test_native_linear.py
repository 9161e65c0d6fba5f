"""The small linear map's C kernels (native_linear): the float64 route's bits at any thread
count, for the forward (with and without a bias), the input gradient and the weight and
bias gradients of a batch in one piece."""

from __future__ import annotations

import pytest
import torch

from truetrain.training import native, native_linear
from truetrain.training.intgemm import GemmEngine, Operand, operand_bits, quantize
from truetrain.training.repro_ops import operand_bits as sum_bits

FLOAT64 = GemmEngine("cpu", "float64")


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


def _values(rows: int, cols: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=gen) * torch.logspace(-6, 6, cols)
    x[0, :4] = torch.tensor([0.0, -0.0, 2.5, 3.4e38])
    x[2] = -0.0  # a zero row: zero sums, +0.0
    return x


@pytest.mark.parametrize("limbs", [2, 3])
def test_smallLinear_anyThreadCount_float64RouteBits(threads, limbs):
    assert native.ready()
    x, w, g = _values(301, 70, 1), _values(61, 70, 2), _values(301, 61, 3)  # 301*70*61 > 2**20: threaded
    bias = torch.randn(61, generator=torch.Generator().manual_seed(4))
    bias[0] = -0.0
    qa = quantize(x, 1, limbs)
    forward, backward = quantize(w.T, 0, limbs), quantize(w, 0, limbs)
    want_y = FLOAT64.matmul(qa, forward, bias)
    want_nobias = FLOAT64.matmul(qa, forward)
    want_dx = FLOAT64.matmul(quantize(g, 1, limbs), backward)
    bits_b = sum_bits(301, 0)
    q64, down, want_sb, want_down_b = native.grad_columns(g, qa.scale, operand_bits(limbs), bits_b)
    want_dwt = FLOAT64.matmul(qa.transposed(), Operand(None, down, limbs, q64=q64))
    for count in (1, 2, 3):
        threads(count)
        y, got = native_linear.product(x, forward, bias)
        assert native._same(y, want_y) and native._same(got.q64, qa.q64) and native._same(got.scale, qa.scale)
        assert native._same(native_linear.product(x, forward, None)[0], want_nobias)
        assert native._same(native_linear.product(g, backward, None)[0], want_dx)
        dw, db = native_linear.weight_grad(g, got, bits_b)
        assert native._same(dw, want_dwt.T.contiguous())
        assert native._same(db, want_sb.add(0.0).mul_(want_down_b).to(torch.float32))
