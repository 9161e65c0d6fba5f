"""A job's dispute binding (truetrain/trace/binding.py) and the named cheat that plays its
dispute to the end (truetrain/market/faulty_step.py), on real digits training:

* the data leaves are what the trace builder's batch roots give from the task's real
  checkpoints (round 1 too: another task key), each task padded to its width at its slot;
* the binding's program is the manifest's, its root the one every step's trace commits to;
* which jobs cannot bind, by reason;
* the flip cheat's states: honest up to its step, then the state its edited trace gives,
  then honest training from that wrong state; its edit reproduces that state exactly.
"""

from __future__ import annotations

import pytest

from truetrain.errors import TraceError
from truetrain.market.faulty_step import FlipCheat
from truetrain.trace.binding import Binding, check_binding, job_binding, job_data_leaves, unbound_reason
from truetrain.trace.builder import batch_root, build_trace
from truetrain.trace.game import task_width
from truetrain.trace.program import derive
from truetrain.training.checkpoint import checkpoint_commitment
from truetrain.training.merkle import merkle_root
from truetrain.training.task import task_start
from truetrain.training.trainer import train

STEPS, INTERVAL = 6, 2


@pytest.fixture(scope="module")
def job(digits3, make_manifest):
    shards, test = digits3
    manifest = make_manifest(shards, test, steps_per_task=STEPS, checkpoint_interval=INTERVAL, rounds=2,
                             batch_size=16)
    return manifest, shards


def test_dataLeaves_areTheTasksBatchRoots_atTheirSlots(job):
    manifest, shards = job
    leaves = job_data_leaves(manifest, lambda k: shards[k])
    width = task_width(STEPS)
    assert width == 8 and len(leaves) == 2 * 3 * width
    for round_index, index in ((0, 0), (0, 2), (1, 1)):
        start = task_start(manifest, None, index, round_index)
        states, _ = train(manifest, shards[index], start, STEPS, every=1)
        slot = round_index * 3 + index
        expected = [batch_root(manifest, shards[index], states[s]) for s in range(STEPS)]
        assert leaves[slot * width:slot * width + STEPS] == expected
        assert leaves[slot * width + STEPS:(slot + 1) * width] == [bytes(32)] * (width - STEPS)
    assert leaves[0:STEPS] != leaves[3 * width:3 * width + STEPS]  # round 1: another task key, other batches


def test_binding_isTheManifestsProgram_andEveryTraceCommitsToItsRoot(job):
    manifest, shards = job
    binding = job_binding(manifest, lambda k: shards[k])
    program = derive(manifest)
    assert binding == Binding(program.root(), len(program), INTERVAL, 3,
                              merkle_root(job_data_leaves(manifest, lambda k: shards[k])), tuple(program.layout()))
    start = task_start(manifest, None, 1, 0)
    assert build_trace(manifest, shards[1], start).program_root == binding.root
    check_binding(manifest, Binding.from_chain(binding.as_tuple()), lambda k: shards[k])
    forged = Binding(binding.root, binding.entries, binding.interval, binding.shards, bytes(32), binding.layout)
    with pytest.raises(TraceError, match="not its manifest's"):
        check_binding(manifest, forged, lambda k: shards[k])


def test_unboundJobs_sayWhy(digits1, make_manifest):
    shards, test = digits1
    assert unbound_reason(make_manifest(shards, test)) is None
    assert unbound_reason(make_manifest(shards, test, numeric_mode="stock")) == "a stock-mode job has no program"


def test_adamwWarmup_binds_itsRateInTheBatch_atTheRoundsSchedulePosition(digits3, make_manifest):
    """A schedule that changes the rate every step still binds one program: the rate is a
    batch tensor, so round 1's leaves carry the rates of its own schedule positions."""
    shards, test = digits3
    warm = make_manifest(shards, test, optimizer={"kind": "adamw", "lr": 0.01, "warmup_steps": 3},
                         steps_per_task=STEPS, checkpoint_interval=INTERVAL, rounds=2, batch_size=16)
    assert unbound_reason(warm) is None
    leaves = job_data_leaves(warm, lambda k: shards[k])
    program = derive(warm)
    assert "lr" in program.batch and all(a.attrs["lr"] == 0.0 for a in program.entries if a.kind == "adam")
    start = task_start(warm, None, 2, 1)  # round 1: schedule positions STEPS.. on
    states, _ = train(warm, shards[2], start, STEPS, every=1)
    slot = 1 * 3 + 2
    assert leaves[slot * 8:slot * 8 + STEPS] == [batch_root(warm, shards[2], states[s]) for s in range(STEPS)]
    # every step's trace commits to the one bound program
    assert {build_trace(warm, shards[2], states[s]).program_root for s in (0, 3)} == {program.root()}


def test_flipCheat_trainsFromItsEditedStep_andItsEditGivesThatState(job):
    manifest, shards = job
    start = task_start(manifest, None, 0, 0)
    honest, _ = train(manifest, shards[0], start, STEPS, every=1)
    cheat = FlipCheat(3)
    states = cheat.train(manifest, shards[0], start, STEPS)
    assert [s.step for s in states] == list(range(STEPS + 1))
    assert [s.hash() for s in states[:4]] == [s.hash() for s in honest[:4]]
    assert all(a.hash() != b.hash() for a, b in zip(states[4:], honest[4:]))
    # the edit of step 3 rebuilds the wrong state the cheater trained on from
    edit = cheat.edit_for(manifest, shards[0], states[3])
    assert edit is not None and cheat.edit_for(manifest, shards[0], states[2]) is None
    bad = build_trace(manifest, shards[0], states[3], edit=edit)
    assert bad.next_state_root == checkpoint_commitment(states[4])[3]
    # the cheat's training from after its step is honest training
    assert [s.hash() for s in cheat.train(manifest, shards[0], states[4], 2)] == \
        [s.hash() for s in train(manifest, shards[0], states[4], 2, every=1)[0]]
