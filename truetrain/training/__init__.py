"""Training: model registry, datasets and sharding, the reproducible trainer, checkpoint
hashing, Merkle commitments, replay and aggregation.

The names below are the public API the daemons call; see docs/manifest.md and
docs/checkpoint-format.md for the formats.
"""

from .aggregate import Contribution, aggregate, global_checkpoint
from .checkpoint import (Checkpoint, checkpoint_hash, decode_checkpoint, encode_checkpoint,
                         load_checkpoint)
from .datasets import (Dataset, Shard, decode_shard, encode_shard, load_dataset,
                       prepare_dataset, publish_dataset, shard_arrays, split_test)
from .manifest import DataRef, Manifest, build_manifest, load_manifest, validate_manifest
from .merkle import merkle_proof, merkle_root, verify_proof
from .models import ModelSpec, init_params, parse_model_spec
from .task import (TaskResult, evaluate, initial_model, predict, run_task, task_rng_key,
                   task_start, needs_warm_up, warm_up)
from .trainer import replay, start_checkpoint, train

__all__ = [
    "Checkpoint", "Contribution", "DataRef", "Dataset", "Manifest", "ModelSpec", "Shard",
    "TaskResult", "aggregate", "build_manifest", "checkpoint_hash", "decode_checkpoint",
    "decode_shard", "encode_checkpoint", "encode_shard", "evaluate", "global_checkpoint",
    "init_params", "initial_model", "load_checkpoint", "load_dataset", "load_manifest",
    "merkle_proof", "merkle_root", "parse_model_spec", "predict", "prepare_dataset",
    "publish_dataset", "replay", "run_task", "shard_arrays", "split_test",
    "start_checkpoint", "task_rng_key", "task_start", "train", "validate_manifest",
    "verify_proof", "needs_warm_up", "warm_up",
]
