"""The job manifest: validation (by hand, naming the bad field), building, canonical bytes.

The schema is documented in docs/manifest.md. Unknown fields are refused, so two
manifests that mean the same thing have the same canonical bytes and hash.
"""

from __future__ import annotations

import dataclasses

import json
import math
import re
from dataclasses import dataclass

from ..errors import ManifestError
from ..hashing import keccak256
from .intgemm import DEFAULT_LIMBS, LIMB_COUNTS, max_contraction
from .models import ModelSpec, parse_model_spec
from .optim import OptimizerSpec

MANIFEST_VERSION = 1
_HEX32 = re.compile(r"^0x[0-9a-f]{64}$")
_TOP = {"version", "name", "seed", "numeric_mode", "limbs", "model", "optimizer",
        "batch_size", "steps_per_task", "checkpoint_interval", "rounds", "shards", "test_set",
        "initial_checkpoint", "outer", "pipeline"}
_OPTIONAL_TOP = {"initial_checkpoint", "limbs", "outer", "pipeline"}


#: The market stores a task's checkpoint count in 16 bits (JobParams.checkpointLeaves).
MAX_CHECKPOINT_LEAVES = 65_535

@dataclass(frozen=True)
class DataRef:
    """Content stored on IPFS: its CID, keccak256 of its bytes, and (for data) samples."""

    cid: str
    hash: bytes
    samples: int | None = None


@dataclass(frozen=True)
class OuterSpec:
    """DiLoCo's outer optimizer: SGD with (Nesterov) momentum on the round's pseudo-gradient
    (global minus the weighted mean of the workers' models). lr 1, momentum 0 is FedAvg."""

    lr: float = 0.7
    momentum: float = 0.9
    nesterov: bool = True


@dataclass(frozen=True)
class PipelineSpec:
    """A pipelined job (docs/pipeline.md): the model cut by layers into ``stages`` stages
    starting at the units ``split`` (None: balanced by parameter count), each step's batch
    run as ``micro_batches`` micro-batches."""

    stages: int
    split: tuple[int, ...] | None
    micro_batches: int

    def plan(self, spec):
        """The :class:`~.pipeline.split.StagePlan` this spec declares for model ``spec``."""
        from .pipeline.split import split_at, split_by_params  # the pipeline package imports this module

        return split_by_params(spec, self.stages) if self.split is None else split_at(spec, self.split)


@dataclass(frozen=True)
class Manifest:
    """A validated job manifest. ``raw`` is the validated JSON object."""

    raw: dict
    name: str
    seed: int
    numeric_mode: str
    limbs: int
    model: ModelSpec
    optimizer: OptimizerSpec
    batch_size: int
    steps_per_task: int
    checkpoint_interval: int
    rounds: int
    shards: tuple[DataRef, ...]
    test_set: DataRef
    initial_checkpoint: DataRef | None
    outer: OuterSpec | None = None
    pipeline: PipelineSpec | None = None

    @property
    def repro(self) -> bool:
        return self.numeric_mode == "repro"

    @property
    def checkpoint_leaves(self) -> int:
        """Checkpoints a training task commits to: steps 0, I, 2I, ..., K."""
        return self.steps_per_task // self.checkpoint_interval + 1

    def to_bytes(self) -> bytes:
        """Canonical JSON: sorted keys, no spaces, UTF-8."""
        return canonical_json(self.raw)

    def hash(self) -> bytes:
        return keccak256(self.to_bytes())


def canonical_json(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode()


def _int(raw, field: str, lo: int, hi: int | None = None) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < lo or (hi is not None
                                                                         and raw > hi):
        bound = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ManifestError(f"{field}: expected an integer {bound}, got {raw!r}")
    return raw


def _num(raw, field: str, lo: float, hi: float | None = None, *, lo_open=False,
         hi_open=True) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
        raise ManifestError(f"{field}: expected a finite number, got {raw!r}")
    if raw < lo or (lo_open and raw == lo) or (hi is not None and (raw > hi or (
            hi_open and raw == hi))):
        lb = "(" if lo_open else "["
        rb = ")" if hi_open else "]"
        raise ManifestError(f"{field}: expected a number in {lb}{lo}, {hi or 'inf'}{rb}, "
                            f"got {raw!r}")
    return float(raw)


def _obj(raw, field: str, allowed: set[str], required: set[str]) -> dict:
    if not isinstance(raw, dict):
        raise ManifestError(f"{field}: expected an object")
    for key in sorted(raw):
        if key not in allowed:
            raise ManifestError(f"{field}.{key}: unknown field" if field else
                                f"{key}: unknown field")
    for key in sorted(required):
        if key not in raw:
            raise ManifestError(f"{field}.{key}: missing" if field else f"{key}: missing")
    return raw


def _ref(raw, field: str, with_samples: bool) -> DataRef:
    keys = {"cid", "hash", "samples"}
    _obj(raw, field, keys, {"cid", "hash", "samples"} if with_samples else {"cid", "hash"})
    cid = raw["cid"]
    if not isinstance(cid, str) or not cid or len(cid) > 200 or not cid.isascii():
        raise ManifestError(f"{field}.cid: expected a non-empty ASCII CID string")
    digest = raw["hash"]
    if not isinstance(digest, str) or not _HEX32.match(digest):
        raise ManifestError(f"{field}.hash: expected 0x and 64 lowercase hex digits")
    samples = _int(raw["samples"], f"{field}.samples", 1) if "samples" in raw else None
    return DataRef(cid, bytes.fromhex(digest[2:]), samples)


def _betas(raw: dict, default: tuple[float, float]) -> tuple[float, float]:
    betas = raw.get("betas", list(default))
    if not isinstance(betas, list) or len(betas) != 2:
        raise ManifestError("optimizer.betas: expected a list of two numbers")
    return tuple(_num(v, f"optimizer.betas[{i}]", 0, 1) for i, v in enumerate(betas))


def _optimizer(raw) -> OptimizerSpec:
    if not isinstance(raw, dict):
        raise ManifestError("optimizer: expected an object")
    kind = raw.get("kind")
    if kind == "sgd":
        _obj(raw, "optimizer", {"kind", "lr", "momentum", "weight_decay"}, {"lr"})
        return OptimizerSpec(
            "sgd", _num(raw["lr"], "optimizer.lr", 0, lo_open=True),
            momentum=_num(raw.get("momentum", 0.0), "optimizer.momentum", 0, 1),
            weight_decay=_num(raw.get("weight_decay", 0.0), "optimizer.weight_decay", 0))
    if kind == "adam":
        _obj(raw, "optimizer", {"kind", "lr", "betas", "eps", "weight_decay"}, {"lr"})
        return OptimizerSpec(
            "adam", _num(raw["lr"], "optimizer.lr", 0, lo_open=True), betas=_betas(raw, (0.9, 0.999)),
            eps=_num(raw.get("eps", 1e-8), "optimizer.eps", 0, lo_open=True),
            weight_decay=_num(raw.get("weight_decay", 0.0), "optimizer.weight_decay", 0))
    if kind == "adamw":
        _obj(raw, "optimizer", {"kind", "lr", "betas", "eps", "weight_decay", "warmup_steps",
                                "total_steps", "min_lr_ratio", "clip_norm"}, {"lr"})
        return OptimizerSpec(
            "adamw", _num(raw["lr"], "optimizer.lr", 0, lo_open=True), betas=_betas(raw, (0.9, 0.95)),
            eps=_num(raw.get("eps", 1e-8), "optimizer.eps", 0, lo_open=True),
            weight_decay=_num(raw.get("weight_decay", 0.1), "optimizer.weight_decay", 0, 1),
            warmup_steps=_int(raw.get("warmup_steps", 0), "optimizer.warmup_steps", 0),
            total_steps=_int(raw.get("total_steps", 0), "optimizer.total_steps", 0),
            min_lr_ratio=_num(raw.get("min_lr_ratio", 0.1), "optimizer.min_lr_ratio", 0, 1, hi_open=False),
            clip_norm=_num(raw.get("clip_norm", 1.0), "optimizer.clip_norm", 0))
    raise ManifestError(f"optimizer.kind: expected 'sgd', 'adam' or 'adamw', got {kind!r}")


def validate_manifest(raw) -> Manifest:
    """Check a manifest object field by field; the first problem raises ManifestError."""
    _obj(raw, "", _TOP, _TOP - _OPTIONAL_TOP)
    _int(raw["version"], "version", MANIFEST_VERSION, MANIFEST_VERSION)
    name = raw["name"]
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise ManifestError("name: expected a non-empty string of at most 200 characters")
    seed = _int(raw["seed"], "seed", 0, 2**64 - 1)
    mode = raw["numeric_mode"]
    if mode not in ("repro", "stock"):
        raise ManifestError(f"numeric_mode: expected 'repro' or 'stock', got {mode!r}")
    limbs = raw.get("limbs", DEFAULT_LIMBS)
    if isinstance(limbs, bool) or not isinstance(limbs, int) or limbs not in LIMB_COUNTS:
        raise ManifestError(f"limbs: expected one of {', '.join(map(str, LIMB_COUNTS))} (int8 "
                            f"limbs per GEMM operand in repro mode), got {limbs!r}")
    if mode != "repro" and "limbs" in raw:
        raise ManifestError("limbs: only a repro-mode manifest names limbs")
    model = parse_model_spec(raw["model"])
    optimizer = _optimizer(raw["optimizer"])
    batch = _int(raw["batch_size"], "batch_size", 1)
    if mode == "repro":
        rows = batch * model.rows_per_sample()
        if rows > max_contraction(limbs):
            raise ManifestError(f"batch_size: {batch} gives sums over {rows} rows, too many for "
                                f"exact {limbs}-limb products; use fewer limbs or a smaller batch")
    steps = _int(raw["steps_per_task"], "steps_per_task", 1)
    interval = _int(raw["checkpoint_interval"], "checkpoint_interval", 1)
    if steps % interval:
        raise ManifestError(f"checkpoint_interval: {interval} does not divide "
                            f"steps_per_task {steps}")
    if steps // interval + 1 > MAX_CHECKPOINT_LEAVES:
        raise ManifestError(f"checkpoint_interval: {steps // interval + 1} checkpoints per task, "
                            f"more than the {MAX_CHECKPOINT_LEAVES} a job can commit to on chain")
    rounds = _int(raw["rounds"], "rounds", 1)
    if optimizer.kind == "adamw":  # the schedule spans the job's inner steps unless told
        total = optimizer.total_steps or rounds * steps
        if optimizer.warmup_steps > total:
            raise ManifestError(f"optimizer.warmup_steps: {optimizer.warmup_steps} is more than the "
                                f"{total} inner steps the schedule spans")
        optimizer = dataclasses.replace(optimizer, total_steps=total)
    shards = raw["shards"]
    if not isinstance(shards, list) or not shards:
        raise ManifestError("shards: expected a non-empty list")
    refs = tuple(_ref(s, f"shards[{i}]", True) for i, s in enumerate(shards))
    test = _ref(raw["test_set"], "test_set", False)
    init = raw.get("initial_checkpoint")
    init_ref = None if init is None else _ref(init, "initial_checkpoint", False)
    return Manifest(raw, name, seed, mode, limbs, model, optimizer, batch, steps, interval, rounds,
                    refs, test, init_ref, _outer(raw.get("outer")),
                    None if "pipeline" not in raw else _pipeline(raw["pipeline"], mode, model, batch))


def _pipeline(raw, mode: str, model, batch: int) -> PipelineSpec:
    """The ``pipeline`` field: repro mode, a model that splits (the LM or the MLP), 2 to
    (units) stages, valid split points, 1 to ``batch_size`` micro-batches."""
    from .pipeline.split import model_units  # the pipeline package imports this module

    _obj(raw, "pipeline", {"stages", "split", "micro_batches"}, {"stages", "split", "micro_batches"})
    if mode != "repro":
        raise ManifestError(f"pipeline: a pipelined job runs in repro mode, not {mode!r}")
    if model.kind not in ("lm", "mlp"):
        raise ManifestError(f"pipeline: a {model.kind} model does not split into stages (the LM and the MLP do)")
    units = model_units(model)
    stages = _int(raw["stages"], "pipeline.stages", 2, len(units))
    split = raw["split"]
    if split != "params":
        if not isinstance(split, list) or len(split) != stages or any(
                isinstance(u, bool) or not isinstance(u, int) for u in split):
            raise ManifestError(f"pipeline.split: expected \"params\" or a list of {stages} unit indices "
                                f"(each stage's first), got {split!r}")
        if split[0] != 0 or any(b <= a for a, b in zip(split, split[1:])) or split[-1] >= len(units):
            raise ManifestError(f"pipeline.split: expected 0 then strictly increasing unit indices below "
                                f"{len(units)} ({', '.join(units)}), got {split!r}")
    micro = _int(raw["micro_batches"], "pipeline.micro_batches", 1, batch)
    return PipelineSpec(stages, None if split == "params" else tuple(split), micro)


def _outer(raw) -> OuterSpec | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ManifestError("outer: expected an object")
    _obj(raw, "outer", {"lr", "momentum", "nesterov"}, set())
    nesterov = raw.get("nesterov", True)
    if not isinstance(nesterov, bool):
        raise ManifestError(f"outer.nesterov: expected true or false, got {nesterov!r}")
    return OuterSpec(_num(raw.get("lr", 0.7), "outer.lr", 0, 10, lo_open=True, hi_open=False),
                     _num(raw.get("momentum", 0.9), "outer.momentum", 0, 1), nesterov)


def load_manifest(source) -> Manifest:
    """A :class:`Manifest` from a dict, JSON text or JSON bytes."""
    if isinstance(source, Manifest):
        return source
    if isinstance(source, (bytes, bytearray, str)):
        try:
            source = json.loads(source)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ManifestError(f"manifest is not valid JSON: {exc}") from exc
    return validate_manifest(source)


def build_manifest(*, name: str, seed: int, model: dict, optimizer: dict, batch_size: int,
                   steps_per_task: int, checkpoint_interval: int, rounds: int,
                   shards: list[dict], test_set: dict, numeric_mode: str = "repro",
                   limbs: int = DEFAULT_LIMBS,
                   initial_checkpoint: dict | None = None, outer: dict | None = None,
                   pipeline: dict | None = None) -> Manifest:
    """Assemble and validate a manifest (``shards``/``test_set`` as from
    :func:`~truetrain.training.datasets.publish_dataset`); a repro manifest always names
    its ``limbs``, so equal settings give equal bytes."""
    raw = {"version": MANIFEST_VERSION, "name": name, "seed": seed,
           "numeric_mode": numeric_mode, "model": model, "optimizer": optimizer,
           "batch_size": batch_size, "steps_per_task": steps_per_task,
           "checkpoint_interval": checkpoint_interval, "rounds": rounds,
           "shards": shards, "test_set": test_set}
    if numeric_mode == "repro":
        raw["limbs"] = limbs
    if initial_checkpoint is not None:
        raw["initial_checkpoint"] = initial_checkpoint
    if outer is not None:
        raw["outer"] = outer
    if pipeline is not None:
        raw["pipeline"] = pipeline
    return validate_manifest(json.loads(canonical_json(raw)))
