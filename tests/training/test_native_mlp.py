"""A small MLP's gradients in one C call (native_mlp): the per-op route's bits (autograd,
the small linear kernels, the book) at 1 and 2 threads, NaN and inf rows included, and
the per-op route wherever the one call does not apply."""

from __future__ import annotations

import pytest
import torch

from truetrain.training import native, native_mlp
from truetrain.training.intgemm import GemmEngine
from truetrain.training.models import build_model, init_params, parse_model_spec
from truetrain.training.native import _same
from truetrain.training.ops import ReproStep, repro_gradients

INT8 = GemmEngine("cpu", "int8", fuse=True)
FLOAT64 = GemmEngine("cpu", "float64")


@pytest.fixture
def one_calls(monkeypatch):
    """The number of batches the one C call took (after the kernels' self-test)."""
    assert native.ready()
    calls, real = [], native_mlp.gradients
    monkeypatch.setattr(native_mlp, "gradients", lambda *a: calls.append(1) or real(*a))
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


def _case(widths, rows, seed, bad_rows=True):
    spec = parse_model_spec({"kind": "mlp", "widths": widths})
    model = build_model(spec, init_params(spec, seed))
    model.fc[-1].weight.data[0] = -0.0  # a zero output column
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, widths[0], generator=gen) * torch.logspace(-8, 8, widths[0])
    x[-1] = -0.0  # a zero row
    x[0, :3] = torch.tensor([0.0, -0.0, 3.4e38])[:widths[0]]
    if bad_rows:
        x[3, 0], x[4, -1] = float("nan"), float("-inf")
    return model, x, torch.randint(0, widths[-1], (rows,), generator=gen)


def _assert_same(got, want):
    (grads, parts), (want_grads, want_parts) = got, want
    assert list(grads) == list(want_grads)  # the book's order
    for name, g in want_grads.items():
        assert grads[name].shape == g.shape and _same(grads[name], g), name
    for got_part, want_part in zip(zip(*parts), zip(*want_parts), strict=True):  # sumexp, target (by slice)
        assert _same(torch.cat(got_part), torch.cat(want_part))


@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize("limbs,widths,rows", [(2, [64, 128, 10], 64), (2, [13, 29, 7, 5], 37),
                                                (3, [70, 61, 3], 301), (2, [1, 2], 1)])
def test_oneCall_perOpRouteBits_anyThreads(one_calls, threads, nthreads, limbs, widths, rows):
    threads(nthreads)
    model, x, y = _case(widths, rows, rows + limbs, bad_rows=rows > 4)
    got = repro_gradients(model, x, y, INT8, limbs)
    assert one_calls == [1]
    _assert_same(got, _per_op(model, x, y, INT8, limbs))
    if rows > 4:  # NaN and inf rows: NaN gradients, NaN loss parts for those rows
        assert torch.isnan(got[1][0][0][3:5]).all() and torch.isnan(got[0]["fc.0.weight"]).any()


def test_oneCall_finiteRows_torchOpsBits(one_calls):
    model, x, y = _case([9, 33, 4], 23, 5, bad_rows=False)
    got = repro_gradients(model, x, y, INT8, 2)
    assert one_calls == [1]
    _assert_same(got, _per_op(model, x, y, FLOAT64, 2))


def test_badLabel_indexError_likePerOpRoute(one_calls):
    model, x, y = _case([6, 5, 3], 8, 1)
    y[5] = 3
    with pytest.raises(IndexError, match=r"label outside \[0, 3\)"):
        repro_gradients(model, x, y, INT8, 2)
    with pytest.raises(IndexError, match=r"label outside \[0, 3\)"):
        _per_op(model, x, y, INT8, 2)
    assert one_calls == [1]


def test_microBatches_unfusedEngine_cnn_perOpRoute(one_calls):
    model, x, y = _case([6, 5, 3], 8, 2, bad_rows=False)
    whole = repro_gradients(model, x, y, INT8, 2)
    _assert_same(repro_gradients(model, x, y, INT8, 2, micro_batch=3), whole)
    _assert_same(repro_gradients(model, x, y, FLOAT64, 2), whole)
    spec = parse_model_spec({"kind": "cnn", "in_shape": [1, 4, 4], "channels": [2], "kernel": 3, "classes": 3})
    cnn = build_model(spec, init_params(spec, 1))
    x16 = torch.rand(8, 16, generator=torch.Generator().manual_seed(3))
    assert len(repro_gradients(cnn, x16, y, INT8, 2)[0]) == 4
    assert one_calls == [1]


def test_selfTest_underNoGrad_passes():
    """The kernels are first asked for inside an autograd node's forward (grad off there)."""
    with torch.no_grad():
        assert native_mlp.self_test(torch.Generator().manual_seed(1), _same) is None
