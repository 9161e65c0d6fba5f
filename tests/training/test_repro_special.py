"""tanh and erf of repro mode: within 1 float32 ulp, odd, special values, batch-independent."""

from __future__ import annotations

import math

import numpy as np
import torch

from truetrain.training.repro_special import erf64, erf_f32, tanh64, tanh_f32


def _ulps(got: torch.Tensor, exact: np.ndarray) -> float:
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return float(np.max(np.abs(got.numpy().astype(np.float64) - exact) / ulp))


def _grid() -> torch.Tensor:
    x = np.concatenate([np.linspace(-9, 9, 40001), np.logspace(-30, 1.2, 4001),
                        -np.logspace(-12, 0.9, 2001), [0.25, 0.2499999, 1 / 32, 6.0, 5.99]])
    return torch.from_numpy(x.astype(np.float32))


def test_tanh_f32_withinOneUlp():
    x = _grid()
    assert _ulps(tanh_f32(x), np.tanh(x.numpy().astype(np.float64))) <= 1.0


def test_erf_f32_withinOneUlp():
    x = _grid()
    exact = np.array([math.erf(v) for v in x.numpy().astype(np.float64)])
    assert _ulps(erf_f32(x), exact) <= 1.0


def test_tanh_erf_float64_closeToLibm():
    x = torch.linspace(-7, 7, 20001, dtype=torch.float64)
    # tanh inherits exp64's accuracy (about 3e-13 relative); erf's degree-7 table rows to 1e-14
    assert float((tanh64(x) - torch.from_numpy(np.tanh(x.numpy()))).abs().max()) < 5e-13
    exact = torch.tensor([math.erf(v) for v in x.tolist()], dtype=torch.float64)
    assert float((erf64(x) - exact).abs().max()) < 2e-14


def test_tanh_erf_specialValues():
    x = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-300, -40.0], dtype=torch.float64)
    for fn, tiny in ((tanh64, 1e-300), (erf64, 2 / math.sqrt(math.pi) * 1e-300)):
        y = fn(x)
        assert y[0] == 0 and not torch.signbit(y[0]) and y[1] == 0 and torch.signbit(y[1])
        assert y[2] == 1 and y[3] == -1 and math.isnan(y[4]) and y[6] == -1
        assert math.isclose(float(y[5]), tiny, rel_tol=1e-15)


def test_tanh_erf_elementAloneOrInBatch_sameBits():
    x = torch.randn(64, 33, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 3
    for fn in (tanh64, erf64):
        whole = fn(x)
        assert torch.equal(fn(x[5:6, 7:8]), whole[5:6, 7:8])
        assert torch.equal(fn(x.T.contiguous()).T, whole)


def test_sqrt32_correctlyRounded_evenWhereTorchSqrtIsNot():
    """torch.sqrt on an AVX-512 CPU is an ulp off for some inputs; repro's sqrt32 is not."""
    from truetrain.training.repro_ops import sqrt32

    gen = torch.Generator().manual_seed(3)
    x = torch.rand(1_000_000, generator=gen) * torch.logspace(-40, 38, 1_000_000)
    x = torch.cat([x, torch.tensor([0.0, -0.0, 1e-45, 3.4e38, math.inf, 1.0, 2.0, 4.0])])
    assert np.array_equal(sqrt32(x).numpy(), np.sqrt(x.numpy()))  # numpy: the CPU's sqrt instruction
    assert torch.isnan(sqrt32(torch.tensor([-1.0, math.nan]))).all()


def _sqrt64_reference(v: float) -> float:
    """repro_ops.sqrt64 in Python floats (IEEE on every platform; math.sqrt is correctly rounded)."""
    if v != v or v < 0:
        return math.nan
    if v == 0 or v == math.inf:
        return v
    m, e = math.frexp(v)
    if e % 2:
        m, e = m * 2.0, e - 1
    y = float(np.float32(math.sqrt(float(np.float32(m)))))
    y = (y + m / y) * 0.5
    y = (y + m / y) * 0.5
    return y * 2.0 ** (e // 2)


def test_sqrt64_platformFree_withinAnUlp():
    from truetrain.training.repro_ops import sqrt64

    gen = torch.Generator().manual_seed(4)
    x = torch.rand(20_000, generator=gen, dtype=torch.float64) * torch.logspace(-300, 300, 20_000, dtype=torch.float64)
    x = torch.cat([x, torch.tensor([0.0, -0.0, 5e-324, 1.7e308, math.inf, 1.0, 2.0, 0.5], dtype=torch.float64)])
    got = sqrt64(x)
    for v, g in zip(x.tolist(), got.tolist()):
        want = _sqrt64_reference(v)
        assert g == want and math.copysign(1.0, g) == math.copysign(1.0, want), v
        if 0 < v < math.inf:
            assert abs(g - math.sqrt(v)) <= math.ulp(math.sqrt(v)), v
    assert torch.isnan(sqrt64(torch.tensor([-1.0, math.nan], dtype=torch.float64))).all()
