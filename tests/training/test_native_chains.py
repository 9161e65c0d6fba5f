"""The transformer's float64 chains in C (native_chains): the torch ops' bits at any size and
thread count, and a faulty build refused with the torch ops taking over."""

from __future__ import annotations

import logging

import pytest
import torch

from truetrain.training import native, native_chains
from truetrain.training.intgemm import GemmEngine
from truetrain.training.lm import TransformerLM, lm_init_params, parse_lm_spec
from truetrain.training.ops import attention, elementwise, repro_gradients
from truetrain.training.repro_ops import F64, power_scales

SPEC = parse_lm_spec({"kind": "lm", "d_model": 64, "n_layers": 1, "n_heads": 2, "seq_len": 64})


def _same(a, b):
    return native._same(a, b)


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


def test_chains_largeTensors_anyThreadCount_torchOpsBits(threads):
    assert native.ready()
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(512, 300, generator=gen) * 3
    g = torch.randn(512, 300, generator=gen)
    s = torch.randn(8, 96, 96, generator=gen) * 20
    gain, shift = torch.randn(300, generator=gen), torch.randn(300, generator=gen)
    want = {"gelu": elementwise.gelu_forward(x), "dgelu": elementwise.gelu_backward(x, g),
            "softmax": attention.softmax_causal(s), "ln": elementwise.ln_forward(x, gain, shift, 1e-5)}
    up, down = power_scales(g.abs().amax(0), 40)
    want["columns"] = (torch.round(g.to(F64) * up).sum(0), down)
    for count in (1, 2, 3):
        threads(count)
        y, slope = native_chains.gelu_slope(x)
        assert _same(y, want["gelu"]) and _same(native_chains.times_slope(g, slope), want["dgelu"]), count
        assert _same(native_chains.softmax_causal(s), want["softmax"]), count
        assert all(_same(a, b) for a, b in zip(native_chains.ln_forward(x, gain, shift, 1e-5), want["ln"])), count
        assert all(_same(a, b) for a, b in zip(native_chains.column_sums(g, 40), want["columns"])), count


def _gradients(engine):
    gen = torch.Generator().manual_seed(9)
    data = torch.randint(0, 256, (4, SPEC.seq_len + 1), generator=gen)
    model = TransformerLM(SPEC, lm_init_params(SPEC, 3))
    return repro_gradients(model, data[:, :-1], data[:, 1:], engine, 2)[0]


def test_lmStep_cChains_sameBitsAsTorchOps():
    want = _gradients(GemmEngine("cpu", "float64"))
    got = _gradients(GemmEngine("cpu", "int8", fuse=True))
    assert all(torch.equal(got[k], want[k]) for k in want)


def test_faultyChainBuild_refused_torchOpsRun_sameBits(monkeypatch, tmp_path, caplog):
    """A deliberately faulty build of the chains (erf's table read with the wrong row
    stride): the self-test names it and the process keeps to the torch ops."""
    want = _gradients(GemmEngine("cpu", "float64"))
    bad = tmp_path / "chain_kernels_faulty.c"
    bad.write_text(native.CHAIN_SOURCE.read_text().replace("idx[j] = (int64_t)i * (deg + 1);", "idx[j] = (int64_t)i * deg;"))
    monkeypatch.setattr(native, "CHAIN_SOURCE", bad)
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    caplog.set_level(logging.INFO, logger="truetrain.training.native")
    assert not native.ready()
    [record] = caplog.records
    assert record.getMessage().startswith("exact C kernels refused (tt_gelu_slope differs)")
    assert not native_chains.usable(torch.ones(1), True)
    got = _gradients(GemmEngine("cpu", "int8", fuse=True))
    assert all(torch.equal(got[k], want[k]) for k in want)
