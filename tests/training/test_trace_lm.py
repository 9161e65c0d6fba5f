"""The transformer LM's program and trace (truetrain/trace/program_lm.py): a small LM with
dropout (d32 x 1 layer, seq 32, batch 4) and the demo LM (truetrain/demo/run.py's, AdamW
lr 0.004 warm-up 10), both AdamW with clipping. The trace's update entries give the
training path's parameters and AdamW state bit for bit (step 0 and a later one, whose
learning rate and dropout key differ: the program is per step, its template one per job);
two builds agree; one flipped bit in the attention's output, the softmax or a LayerNorm is
the first divergence; and the on-chain one-step harnesses recompute one element of eleven
entries equal to the trace's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from truetrain.demo.run import LM_MODEL
from truetrain.trace import APP, KINDS, build_trace, derive, first_divergence, kinds_lm, step_scalars, updated_state
from truetrain.trace.program import BATCH, Ref
from truetrain.numerics.tensor_merkle import TensorTree, canonical_bits
from truetrain.training import build_manifest, task_start
from truetrain.training.checkpoint import checkpoint_commitment
from truetrain.training.text import demo_corpus, encode_text_shard
from truetrain.training.trainer import train

from tests.training.conftest import assert_follows_kinds, data_ref, recompute_on_chain

SMALL = {"kind": "lm", "d_model": 32, "n_layers": 1, "n_heads": 4, "seq_len": 32, "dropout": 0.1}


def _job(model: dict, batch: int, steps: int, warmup: int):
    shard = encode_text_shard(demo_corpus(30_000))
    ref = data_ref(shard)
    manifest = build_manifest(name="trace-lm", seed=3, numeric_mode="repro", model=model,
                              optimizer={"kind": "adamw", "lr": 0.004, "warmup_steps": warmup}, batch_size=batch,
                              steps_per_task=30, checkpoint_interval=10, rounds=3, shards=[ref], test_set=ref)
    checkpoints, _ = train(manifest, shard, task_start(manifest, None, 0, 0), steps, every=1)
    return manifest, shard, checkpoints


@pytest.fixture(scope="module")
def small():
    return _job(SMALL, 4, 3, 2)


@pytest.fixture(scope="module")
def demo():
    return _job(LM_MODEL, 8, 2, 10)


@pytest.fixture(scope="module")
def trace2(small):
    manifest, shard, checkpoints = small
    return build_trace(manifest, shard, checkpoints[2], keep=True)


def _program(manifest, ckpt):
    return derive(manifest, **step_scalars(manifest, ckpt))


def _bits(t: torch.Tensor) -> np.ndarray:
    return canonical_bits(t)


def _entry(program, label: str, output: int = 0) -> int:
    return next(t for t, a in enumerate(program.entries) if a.label == label and a.output == output)


def test_program_lm_kindsAndStepAttributes(small):
    manifest, _, checkpoints = small
    p0, p2 = _program(manifest, checkpoints[0]), _program(manifest, checkpoints[2])
    kinds = {a.kind for a in p0.entries}
    assert kinds == {"embedding", "add", "dropout", "layernorm", "layernorm_backward", "linear", "permute", "bmm",
                     "softmax_row_sum", "softmax", "softmax_backward", "gelu", "gelu_backward", "xent_partial_sum",
                     "xent_loss", "xent_grad", "row_scales", "weight_grad_transposed", "column_sum", "scatter",
                     "clip_max", "clip_sum", "clip_factor", "adam_powers", "adam", "increment"}
    assert set(KINDS) - kinds == {"relu", "apply_mask", "sgd", "weight_grad", "fedavg", "diloco", "pool", "unpool"}
    assert len(p0) == len(p2) == 152 and len(p0.updates) == len(p0.state)  # every state tensor is updated
    assert p0.batch == ("inputs", "targets", "positions", "dropout_key", "lr")
    # the learning rate (warm-up) and the dropout key differ from step to step, and both are
    # batch tensors: one program, one root for every step of the job (the root it binds)
    assert dict(p0.scalars)["lr_step"] == 0 and dict(p2.scalars)["lr_step"] == 2
    assert p0.entries == p2.entries and p0.root() == p2.root() == p0.template_root()
    assert all(a.attrs["lr"] == 0.0 and a.inputs[-1] == Ref(BATCH, 4) for a in p0.entries if a.kind == "adam")
    tied = p0.entries[_entry(p0, "tok_emb gradient")]
    assert [p0.entries[r.index].kind for r in tied.inputs] == ["weight_grad_transposed", "scatter"]


@pytest.mark.parametrize("optimizer", [{"kind": "adamw", "lr": 0.004, "warmup_steps": 2, "clip_norm": 1.0},
                                       {"kind": "adam", "lr": 0.004}], ids=["adamw-clipped", "adam"])
def test_program_lm_followsTheKindTable(optimizer):
    """Every entry of the LM's program (dropout; AdamW with clipping, or Adam) names a kind of
    the one table with the right inputs and attributes: attention's heads are parts of one
    tensor (bmm's a_part, b_part), its dq, dk, dv one permute of three inputs, the positions and
    the dropout key batch tensors, the clip factor one output, lr_step an increment."""
    ref = data_ref(encode_text_shard(demo_corpus(2_000)))
    manifest = build_manifest(name="trace-lm", seed=3, numeric_mode="repro", model=SMALL, optimizer=optimizer,
                              batch_size=4, steps_per_task=30, checkpoint_interval=10, rounds=3, shards=[ref],
                              test_set=ref)
    program = derive(manifest)
    assert_follows_kinds(program)
    kinds = [a.kind for a in program.entries]
    clipped = "clip_norm" in optimizer
    assert (kinds.count("clip_factor"), kinds.count("increment")) == ((1, 1) if clipped else (0, 0))
    qkv = program.entries[_entry(program, "blocks.0.qkv gradient")]
    assert qkv.kind == "permute" and len(qkv.inputs) == 3
    scores = program.entries[_entry(program, "blocks.0.scores")]
    assert scores.attrs["a_part"] == 0 and scores.attrs["b_part"] == 1 and scores.dims == (3 * 16 * 32, 8) * 2


@pytest.mark.parametrize("which, step", [("small", 0), ("small", 2), ("demo", 0), ("demo", 1)])
def test_trace_updates_equalTheTrainingStep_bitForBit(request, which, step):
    manifest, shard, checkpoints = request.getfixturevalue(which)
    program = _program(manifest, checkpoints[step])
    trace = build_trace(manifest, shard, checkpoints[step], keep=set(program.updates.values()))
    after, want = updated_state(program, trace), checkpoints[step + 1].tensors
    assert sorted(after) == sorted(want)
    for name, value in after.items():
        assert value.dtype == want[name].dtype and np.array_equal(_bits(value), _bits(want[name])), name
    # level 1's commitments are the checkpoints' own: the state roots their tensors_root
    assert list(program.state) == sorted(want) and program.state[-1] == "optim.lr_step"
    assert trace.state_root == checkpoint_commitment(checkpoints[step])[3]
    assert trace.next_state_root == checkpoint_commitment(checkpoints[step + 1])[3]
    assert trace.next_state_roots[-1] == TensorTree(torch.tensor(step + 1, dtype=torch.int64)).root  # two words


def test_trace_twoBuilds_identical(small, trace2):
    manifest, shard, checkpoints = small
    again = build_trace(manifest, shard, checkpoints[2])
    assert again.roots == trace2.roots and again.root() == trace2.root()
    assert again.program_root == trace2.program_root == _program(manifest, checkpoints[2]).root()
    assert (again.state_root, again.next_state_root, again.batch_roots) == (
        trace2.state_root, trace2.next_state_root, trace2.batch_roots)
    assert first_divergence(again, trace2) is None


@pytest.mark.parametrize("label", ["blocks.0.attention output", "blocks.0.softmax", "blocks.0.ln1 forward",
                                   "blocks.0.softmax row sums"])
def test_faultyAttentionSoftmaxLayerNorm_isTheFirstDivergence(small, trace2, label):
    manifest, shard, checkpoints = small
    program = _program(manifest, checkpoints[2])
    t = _entry(program, label)
    element = int(np.random.default_rng(28 + t).integers(int(np.prod(program.entries[t].shape))))

    def flip(u, out):
        if u != t:
            return out
        out = out.clone()
        out.view(-1).view(torch.int64 if out.dtype == torch.float64 else torch.int32)[element] ^= 1
        return out

    bad = build_trace(manifest, shard, checkpoints[2], edit=flip)
    assert bad.roots[:t] == trace2.roots[:t] and bad.roots[t] != trace2.roots[t]
    assert first_divergence(trace2, bad) == first_divergence(bad, trace2) == t
    # (the next state may still agree: one ulp can vanish in a later quantisation, which is
    # why the game bisects the trace, not the state)


#: (label, output) of one entry of each LM kind with a one-step
ON_CHAIN = [("blocks.0.ln1 forward", 0), ("blocks.0.ln2 backward", 0), ("blocks.0.softmax row sums", 0),
            ("blocks.0.softmax", 0), ("blocks.0.softmax backward", 0), ("blocks.0.gelu backward", 0),
            ("token embeddings", 0), ("embedding sum", 0), ("blocks.0.attn dropout", 0), ("pos_emb gradient", 0),
            ("blocks.0.attn.qkv.weight update", 1)]


def test_oneStepHarnesses_recomputeTraceElements(small, trace2, accounts, OneStepLayerNormHarness,
                                                  OneStepSoftmaxHarness, OneStepGeluHarness,
                                                  OneStepElementwiseHarness, OneStepExactSumHarness,
                                                  OneStepOptimHarness):
    manifest, _, checkpoints = small
    program = _program(manifest, checkpoints[2])
    entries = [_entry(program, label, output) for label, output in ON_CHAIN]
    recompute_on_chain(program, trace2, entries, (OneStepLayerNormHarness, OneStepSoftmaxHarness, OneStepGeluHarness,
                                                  OneStepElementwiseHarness, OneStepExactSumHarness,
                                                  OneStepOptimHarness), accounts[0], 2029)


def test_softmaxRowSums_cKernel_equalsTheEagerOps(small, trace2):
    """The row sums' C kernel (the engine's C softmax up to its sum) is built, in use, and
    gives the eager ops' bits on the step's own scores."""
    manifest, _, checkpoints = small
    program = _program(manifest, checkpoints[2])
    assert kinds_lm._sums_kernel() is not None
    t = _entry(program, "blocks.0.softmax row sums")
    scores = trace2.outputs[program.entries[t].inputs[0].index]
    assert torch.equal(trace2.outputs[t].view(-1).view(torch.int64), kinds_lm._eager_row_sums(scores).view(torch.int64))
