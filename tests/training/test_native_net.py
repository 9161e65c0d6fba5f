"""A small classifier's gradients in one C call (native_net): the per-op route's bits
(autograd, the small C kernels, the book) for MLPs and CNNs at 1 and 2 threads, NaN and
inf rows included, and the per-op route wherever the one call does not apply."""

from __future__ import annotations

import pytest
import torch

from truetrain.training import native, native_net
from truetrain.training.intgemm import GemmEngine
from truetrain.training.models import build_model, init_params, parse_model_spec
from truetrain.training.native import _same
from truetrain.training.ops import ReproStep, repro_gradients

INT8 = GemmEngine("cpu", "int8", fuse=True)
FLOAT64 = GemmEngine("cpu", "float64")
DIGITS_CNN = {"kind": "cnn", "in_shape": [1, 8, 8], "channels": [8, 16], "kernel": 3, "classes": 10}
ODD_CNN = {"kind": "cnn", "in_shape": [3, 4, 12], "channels": [5, 7], "kernel": 5, "hidden": [9, 6], "classes": 4}


@pytest.fixture
def one_calls(monkeypatch):
    """The number of batches the one C call took (after the kernels' self-test)."""
    assert native.ready()
    calls, real = [], native_net.gradients
    monkeypatch.setattr(native_net, "gradients", lambda *a: calls.append(1) or real(*a))
    return calls


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


def _per_op(model, x, y, engine, limbs):
    """repro_gradients as it runs without the one call: autograd over the op library."""
    step, losses = ReproStep(engine, limbs, y.numel()), []
    model.loss(x, y, step, y.numel(), losses).backward()
    return step.book.result(), losses


def _case(raw, rows, seed, bad_rows=True):
    spec = parse_model_spec(raw)
    model = build_model(spec, init_params(spec, seed))
    model.fc[-1].weight.data[0] = -0.0  # a zero output column
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, spec.features, generator=gen) * torch.logspace(-8, 8, spec.features)
    x[-1] = -0.0  # a zero row
    x[0, :3] = torch.tensor([0.0, -0.0, 3.4e38])[:spec.features]
    if bad_rows:
        x[3, 0], x[4, -1] = float("nan"), float("-inf")
    return model, x, torch.randint(0, spec.classes, (rows,), generator=gen)


def _dense(*widths):
    return {"kind": "mlp", "widths": list(widths)}


def _assert_same(got, want):
    (grads, parts), (want_grads, want_parts) = got, want
    assert list(grads) == list(want_grads)  # the book's order
    for name, g in want_grads.items():
        assert grads[name].shape == g.shape and _same(grads[name], g), name
    for got_part, want_part in zip(zip(*parts), zip(*want_parts), strict=True):  # sumexp, target (by slice)
        assert _same(torch.cat(got_part), torch.cat(want_part))


@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize("limbs,raw,rows", [(2, _dense(64, 128, 10), 64), (2, _dense(13, 29, 7, 5), 37),
                                             (3, _dense(70, 61, 3), 301), (2, _dense(1, 2), 1),
                                             (2, DIGITS_CNN, 64), (3, ODD_CNN, 7)])
def test_oneCall_perOpRouteBits_anyThreads(one_calls, threads, nthreads, limbs, raw, rows):
    threads(nthreads)
    model, x, y = _case(raw, rows, rows + limbs, bad_rows=rows > 4)
    got = repro_gradients(model, x, y, INT8, limbs)
    assert one_calls == [1]
    _assert_same(got, _per_op(model, x, y, INT8, limbs))
    if rows > 4:  # NaN and inf rows: NaN gradients, NaN loss parts for those rows
        first = next(iter(model.state_dict()))
        assert torch.isnan(got[1][0][0][3:5]).all() and torch.isnan(got[0][first]).any()


@pytest.mark.parametrize("raw", [_dense(9, 33, 4), ODD_CNN])
def test_oneCall_finiteRows_torchOpsBits(one_calls, raw):
    model, x, y = _case(raw, 23, 5, bad_rows=False)
    got = repro_gradients(model, x, y, INT8, 2)
    assert one_calls == [1]
    _assert_same(got, _per_op(model, x, y, FLOAT64, 2))


def test_badLabel_indexError_likePerOpRoute(one_calls):
    model, x, y = _case(_dense(6, 5, 3), 8, 1)
    y[5] = 3
    with pytest.raises(IndexError, match=r"label outside \[0, 3\)"):
        repro_gradients(model, x, y, INT8, 2)
    with pytest.raises(IndexError, match=r"label outside \[0, 3\)"):
        _per_op(model, x, y, INT8, 2)
    assert one_calls == [1]


def test_microBatches_unfusedEngine_perOpRoute(one_calls):
    model, x, y = _case(ODD_CNN, 8, 2, bad_rows=False)
    whole = repro_gradients(model, x, y, INT8, 2)
    _assert_same(repro_gradients(model, x, y, INT8, 2, micro_batch=3), whole)
    _assert_same(repro_gradients(model, x, y, FLOAT64, 2), whole)
    assert one_calls == [1]


def test_selfTest_underNoGrad_passes():
    """The kernels are first asked for inside an autograd node's forward (grad off there)."""
    with torch.no_grad():
        assert native_net.self_test(torch.Generator().manual_seed(1), _same) is None
