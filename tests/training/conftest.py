"""Shared fixtures for the training tests: digits shards and a manifest builder."""

from __future__ import annotations

import pytest

from truetrain.hashing import keccak256, to_hex32
from truetrain.training import build_manifest, decode_shard, intgemm_fused, prepare_dataset

SEED = 11


def data_ref(data: bytes) -> dict:
    """A manifest entry for bytes (the CID is a stand-in: no storage here); a text shard's
    samples are its bytes."""
    from truetrain.training.text import TEXT_MAGIC

    samples = len(data) - len(TEXT_MAGIC) if data.startswith(TEXT_MAGIC) else len(decode_shard(data))
    return {"cid": "bafk" + keccak256(data).hex()[:24], "hash": to_hex32(keccak256(data)), "samples": samples}


@pytest.fixture
def fused_kernels_at_every_size(request):
    """Fused engines run their compiled kernels on the tests' small tensors too (a worker
    runs small tensors eager: same bits, less fixed cost). Used by the engine's own tests;
    the other training tests train as a worker does, compiled only on large tensors."""
    if request.node.get_closest_marker("fuse_threshold"):
        yield
        return
    with intgemm_fused.every_size():
        yield


@pytest.fixture(scope="session")
def digits1():
    """(shards, test bytes): digits, one shard."""
    return prepare_dataset("digits", num_shards=1, seed=SEED)


@pytest.fixture(scope="session")
def digits3():
    """(shards, test bytes): digits, three shards."""
    return prepare_dataset("digits", num_shards=3, seed=SEED)


@pytest.fixture(scope="session")
def make_manifest():
    def make(shards, test, **over):
        fields = dict(name="digits-test", seed=SEED, numeric_mode="repro",
                      model={"kind": "mlp", "widths": [64, 128, 10]},
                      optimizer={"kind": "sgd", "lr": 0.1, "momentum": 0.9},
                      batch_size=64, steps_per_task=40, checkpoint_interval=10, rounds=1,
                      shards=[data_ref(s) for s in shards],
                      test_set={k: v for k, v in data_ref(test).items()})
        fields.update(over)
        return build_manifest(**fields)
    return make


def assert_follows_kinds(program) -> None:
    """Every entry of ``program`` names a kind of the one table (truetrain/trace/kind_names.py)
    that a kind contract of StepGame's deployment registers, with an input count the kind
    takes, its attribute names in its order, one of its outputs and its words (float64 or
    int64: two); its descriptors are two words an input; it reads earlier entries only."""
    from truetrain.trace import APP
    from truetrain.trace.kind_names import CONTRACTS, KINDS

    for t, app in enumerate(program.entries):
        spec = KINDS[app.kind]
        low, high = spec.arity()
        assert app.kind in CONTRACTS[spec.contract], (t, app.label)
        assert low <= len(app.inputs) <= high, (t, app.label, len(app.inputs), spec.inputs)
        assert tuple(n for n, _ in app.attributes) == spec.attributes, (t, app.label)
        assert 0 <= app.output < len(spec.outputs), (t, app.label)
        assert app.words == spec.words and len(app.dims) == 2 * len(app.inputs), (t, app.label)
        assert all(r.index < t for r in app.inputs if r.source == APP), (t, app.label)
        app.encode()  # the encoder's own check of the same


def recompute_on_chain(program, trace, entries: list[int], containers, account, seed: int) -> None:
    """One element (seeded) of each of ``entries`` recomputed by its kind's one-step harness
    (deployed from ``containers`` as first needed) equals the trace's (truetrain/trace)."""
    import numpy as np

    from truetrain.trace import KINDS
    from truetrain.trace.openings import one_step_call

    by_name, harnesses, rng = {c._name: c for c in containers}, {}, np.random.default_rng(seed)
    for t in entries:
        app = program.entries[t]
        assert app.kind in KINDS
        element = int(rng.integers(int(np.prod(app.shape))))
        call = one_step_call(program, trace, t, element)
        if call.contract not in harnesses:
            harnesses[call.contract] = by_name[call.contract].deploy({"from": account})
        got = getattr(harnesses[call.contract], call.function).call(*call.args)
        assert call.result(got) == call.want, (t, app.label, element)
