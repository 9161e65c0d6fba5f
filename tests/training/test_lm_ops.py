"""The op library and the transformer LM: repro gradients close to float64 autograd, and
the same bits across micro-batches, GEMM routes, the C kernels and a sequence alone."""

from __future__ import annotations

import pytest
import torch

from truetrain.errors import ManifestError
from truetrain.training.intgemm import GemmEngine
from truetrain.training.lm import TransformerLM, lm_init_params, lm_param_shapes, parse_lm_spec
from truetrain.training.ops import ReproStep, repro_gradients

SPEC = parse_lm_spec({"kind": "lm", "d_model": 32, "n_layers": 2, "n_heads": 4, "seq_len": 16})
FLOAT64 = GemmEngine("cpu", "float64")
INT8 = GemmEngine("cpu", "int8", small_product=0)
WORKER = GemmEngine("cpu", "int8", fuse=True)  # C kernels on small tensors, float64 small products


def _batch(seed=0, b=6):
    gen = torch.Generator().manual_seed(seed)
    data = torch.randint(0, 256, (b, SPEC.seq_len + 1), generator=gen)
    return data[:, :-1], data[:, 1:]


def _model(seed=1):
    return TransformerLM(SPEC, lm_init_params(SPEC, seed))


def test_spec_defaultsAndRefusals():
    assert SPEC.d_ff == 128 and SPEC.head_dim == 8
    shapes = lm_param_shapes(SPEC)
    assert shapes["tok_emb"] == (256, 32) and shapes["blocks.1.mlp.proj.weight"] == (32, 128)
    assert set(_model().state_dict()) == set(shapes)
    for raw, message in (({"kind": "lm", "d_model": 30, "n_layers": 1, "n_heads": 4, "seq_len": 8},
                          "model.n_heads: 4 does not divide d_model 30"),
                         ({"kind": "lm", "d_model": 32, "n_layers": 0, "n_heads": 4, "seq_len": 8},
                          "model.n_layers: expected an integer in [1, 96], got 0"),
                         ({"kind": "lm", "d_model": 32, "n_layers": 1, "n_heads": 4, "seq_len": 8, "vocab": 5},
                          "model.vocab: unknown field")):
        with pytest.raises(ManifestError) as err:
            parse_lm_spec(raw)
        assert str(err.value) == message


def test_reproGradients_closeToFloat64Autograd():
    ids, targets = _batch()
    model = _model()
    grads, losses = repro_gradients(model, ids, targets, INT8, 2)
    ref = _model().double()
    loss = torch.nn.functional.cross_entropy(ref(ids).reshape(-1, 256), targets.reshape(-1))
    loss.backward()
    from truetrain.training.repro_ops import xent_loss

    sumexp, target = (torch.cat(t) for t in zip(*losses))
    assert abs(float(xent_loss(sumexp, target).mean()) - float(loss.detach())) < 1e-4
    assert set(grads) == set(lm_param_shapes(SPEC))
    grads3, _ = repro_gradients(model, ids, targets, INT8, 3)
    for name, p in ref.named_parameters():  # 13-bit and 20-bit operands
        assert float((grads[name].double() - p.grad).norm() / p.grad.norm()) < 2e-3, name
        assert float((grads3[name].double() - p.grad).norm() / p.grad.norm()) < 5e-5, name


def test_reproGradients_microBatchesRoutesAndCKernels_sameBits():
    ids, targets = _batch(3)
    model = _model(2)
    want, losses = repro_gradients(model, ids, targets, FLOAT64, 2)
    for engine, micro in ((FLOAT64, 1), (INT8, None), (INT8, 4), (WORKER, None), (WORKER, 2)):
        got, got_losses = repro_gradients(model, ids, targets, engine, 2, micro)
        assert all(torch.equal(want[k], got[k]) for k in want), (engine.route, micro)
        assert torch.equal(torch.cat([s for s, _ in losses]), torch.cat([s for s, _ in got_losses]))


def test_forward_sequenceAloneOrInBatch_sameBits_andStockClose():
    ids, _ = _batch(4)
    model = _model(3)
    step = ReproStep(WORKER, 2, ids.numel())
    with torch.no_grad():
        full = model(ids, step)
        alone = model(ids[2:3], ReproStep(WORKER, 2, SPEC.seq_len))
        stock = model(ids)
    assert torch.equal(alone, full[2:3])
    assert float((full - stock).abs().max()) < 1e-3 * float(stock.abs().max())


def _lm_manifest(make_manifest, shards, held, mode="repro", **over):
    from truetrain.training.text import encode_text_shard

    blobs = [encode_text_shard(s) for s in shards]
    fields = dict(model={"kind": "lm", "d_model": 32, "n_layers": 1, "n_heads": 2, "seq_len": 16},
                  optimizer={"kind": "adamw", "lr": 0.003, "warmup_steps": 2}, batch_size=4,
                  steps_per_task=6, checkpoint_interval=3, numeric_mode=mode)
    fields.update(over)
    if mode == "stock":
        fields.pop("limbs", None)
    return make_manifest(blobs, encode_text_shard(held), **fields), blobs


@pytest.fixture(scope="module")
def corpus():
    from truetrain.training.text import demo_corpus, split_text

    return split_text(demo_corpus(60_000), 2, seq_len=16)


def test_lmTask_runsAndReplays_sameHashesAcrossMicroBatches(corpus, make_manifest):
    from truetrain.training import decode_checkpoint, replay, run_task

    shards, held = corpus
    manifest, blobs = _lm_manifest(make_manifest, shards, held)
    result = run_task(manifest, blobs[1], None, 1, 0)
    assert len(result.checkpoint_hashes) == 3 and len(set(result.checkpoint_hashes)) == 3
    assert run_task(manifest, blobs[1], None, 1, 0, micro_batch=1).checkpoint_hashes == result.checkpoint_hashes
    middle = decode_checkpoint(result.checkpoints[1])
    assert replay(manifest, blobs[1], middle, 3).hash() == result.checkpoint_hashes[2]
    loss = result.metrics["train_loss"]
    assert 4.0 < loss[0] < 6.0  # about ln 256 = 5.5 at the start


def test_lmTask_stockMode_runs(corpus, make_manifest):
    from truetrain.training import run_task

    shards, held = corpus
    manifest, blobs = _lm_manifest(make_manifest, shards, held, mode="stock")
    result = run_task(manifest, blobs[0], None, 0, 0)
    assert len(result.checkpoint_hashes) == 3 and 4.0 < result.metrics["train_loss"][0] < 6.0


def test_heldoutMetrics_andSampling_deterministic(corpus, make_manifest):
    from truetrain.training import run_task
    from truetrain.training.lm_eval import heldout_metrics, sample
    from truetrain.training.text import encode_text_shard

    shards, held = corpus
    manifest, blobs = _lm_manifest(make_manifest, shards, held, steps_per_task=30, checkpoint_interval=30,
                                   optimizer={"kind": "adamw", "lr": 0.01})
    result = run_task(manifest, blobs[0], None, 0, 0)
    before = heldout_metrics(manifest, result.checkpoints[0], encode_text_shard(held))
    after = heldout_metrics(manifest, result.final_checkpoint, encode_text_shard(held))
    assert before["bytes"] == after["bytes"] > 0
    assert abs(before["bits_per_byte"] - 8.0) < 0.3  # an untrained model: about uniform over 256
    assert after["bits_per_byte"] < before["bits_per_byte"] - 1.0  # 30 steps already learn bytes
    assert after == heldout_metrics(manifest, result.final_checkpoint, encode_text_shard(held))
    text = sample(manifest, result.final_checkpoint, b"def ", 12)
    assert len(text) == 12 and text == sample(manifest, result.final_checkpoint, b"def ", 12)
    hot = sample(manifest, result.final_checkpoint, b"def ", 12, temperature=1.0, seed=5)
    assert hot == sample(manifest, result.final_checkpoint, b"def ", 12, temperature=1.0, seed=5)
    assert hot != sample(manifest, result.final_checkpoint, b"def ", 12, temperature=1.0, seed=6)


def test_dropoutMask_rateDeterminismAndSlices():
    from truetrain.training.ops.dropout import keep_mask

    key = bytes(range(32))
    mask = keep_mask((1000, 1000), key, "blocks.0.attn", 0, 0.25, "cpu")
    scale = float(torch.tensor(1.0) / torch.tensor(0.75))
    assert set(mask.unique().tolist()) == {0.0, scale}
    assert abs(float((mask == 0).float().mean()) - 0.25) < 0.002
    assert torch.equal(mask, keep_mask((1000, 1000), key, "blocks.0.attn", 0, 0.25, "cpu"))
    # a slice of the batch draws its part of the whole batch's mask
    assert torch.equal(keep_mask((10, 1000), key, "blocks.0.attn", 370 * 1000, 0.25, "cpu"), mask[370:380])
    other = keep_mask((1000, 1000), key, "blocks.0.mlp", 0, 0.25, "cpu")
    assert 0.3 < float(((mask == 0) != (other == 0)).float().mean()) < 0.45  # sites draw apart: 2pq = 0.375
    assert not bool(keep_mask((64,), key, "x", 0, 0.0, "cpu").eq(0).any())


def test_dropout_microBatchesKeepTheMask_andStockDrawsTheSameOne():
    spec = parse_lm_spec({"kind": "lm", "d_model": 32, "n_layers": 2, "n_heads": 4, "seq_len": 16, "dropout": 0.2})
    params = lm_init_params(spec, 4)
    model, plain = TransformerLM(spec, params), TransformerLM(SPEC, params)
    ids, targets = _batch(5)
    model.dropout_key = bytes(32)
    want, _ = repro_gradients(model, ids, targets, FLOAT64, 2)
    for engine, micro in ((FLOAT64, 1), (WORKER, 4), (WORKER, None)):
        got, _ = repro_gradients(model, ids, targets, engine, 2, micro)
        assert all(torch.equal(want[k], got[k]) for k in want), (engine.route, micro)
    without, _ = repro_gradients(plain, ids, targets, FLOAT64, 2)
    assert not torch.equal(want["tok_emb"], without["tok_emb"])
    with torch.no_grad():  # stock mode draws the same mask: its logits are the repro ones, within rounding
        repro = model(ids, ReproStep(WORKER, 2, ids.numel()))
        stock = model(ids)
        model.dropout_key = None  # evaluation: nothing dropped
        assert torch.equal(model(ids), plain(ids))
    assert float((repro - stock).abs().max()) < 1e-3 * float(stock.abs().max())
    assert float((stock - plain(ids).detach()).abs().max()) > 1e-2


def test_dropout_refusals():
    for p in (-0.1, 0.95, "0.1", True):
        with pytest.raises(ManifestError) as err:
            parse_lm_spec({"kind": "lm", "d_model": 32, "n_layers": 1, "n_heads": 4, "seq_len": 8, "dropout": p})
        assert str(err.value) == f"model.dropout: expected a number in [0, 0.9], got {p!r}"


def test_lmTask_withDropout_replaysBitForBit(corpus, make_manifest):
    from truetrain.training import decode_checkpoint, replay, run_task

    shards, held = corpus
    manifest, blobs = _lm_manifest(make_manifest, shards, held, model={
        "kind": "lm", "d_model": 32, "n_layers": 1, "n_heads": 2, "seq_len": 16, "dropout": 0.1})
    result = run_task(manifest, blobs[0], None, 0, 0)
    assert run_task(manifest, blobs[0], None, 0, 0, micro_batch=1).checkpoint_hashes == result.checkpoint_hashes
    middle = decode_checkpoint(result.checkpoints[1])
    assert replay(manifest, blobs[0], middle, 3).hash() == result.checkpoint_hashes[2]
    plain, _ = _lm_manifest(make_manifest, shards, held)
    assert run_task(plain, blobs[0], None, 0, 0).checkpoint_hashes[1] != result.checkpoint_hashes[1]


def test_warmUp_onlyWhereKernelsCompile_andLeavesTaskBitsAlone(corpus, make_manifest, digits1):
    """A worker warms up (one thrown-away step) before accepting a task whose step compiles
    kernels; the tiny models run eagerly and the C kernels, so nothing to warm."""
    from truetrain.training import needs_warm_up, run_task, warm_up

    shards, held = corpus
    small, blobs = _lm_manifest(make_manifest, shards, held)
    default_lm = {"kind": "lm", "d_model": 256, "n_layers": 4, "n_heads": 4, "seq_len": 16}
    wide, _ = _lm_manifest(make_manifest, shards, held, model=default_lm, batch_size=64)  # 64 x 16 x 1024 = 2**20
    stock, _ = _lm_manifest(make_manifest, shards, held, model=default_lm, batch_size=64, mode="stock")
    digits = make_manifest(*digits1)
    assert [needs_warm_up(m) for m in (small, wide, stock, digits)] == [False, True, False, False]
    want = run_task(small, blobs[0], None, 0, 0).checkpoint_hashes
    warm_up(small)
    assert run_task(small, blobs[0], None, 0, 0).checkpoint_hashes == want
