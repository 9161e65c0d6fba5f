"""The exact C kernels: built with cc, self-tested against the torch ops, refused when a
bit differs or no compiler exists (the torch ops then run: same bits)."""

from __future__ import annotations

import logging

import pytest
import torch

from truetrain.training import native
from truetrain.training.intgemm import GemmEngine, quantize
from truetrain.training.models import build_model, init_params, parse_model_spec
from truetrain.training.ops import repro_gradients

MLP = parse_model_spec({"kind": "mlp", "widths": [64, 32, 10]})
CNN = parse_model_spec({"kind": "cnn", "in_shape": [1, 8, 8], "channels": [4], "kernel": 3, "classes": 10})


def _gradients(spec, engine):
    params = init_params(spec, 7)
    gen = torch.Generator().manual_seed(8)
    x, y = torch.rand(24, 64, generator=gen), torch.randint(0, 10, (24,), generator=gen)
    grads, [(sumexp, target)] = repro_gradients(build_model(spec, params), x, y, engine, 2)
    return grads, sumexp, target


@pytest.fixture
def fresh_native(monkeypatch, tmp_path):
    """A process state with no kernels loaded yet, building into an empty cache."""
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


def test_kernels_builtOnce_selfTested_andUsedBySmallQuantise(fresh_native, caplog):
    caplog.set_level(logging.INFO, logger="truetrain.training.native")
    assert native.ready()
    built = list((fresh_native / "truetrain").glob("exact-kernels-*.so"))
    assert len(built) == 1
    assert [r.getMessage() for r in caplog.records] == ["exact C kernels on cpu: exact on every test vector"]
    x = torch.randn(5, 7, generator=torch.Generator().manual_seed(1))
    fused, plain = quantize(x, 1, 2, fuse=True), quantize(x, 1, 2)
    assert fused._q is None and fused._q64 is not None  # the C kernel made it (as float64)
    assert torch.equal(fused.q, plain.q) and torch.equal(fused.scale, plain.scale)


def _faulty_source(tmp_path):
    """A deliberately faulty build: round half away from zero instead of to even (in the
    quantiser the kernels share, read from beside the faulty source)."""
    bad = tmp_path / "exact_kernels_faulty.c"
    bad.write_text(native.SOURCE.read_text())
    (tmp_path / native.HEADER.name).write_text(native.HEADER.read_text().replace("nearbyintf(", "roundf("))
    return bad


@pytest.mark.parametrize("fault", ["rounds half away from zero", "no compiler"])
def test_faultyOrMissingBuild_refused_torchOpsRun_sameBits(fault, fresh_native, monkeypatch, caplog):
    want = _gradients(MLP, GemmEngine("cpu", "float64"))
    if fault == "no compiler":
        monkeypatch.setenv("CC", str(fresh_native / "no-such-cc"))
        reason = "not built: "
    else:
        monkeypatch.setattr(native, "SOURCE", _faulty_source(fresh_native))
        reason = "tt_quantize differs (bits 13, dim 1, amax own)"
    caplog.set_level(logging.INFO, logger="truetrain.training.native")
    assert not native.ready() and not native.ready()
    [record] = caplog.records
    assert record.levelno == logging.WARNING and record.getMessage().startswith(f"exact C kernels refused ({reason}")
    assert record.getMessage().endswith("the torch ops run, same bits")
    got = _gradients(MLP, GemmEngine("cpu", "int8", fuse=True))
    assert all(torch.equal(a[k], b[k]) for a, b in ((got[0], want[0]),) for k in a)


def test_cnn_mapsKernels_sameBitsAsTorchOps():
    assert native.ready()
    want = _gradients(CNN, GemmEngine("cpu", "float64"))
    got = _gradients(CNN, GemmEngine("cpu", "int8", fuse=True))
    assert all(torch.equal(got[0][k], want[0][k]) for k in want[0])
    assert torch.equal(got[1], want[1]) and torch.equal(got[2], want[2])


def test_softmaxXent_labelOutOfRange_raises():
    assert native.ready()
    with pytest.raises(IndexError, match=r"^softmax_xent: a label outside \[0, 3\)$"):
        native.softmax_xent(torch.zeros(2, 3), torch.tensor([0, 3]), 2)
