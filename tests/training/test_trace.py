"""A step's program and trace (truetrain/trace/): the digits MLP's program derived from its
manifest, evaluated by the engine one application at a time, is the training step bit for
bit; two builds agree; a deliberately faulty application is the first entry two traces
differ on; and the on-chain one-step verifiers recompute the trace's elements from the
inputs and attributes the program names (the harnesses on Anvil, a few eth_calls)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from eth_abi import decode

from truetrain.errors import TraceError
from truetrain.hashing import keccak256
from truetrain.trace import APP, ENTRY_TYPES, KINDS, STATE, build_trace, derive, first_divergence, updated_state
from truetrain.numerics.tensor_merkle import TensorTree
from truetrain.training import tensor_roots as roots
from truetrain.training.checkpoint import checkpoint_commitment
from truetrain.training.task import task_start
from truetrain.training.trainer import train

from tests.training.conftest import assert_follows_kinds, recompute_on_chain

STEPS = 4  # the trace of step 3 reads a momentum buffer three updates old


@pytest.fixture(scope="module")
def job(digits1, make_manifest):
    """(manifest, shard, checkpoints 0..STEPS of the normal training path)."""
    shards, test = digits1
    manifest = make_manifest(shards, test, batch_size=32, steps_per_task=STEPS, checkpoint_interval=1)
    checkpoints, _ = train(manifest, shards[0], task_start(manifest, None, 0, 0), STEPS, every=1)
    return manifest, shards[0], checkpoints


@pytest.fixture(scope="module")
def program(job):
    return derive(job[0])


@pytest.fixture(scope="module")
def trace3(job):
    manifest, shard, checkpoints = job
    return build_trace(manifest, shard, checkpoints[3], keep=True)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32)


def test_program_mlp_kindsInputsAndEncoding(program):
    kinds = [a.kind for a in program.entries]
    assert kinds == ["linear", "relu", "relu", "linear", "xent_partial_sum", "xent_loss", "xent_grad",
                     "row_scales", "permute", "permute", "weight_grad_transposed", "column_sum", "permute", "linear",
                     "apply_mask", "row_scales", "permute", "permute", "weight_grad_transposed", "column_sum"] + ["sgd"] * 8
    # a checkpoint's tensors in its encoding's order (sorted by name): the state root is its tensors_root
    assert program.state == ("model.fc.0.bias", "model.fc.0.weight", "model.fc.1.bias", "model.fc.1.weight",
                             "optim.momentum.fc.0.bias", "optim.momentum.fc.0.weight",
                             "optim.momentum.fc.1.bias", "optim.momentum.fc.1.weight")
    for t, app in enumerate(program.entries):  # inputs read only earlier entries
        assert all(r.index < t for r in app.inputs if r.source == APP)
    assert program.updates == {1: 20, 5: 21, 0: 22, 4: 23, 3: 24, 7: 25, 2: 26, 6: 27}
    wg = program.entries[10]  # fc.1's weight gradient: (gᵀ, aᵀ, row scales of a)
    assert [r.index for r in wg.inputs] == [8, 9, 7] and program.entries[7].inputs == (program.entries[9].inputs[0],)
    fc1 = program.entries[3]  # fc.1 forward: linear(relu output, W1, b1), 2 limbs, a bias
    kind, output, words, shape, inputs, attrs, dims = decode(ENTRY_TYPES, fc1.encode())
    assert (kind, output, words, shape) == (keccak256(b"linear"), 0, 1, (32, 10))
    assert inputs == (1, STATE << 32 | 3, STATE << 32 | 2) and attrs == (2, 1)
    assert dims == (32, 128, 10, 128, 1, 10)  # relu output (32, 128), W1 (10, 128), b1 a vector of 10
    _, _, _, _, _, attrs, _ = decode(ENTRY_TYPES, program.entries[8].encode())
    assert attrs == (2, 32, 10, 2, 1, 0)  # permute: shape (32, 10), perm (1, 0), each length first
    assert program.entries[4].words == 2  # the cross-entropy's partial sums are float64
    assert decode(ENTRY_TYPES, program.entries[5].encode())[6] == (32, 10, 32, 2, 1, 32)  # logits, sums (f64), labels
    assert program.layout() == [23, 21, 27, 25, 24, 22, 28, 26]  # 1 + the sgd entry giving each state tensor


def test_program_mlp_followsTheKindTable(program):
    assert_follows_kinds(program)
    wg = program.entries[10]
    assert wg.kind == "weight_grad_transposed" and wg.dims == (10, 32, 128, 32, 1, 32)  # gᵀ, aᵀ, the scales


def test_derive_refusesWhatItCannotDerive(digits1, make_manifest):
    shards, test = digits1
    with pytest.raises(TraceError, match="only a repro job"):
        derive(make_manifest(shards, test, numeric_mode="stock"))


@pytest.mark.parametrize("step", [0, 3])
def test_trace_updates_equalTheTrainingStep_bitForBit(job, program, step):
    manifest, shard, checkpoints = job
    trace = build_trace(manifest, shard, checkpoints[step], keep=set(program.updates.values()))
    after = updated_state(program, trace)
    assert sorted(after) == sorted(checkpoints[step + 1].tensors)
    for name, value in after.items():
        assert torch.equal(_bits(value), _bits(checkpoints[step + 1].tensors[name])), name
    # level 1's commitments are the checkpoints' own: the state roots their tensors_root
    assert trace.state_root == checkpoint_commitment(checkpoints[step])[3]
    assert trace.next_state_root == checkpoint_commitment(checkpoints[step + 1])[3]
    assert trace.state_roots == [TensorTree(checkpoints[step].tensors[n]).root for n in program.state]


def test_trace_twoBuilds_identical(job, program, trace3):
    manifest, shard, checkpoints = job
    again = build_trace(manifest, shard, checkpoints[3])
    assert again.roots == trace3.roots and len(again.roots) == len(program)
    assert again.root() == trace3.root() and again.program_root == trace3.program_root == derive(manifest).root()
    assert (again.state_root, again.next_state_root, again.batch_roots) == (
        trace3.state_root, trace3.next_state_root, trace3.batch_roots)
    assert first_divergence(again, trace3) is None
    other = build_trace(manifest, shard, checkpoints[2])
    with pytest.raises(TraceError, match="different programs or steps"):
        first_divergence(other, trace3)


def test_faultyApplication_isTheFirstDivergence(job, program, trace3):
    manifest, shard, checkpoints = job
    rng = np.random.default_rng(28)
    picks = sorted({1, 13, 25} | {int(t) for t in rng.integers(0, len(program), 2)})
    for t in picks:
        element = int(rng.integers(int(np.prod(program.entries[t].shape))))

        def flip(u, out, t=t, element=element):
            if u != t:
                return out
            out = out.clone()
            flat = out.view(-1).view(torch.int64 if out.dtype == torch.float64 else torch.int32)
            flat[element] ^= 1  # the lowest bit of one element
            return out

        bad = build_trace(manifest, shard, checkpoints[3], edit=flip)
        assert bad.roots[:t] == trace3.roots[:t] and bad.roots[t] != trace3.roots[t], t
        assert first_divergence(trace3, bad) == first_divergence(bad, trace3) == t
        assert bad.state_root == trace3.state_root
        if t in program.updates.values():
            assert bad.next_state_root != trace3.next_state_root


#: one entry of each kind with a one-step in the MLP's program (fc.1's input gradient is a
#: linear over a transposed weight)
ON_CHAIN = {0: "fc.0 forward", 2: "relu mask", 4: "partial sums", 5: "loss", 6: "xent gradient",
            8: "transposed gradient", 11: "bias gradient", 13: "input gradient", 14: "relu backward",
            25: "momentum buffer"}


def test_oneStepHarnesses_recomputeTraceElements(program, trace3, accounts, OneStepGemmHarness,
                                                  OneStepElementwiseHarness, OneStepExactSumHarness,
                                                  OneStepXentHarness, OneStepOptimHarness):
    recompute_on_chain(program, trace3, list(ON_CHAIN), (OneStepGemmHarness, OneStepElementwiseHarness,
                                                          OneStepExactSumHarness, OneStepXentHarness,
                                                          OneStepOptimHarness), accounts[0], 2028)


def test_tensorRoot_cKernel_equalsTheTree():
    gen = torch.Generator().manual_seed(5)
    assert roots._kernel() is not None  # the C kernel is built and in use
    for n, dtype in ((1, torch.float32), (64, torch.float32), (65, torch.float64), (4097, torch.float32),
                     (64 * 300 + 5, torch.float64)):
        t = torch.randn(n, generator=gen, dtype=dtype)
        t[n // 2] = float("nan")
        assert roots.tensor_root(t) == TensorTree(t).root, (n, dtype)


def test_tensorRoot_cKernel_parallelLevels_equalTheTree():
    """16,384 leaves and more: the levels the kernel hashes on several threads (each level
    written apart from the one it reads: in place, the threads raced, a root in two of three
    calls wrong) give the tree's root on every call."""
    t = torch.randn(1024, 1024, generator=torch.Generator().manual_seed(6))
    want = TensorTree(t).root
    assert all(roots.tensor_root(t) == want for _ in range(8))
