"""Pipeline-parallel repro training (issue 17's numeric core): a model split by layers
into stages gives the single-process checkpoints bit for bit for any stage count and
micro-batch count; a stage replayed alone reproduces what it sent; a corrupted
activation is traced to the stage that sent it."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from truetrain.errors import PipelineError
from truetrain.training import merkle_proof, run_task, validate_manifest, verify_proof
from truetrain.training.lm import parse_lm_spec
from truetrain.training.models import param_shapes, parse_model_spec
from truetrain.training.pipeline import (Divergence, Kind, Message, MessageStore, Stage, StageLog, audit_stage,
                                         broken_links, entry_leaf, first_divergence, log_leaves, log_root,
                                         merge_checkpoints, micro_slices, model_units, pipeline_step,
                                         replay_micro_batch, replay_stage, run_pipeline_task, split_at,
                                         split_by_params, stage_checkpoint, train_pipelined)
from truetrain.training.task import task_start
from truetrain.training.text import encode_text_shard

LM = {"kind": "lm", "d_model": 64, "n_layers": 4, "n_heads": 4, "seq_len": 32, "dropout": 0.1}
# clip_norm well below the gradients' norm, so every step clips
ADAMW = {"kind": "adamw", "lr": 0.003, "warmup_steps": 2, "clip_norm": 0.05}


@pytest.fixture(scope="module")
def lm_job(make_manifest):
    """(manifest, shard bytes, the single-process task's checkpoint hashes and losses)."""
    from truetrain.training.text import demo_corpus, split_text

    shards, held = split_text(demo_corpus(40_000), 1, seq_len=32)
    blob = encode_text_shard(shards[0])
    manifest = make_manifest([blob], encode_text_shard(held), model=LM, optimizer=ADAMW, batch_size=4,
                             steps_per_task=6, checkpoint_interval=2)
    single = run_task(manifest, blob, None, 0, 0)
    return manifest, blob, single.checkpoint_hashes, single.metrics["train_loss"]


@pytest.fixture(scope="module")
def honest(lm_job):
    """The 3-stage, 2-micro-batch pipelined task."""
    manifest, blob, _, _ = lm_job
    return run_pipeline_task(manifest, blob, None, 0, 0, split_by_params(manifest.model, 3), micro_batches=2)


def test_split_balancedAndExplicit_perStageParametersAboutOneOverS():
    spec = parse_lm_spec({"kind": "lm", "d_model": 64, "n_layers": 6, "n_heads": 4, "seq_len": 32})
    assert model_units(spec) == ("embed", *(f"block.{i}" for i in range(6)), "head")
    whole = sum(torch.Size(s).numel() for s in param_shapes(spec).values())
    replica = spec.vocab * spec.d_model  # the last stage's copy of tok_emb
    for stages, starts in ((2, (0, 4)), (3, (0, 3, 5)), (4, (0, 2, 4, 6))):
        plan = split_by_params(spec, stages)
        counts = plan.param_counts()
        assert plan.starts == starts and sum(counts) == whole + replica
        assert max(counts) <= 1.3 * whole / stages, (stages, counts)
    plan = split_at(spec, [0, 3, 5])
    assert plan.units_of(0) == ("embed", "block.0", "block.1") and plan.units_of(2) == ("block.4", "block.5", "head")
    assert plan.param_names(2)[-3:] == ["ln_f.weight", "ln_f.bias", "tok_emb"]
    assert "tok_emb" not in plan.norm_names(2) and "tok_emb" in plan.norm_names(0)
    assert split_by_params(spec, 1).param_counts() == [whole]
    for starts in ([1, 3], [0, 3, 3], [0, 8], []):
        with pytest.raises(PipelineError, match="stage starts"):
            split_at(spec, starts)
    with pytest.raises(PipelineError, match="expected 1 to 8"):
        split_by_params(spec, 9)
    cnn = parse_model_spec({"kind": "cnn", "in_shape": [1, 8, 8], "channels": [8], "kernel": 3, "classes": 10})
    with pytest.raises(PipelineError, match="does not split"):
        split_by_params(cnn, 2)
    assert micro_slices(7, 3) == [(0, 2), (2, 4), (4, 7)]
    with pytest.raises(PipelineError, match="micro-batches"):
        micro_slices(4, 5)


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("micro", [1, 2, 4])
def test_pipelinedLM_equalsSingleProcess(lm_job, stages, micro):
    manifest, blob, want, losses = lm_job
    plan = split_by_params(manifest.model, stages)
    run = run_pipeline_task(manifest, blob, None, 0, 0, plan, micro_batches=micro)
    assert run.checkpoint_hashes == want
    assert run.losses == losses


def test_pipelinedLM_embeddingAloneAndHeadAlone_unevenMicroBatches(lm_job):
    manifest, blob, want, _ = lm_job
    plan = split_at(manifest.model, [0, 1, 5])  # embed | block.0-3 | head
    assert plan.param_names(0) == ["tok_emb", "pos_emb"] and plan.param_names(2) == ["ln_f.weight", "ln_f.bias",
                                                                                     "tok_emb"]
    assert run_pipeline_task(manifest, blob, None, 0, 0, plan, micro_batches=3).checkpoint_hashes == want


def test_clipping_engages(lm_job):
    manifest, blob, want, _ = lm_job
    loose = validate_manifest({**manifest.raw, "optimizer": {**manifest.raw["optimizer"], "clip_norm": 100.0}})
    assert run_task(loose, blob, None, 0, 0).checkpoint_hashes[1:] != want[1:]


def test_pipelinedMLP_equalsSingleProcess(digits1, make_manifest):
    shards, test = digits1
    manifest = make_manifest(shards, test, model={"kind": "mlp", "widths": [64, 48, 32, 10]}, steps_per_task=4,
                             checkpoint_interval=2)
    want = run_task(manifest, shards[0], None, 0, 0).checkpoint_hashes
    plan = split_by_params(manifest.model, 3)
    assert plan.units_of(0) == ("fc.0",) and plan.param_counts() == [64 * 48 + 48, 48 * 32 + 32, 32 * 10 + 10]
    assert run_pipeline_task(manifest, shards[0], None, 0, 0, plan, micro_batches=4).checkpoint_hashes == want


def test_stageReplayedAlone_reproducesItsLog(lm_job, honest):
    manifest, blob, want, _ = lm_job
    plan = split_by_params(manifest.model, 3)
    assert honest.checkpoint_hashes == want and broken_links(honest.logs) == []
    for s in range(3):
        start = honest.stage_checkpoints[s][2]  # mid-task: steps 2 and 3
        replayed = replay_stage(manifest, plan, s, start, blob, honest.logs[s], honest.store, 2, micro_batches=2,
                                checkpoint_every=2)
        committed = {k: h for k, h in honest.logs[s].sent().items() if k[0] in (2, 3) and k[1] != Kind.CHECKPOINT}
        assert {k: h for k, h in replayed.sent().items() if k[1] != Kind.CHECKPOINT} == committed
        assert len(committed) >= 4  # messages of both steps: activations or gradients, norms
        assert replayed.checkpoints()[4] == honest.logs[s].checkpoints()[4]
    # replayed from the start, a stage's whole log comes back, so its committed root does; the
    # root does not depend on the order in which messages arrived
    replayed = replay_stage(manifest, plan, 1, honest.stage_checkpoints[1][0], blob, honest.logs[1], honest.store, 6,
                            micro_batches=2, checkpoint_every=2)
    assert log_root(replayed, 3) == log_root(honest.logs[1], 3)
    shuffled = StageLog(1, list(reversed(honest.logs[1].entries)))
    assert log_root(shuffled, 3) == log_root(honest.logs[1], 3) != log_root(honest.logs[2], 3)
    # the stage checkpoints make up the whole model's
    parts = [honest.stage_checkpoints[s][6] for s in range(3)]
    assert merge_checkpoints(parts).hash() == want[-1]
    assert stage_checkpoint(merge_checkpoints(parts), plan, 1).hash() == parts[1].hash()


def _nudge_activation(step: int, micro: int):
    def tamper(message: Message) -> Message:
        if (message.kind, message.step, message.micro) != (Kind.ACT, step, micro):
            return message
        return dataclasses.replace(message, tensors={"x": message.tensors["x"] + 1e-3})
    return tamper


def test_corruptedActivation_blamesTheStageThatSentIt(lm_job, honest):
    manifest, blob, want, _ = lm_job
    plan = split_by_params(manifest.model, 3)
    start = task_start(manifest, None, 0, 0)
    bad = train_pipelined(manifest, blob, start, 6, plan, micro_batches=2, every=2, tamper={1: _nudge_activation(2, 1)})
    assert bad.checkpoint_hashes[:2] == want[:2] and bad.checkpoint_hashes[-1] != want[-1]
    # downstream stage 2 received something else at step 2, micro-batch 1, and sent other gradients
    got, ref = bad.logs[2].received(2), honest.logs[2].received(2)
    assert got[(2, Kind.ACT, 0, 1)] == ref[(2, Kind.ACT, 0, 1)] and got[(2, Kind.ACT, 1, 1)] != ref[(2, Kind.ACT, 1, 1)]
    assert bad.logs[2].sent()[(2, Kind.GRAD, 1, 2)] != honest.logs[2].sent()[(2, Kind.GRAD, 1, 2)]
    # the first difference in causal order is what stage 1 sent at (step 2, micro-batch 1)
    assert first_divergence(bad.logs, honest.logs) == Divergence(2, 1, 1, Kind.ACT)
    assert first_divergence(honest.logs, honest.logs) is None
    assert broken_links(bad.logs) == []  # every stage received what its upstream committed to
    # the offending message opens under stage 1's committed root
    leaves = log_leaves(bad.logs[1], 3)
    i = next(i for i, e in enumerate(leaves) if e.key == (2, Kind.ACT, 1, 1) and e.sent)
    root = log_root(bad.logs[1], 3)
    assert verify_proof(root, i, entry_leaf(leaves[i]), merkle_proof([entry_leaf(e) for e in leaves], i))
    assert root != log_root(honest.logs[1], 3)
    # replayed alone from their committed inputs: stage 1 is caught there, stages 0 and 2 replay clean
    options = dict(micro_batches=2, checkpoint_every=2)
    caught = audit_stage(manifest, plan, 1, bad.stage_checkpoints[1][0], blob, bad.logs[1], bad.store, 6, **options)
    assert (caught.step, caught.kind, caught.micro, caught.source) == (2, Kind.ACT, 1, 1)
    for s in (0, 2):
        assert audit_stage(manifest, plan, s, bad.stage_checkpoints[s][0], blob, bad.logs[s], bad.store, 6,
                           **options) is None, s
    # the referees' recomputation of the one disputed (step 2, micro-batch 1): each stage alone
    for s in range(3):
        sent = bad.logs[s].sent()
        committed = {k: sent.get((2, k, 1, s)) for k in (Kind.ACT, Kind.GRAD)}
        again = replay_micro_batch(manifest, plan, s, bad.stage_checkpoints[s][2], blob, bad.logs[s], bad.store, 1,
                                   micro_batches=2)
        if s == 1:  # its input gradient came from its own (honest) graph: only the activations differ
            assert again[Kind.ACT] != committed[Kind.ACT] and again[Kind.GRAD] == committed[Kind.GRAD]
        else:
            assert again == committed, s


def test_lyingReceiver_isABrokenLink(honest):
    logs = [StageLog(log.stage, list(log.entries)) for log in honest.logs]
    i, entry = next((i, e) for i, e in enumerate(logs[2].entries) if not e.sent and e.kind == Kind.ACT)
    logs[2].entries[i] = dataclasses.replace(entry, hash=bytes(32))
    assert broken_links(logs) == [(2, logs[2].entries[i])]


def test_messages_hashAddressed_andRefused(honest):
    message = Message(Kind.GRAD, 3, 1, 2, {"g": torch.arange(6, dtype=torch.float32).view(2, 3)})
    store = MessageStore()
    address = store.put(message)
    back = store.get(address)
    assert (back.kind, back.step, back.micro, back.source) == (Kind.GRAD, 3, 1, 2)
    assert torch.equal(back.tensors["g"], message.tensors["g"])
    assert store.put(dataclasses.replace(message, step=4)) != address  # the header is inside the hash
    assert store.moved[Kind.GRAD] == 2 * len(message.to_bytes())
    store._blobs[address] = store._blobs[address][:-1] + b"\x00"
    with pytest.raises(PipelineError, match="does not match its address"):
        store.get(address)
    for data, text in ((b"nope", "not a pipeline message"), (message.to_bytes()[:-2], "truncated"),
                       (message.to_bytes() + b"\x00", "trailing bytes")):
        with pytest.raises(PipelineError, match=text):
            Message.from_bytes(data)
    assert sum(honest.store.moved.values()) > 0 and set(honest.store.moved) == {
        Kind.ACT, Kind.GRAD, Kind.TIED, Kind.NORM_MAX, Kind.NORM_SUM}


def test_stage_refusesMisplacedOrMisshapenMessages_andDisagreeingReplicas(lm_job, honest):
    manifest, blob, _, _ = lm_job
    plan = split_by_params(manifest.model, 3)
    stage = Stage(manifest, plan, 1, honest.stage_checkpoints[1][2], blob, honest.store, micro_batches=2)
    stage.begin_step()
    old = honest.logs[0].sent()[(0, Kind.ACT, 0, 0)]  # a step-0 activation offered at step 2
    with pytest.raises(PipelineError, match="stage 1 expected ACT of step 2, micro-batch 0 from stage 0; got ACT of step 0"):
        stage.forward(0, old)
    wrong = honest.store.put(Message(Kind.ACT, 2, 0, 0, {"x": torch.zeros(2, 32, 8)}))
    with pytest.raises(PipelineError, match=r"holds \{'x': \(\(2, 32, 8\)"):
        stage.forward(0, wrong)
    with pytest.raises(PipelineError, match="received no ACT"):
        stage.forward(0, None)
    parts = [honest.stage_checkpoints[s][4] for s in range(3)]
    last = dataclasses.replace(parts[2], tensors=dict(parts[2].tensors))
    last.tensors["model.tok_emb"] = last.tensors["model.tok_emb"] + 1.0
    with pytest.raises(PipelineError, match="stages disagree on model.tok_emb at step 4"):
        merge_checkpoints([parts[0], parts[1], last])


def test_stagesHoldTheirShare_andPerMicroBatchMaximaWouldChangeTheBits(lm_job, honest):
    manifest, blob, want, _ = lm_job
    plan = split_by_params(manifest.model, 3)
    whole = sum(torch.Size(s).numel() for s in param_shapes(manifest.model).values())
    for s, counts in enumerate(plan.param_counts()):
        held = honest.stage_checkpoints[s][6]
        assert sum(t.numel() for t in held.group("model").values()) == counts
        moments = [t for k, t in held.group("optim").items() if k.startswith("exp_avg")]
        assert sum(t.numel() for t in moments) == 2 * counts  # Adam's two moments of its own parameters
        assert counts <= 0.5 * whole  # 3 stages of a 4-block model: at most 2 blocks' worth each
    # without the observing pass each micro-batch's sums are quantised on its own maxima: other bits
    start, store = task_start(manifest, None, 0, 0), MessageStore()
    stages = [Stage(manifest, plan, s, stage_checkpoint(start, plan, s), blob, store, micro_batches=2)
              for s in range(3)]
    for stage in stages:
        stage.multi = False
    pipeline_step(stages)
    pipeline_step(stages)
    assert merge_checkpoints([s.checkpoint() for s in stages]).hash() != want[1]


def test_stagesOnDifferentRoutes_andAnAuditorOnAnother_agree(lm_job, honest):
    """Workers differ: a stage on the float64 route (no C kernels, no int8) among int8
    stages gives the same bits, and an auditor on that route replays an int8 stage clean."""
    from truetrain.training.intgemm import GemmEngine

    manifest, blob, want, _ = lm_job
    plan, float64 = split_by_params(manifest.model, 3), GemmEngine("cpu", "float64")
    start, store = task_start(manifest, None, 0, 0), MessageStore()
    stages = [Stage(manifest, plan, s, stage_checkpoint(start, plan, s), blob, store, micro_batches=2,
                    engine=float64 if s == 1 else None) for s in range(3)]
    for _ in range(2):
        pipeline_step(stages)
    assert merge_checkpoints([s.checkpoint() for s in stages]).hash() == want[1]
    assert audit_stage(manifest, plan, 2, honest.stage_checkpoints[2][2], blob, honest.logs[2], honest.store, 2,
                       micro_batches=2, checkpoint_every=2, engine=float64) is None
