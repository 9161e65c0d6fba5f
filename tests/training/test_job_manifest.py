"""Manifest validation: every invalid field raises a ManifestError that names it."""

from __future__ import annotations

import copy
import json

import pytest

from truetrain.errors import ManifestError
from truetrain.training import build_manifest, load_manifest

H = "0x" + "ab" * 32
VALID = {
    "version": 1, "name": "digits", "seed": 7, "numeric_mode": "repro",
    "model": {"kind": "mlp", "widths": [64, 128, 10]},
    "optimizer": {"kind": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 0.0001},
    "batch_size": 64, "steps_per_task": 100, "checkpoint_interval": 20, "rounds": 5,
    "shards": [{"cid": "bafyA", "hash": H, "samples": 479},
               {"cid": "bafyB", "hash": H, "samples": 479}],
    "test_set": {"cid": "bafyT", "hash": H},
}


def _with(path, value):
    raw = copy.deepcopy(VALID)
    *head, last = path
    node = raw
    for key in head:
        node = node[key]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return raw


_DELETE = object()

CASES = [
    (("version",), 2, "version"),
    (("version",), _DELETE, "version: missing"),
    (("name",), "", "name"),
    (("seed",), -1, "seed"),
    (("seed",), 2**64, "seed"),
    (("seed",), "7", "seed"),
    (("seed",), True, "seed"),
    (("numeric_mode",), "fast", "numeric_mode"),
    (("limbs",), 4, "limbs: expected one of 2, 3"),
    (("limbs",), 1, "limbs"),
    (("limbs",), "2", "limbs"),
    (("limbs",), True, "limbs"),
    (("limbs",), 2.0, "limbs"),
    (("model",), [], "model"),
    (("model", "kind"), "rnn", "model.kind"),
    (("model", "widths"), [64], "model.widths"),
    (("model", "widths"), [64, 0, 10], "model.widths[1]"),
    (("model", "depth"), 3, "model.depth"),
    (("optimizer", "kind"), "rmsprop", "optimizer.kind"),
    (("optimizer", "lr"), 0, "optimizer.lr"),
    (("optimizer", "lr"), float("nan"), "optimizer.lr"),
    (("optimizer", "momentum"), 1.0, "optimizer.momentum"),
    (("optimizer", "weight_decay"), -0.1, "optimizer.weight_decay"),
    (("optimizer", "nesterov"), True, "optimizer.nesterov"),
    (("batch_size",), 0, "batch_size"),
    (("batch_size",), 6.5, "batch_size"),
    (("steps_per_task",), 0, "steps_per_task"),
    (("checkpoint_interval",), 30, "checkpoint_interval"),
    (("checkpoint_interval",), 0, "checkpoint_interval"),
    (("rounds",), 0, "rounds"),
    (("shards",), [], "shards"),
    (("shards", 1, "hash"), "0x1234", "shards[1].hash"),
    (("shards", 1, "hash"), "0x" + "AB" * 32, "shards[1].hash"),
    (("shards", 0, "cid"), "", "shards[0].cid"),
    (("shards", 0, "samples"), 0, "shards[0].samples"),
    (("shards", 0, "samples"), _DELETE, "shards[0].samples: missing"),
    (("test_set",), _DELETE, "test_set: missing"),
    (("test_set", "hash"), 5, "test_set.hash"),
    (("initial_checkpoint",), {"cid": "bafyC"}, "initial_checkpoint.hash"),
    (("extra",), 1, "extra: unknown field"),
]


@pytest.mark.parametrize("path,value,field", CASES,
                         ids=[f"{'.'.join(map(str, c[0]))}={c[1]!r}"[:40] for c in CASES])
def test_validate_invalidField_namesField(path, value, field):
    with pytest.raises(ManifestError) as err:
        load_manifest(_with(path, value))
    assert str(err.value).startswith(field), str(err.value)


@pytest.mark.parametrize("model,field", [
    ({"kind": "cnn", "in_shape": [1, 8], "channels": [8], "kernel": 3, "classes": 10},
     "model.in_shape"),
    ({"kind": "cnn", "in_shape": [1, 8, 8], "channels": [8], "kernel": 2, "classes": 10},
     "model.kernel"),
    ({"kind": "cnn", "in_shape": [1, 6, 6], "channels": [8, 8], "kernel": 3, "classes": 10},
     "model.in_shape"),
    ({"kind": "cnn", "in_shape": [1, 8, 8], "channels": [8], "kernel": 3, "classes": 1},
     "model.classes"),
])
def test_validate_invalidCnn_namesField(model, field):
    with pytest.raises(ManifestError, match="^" + field.replace(".", r"\.")):
        load_manifest(_with(("model",), model))


@pytest.mark.parametrize("opt,field", [
    ({"kind": "adam", "lr": 0.001, "betas": [0.9]}, "optimizer.betas"),
    ({"kind": "adam", "lr": 0.001, "betas": [0.9, 1.0]}, r"optimizer.betas\[1\]"),
    ({"kind": "adam", "lr": 0.001, "eps": 0}, "optimizer.eps"),
])
def test_validate_invalidAdam_namesField(opt, field):
    with pytest.raises(ManifestError, match="^" + field):
        load_manifest(_with(("optimizer",), opt))


def test_load_valid_typedFieldsAndCanonicalHash():
    m = load_manifest(json.dumps(VALID, indent=2))
    assert m.seed == 7 and m.repro and m.model.fc_widths == (64, 128, 10)
    assert m.optimizer.momentum == 0.9 and m.shards[1].samples == 479
    assert m.test_set.hash == bytes.fromhex("ab" * 32) and m.initial_checkpoint is None
    again = load_manifest(json.dumps(dict(reversed(list(VALID.items())))).encode())
    assert again.to_bytes() == m.to_bytes() and again.hash() == m.hash()


def test_limbs_defaultTwo_buildWritesIt_stockRefusesIt():
    assert load_manifest(VALID).limbs == 2
    assert load_manifest(dict(VALID, limbs=3)).limbs == 3
    built = build_manifest(**{k: VALID[k] for k in (
        "name", "seed", "model", "optimizer", "batch_size", "steps_per_task",
        "checkpoint_interval", "rounds", "shards", "test_set")})
    assert built.raw["limbs"] == 2 and built.limbs == 2
    with pytest.raises(ManifestError, match="^limbs: only a repro-mode manifest names limbs"):
        load_manifest(dict(VALID, numeric_mode="stock", limbs=2))
    # 3 limbs: int64 holds sums over fewer than 2**22 rows (batch x feature map)
    cnn = {"kind": "cnn", "in_shape": [1, 32, 32], "channels": [4], "kernel": 3, "classes": 10}
    assert load_manifest(dict(VALID, model=cnn, batch_size=4095, limbs=3)).limbs == 3
    assert load_manifest(dict(VALID, model=cnn, batch_size=4096, limbs=2)).limbs == 2
    with pytest.raises(ManifestError, match="^batch_size: 4096 gives sums over 4194304 rows, too many "
                                            "for exact 3-limb products"):
        load_manifest(dict(VALID, model=cnn, batch_size=4096, limbs=3))


def test_load_notJson_raises():
    with pytest.raises(ManifestError, match="JSON"):
        load_manifest("{nope")


def test_build_manifest_adamCnnStock_valid():
    m = build_manifest(
        name="cnn", seed=1, numeric_mode="stock",
        model={"kind": "cnn", "in_shape": [1, 8, 8], "channels": [8, 16], "kernel": 3,
               "classes": 10},
        optimizer={"kind": "adam", "lr": 0.001, "betas": [0.9, 0.99], "eps": 1e-7},
        batch_size=32, steps_per_task=10, checkpoint_interval=5, rounds=2,
        shards=VALID["shards"], test_set=VALID["test_set"],
        initial_checkpoint={"cid": "bafyC", "hash": H})
    assert m.model.features == 64 and m.model.fc_widths == (64, 10)
    assert m.optimizer.betas == (0.9, 0.99) and not m.repro
    assert m.initial_checkpoint.cid == "bafyC"


def test_schemaFile_listsTheValidatorsFields():
    from pathlib import Path

    import truetrain.training.manifest as mod

    schema = json.loads((Path(mod.__file__).parent / "manifest.schema.json").read_text())
    assert set(schema["properties"]) == mod._TOP
    assert set(schema["required"]) == mod._TOP - mod._OPTIONAL_TOP
