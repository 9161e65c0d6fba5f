"""What bench/repro.py measures: GEMM shapes, training-step cases, the numeric modes.

A *mode* is stock float32 PyTorch or repro on one GEMM engine: the float64 route (the
fallback) or the int8 kernel at 2 or 3 limbs (products under 2**25 multiply-adds on the
float64 route, as a CPU worker runs them), with its elementwise steps on large tensors
compiled (``fuse``, what a worker runs by default) or eager (``--no-gemm-fuse``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from truetrain.hashing import keccak256, to_hex32  # noqa: E402
from truetrain.training import build_manifest, decode_shard, encode_shard, prepare_dataset  # noqa: E402
from truetrain.training.intgemm import GemmEngine  # noqa: E402


@dataclass(frozen=True)
class Mode:
    label: str
    numeric_mode: str
    limbs: int = 2
    route: str = ""
    fuse: bool = False

    def engine(self) -> GemmEngine | None:
        """The engine as a worker gets it: products below the small-product size take the
        float64 route on a CPU (same bits), except on the forced float64 route."""
        return GemmEngine("cpu", self.route, fuse=self.fuse) if self.route else None


MODES = (Mode("stock fp32", "stock"), Mode("f64 route", "repro", 2, "float64"),
         Mode("int8 L=2", "repro", 2, "int8", True), Mode("int8 L=3", "repro", 3, "int8", True),
         Mode("L=2 eager", "repro", 2, "int8"))

#: (label, M, K, N): forward products of the demo models and transformer-sized products
#: (tokens = batch x sequence, d_model 256 and 512), with the backward shapes of each.
GEMMS = [
    ("MLP fc 64x64 -> 128", 64, 64, 128),
    ("CNN conv1 im2col", 64 * 16, 72, 16),
    ("d256 QKV 8x128 tok", 1024, 256, 768),
    ("d256 FFN up", 1024, 256, 1024),
    ("d256 FFN down", 1024, 1024, 256),
    ("d256 FFN down dW (K = tokens)", 256, 1024, 1024),
    ("attn QK^T seq 256 d64", 256, 64, 256),
    ("d512 FFN up 8x256 tok", 2048, 512, 2048),
    ("d512 FFN down", 2048, 2048, 512),
    ("d512 FFN up dW (K = tokens)", 2048, 2048, 512),
]


@dataclass(frozen=True)
class StepCase:
    label: str
    model: dict
    batch: int
    data: str  # "digits" or "synthetic:<features>:<classes>"
    steps: int


STEPS = [
    StepCase("digits MLP 64-128-10", {"kind": "mlp", "widths": [64, 128, 10]}, 64, "digits", 40),
    StepCase("digits CNN 1x8x8 [8,16] k3", {"kind": "cnn", "in_shape": [1, 8, 8], "channels": [8, 16],
                                             "kernel": 3, "classes": 10}, 64, "digits", 20),
    StepCase("FFN d256 (8x128 tok) 256-1024-256", {"kind": "mlp", "widths": [256, 1024, 256]}, 1024,
             "synthetic:256:256", 5),
    StepCase("FFN d512 (8x256 tok) 512-2048-512", {"kind": "mlp", "widths": [512, 2048, 512]}, 2048,
             "synthetic:512:512", 3),
]


def shard_bytes(data: str) -> bytes:
    if data == "digits":
        return prepare_dataset("digits", num_shards=1, seed=1)[0][0]
    _, features, classes = data.split(":")
    rng = np.random.default_rng(0)
    n = 4096
    return encode_shard(rng.standard_normal((n, int(features)), dtype=np.float32),
                        rng.integers(0, int(classes), n))


def manifest_for(case_model: dict, batch: int, shard: bytes, mode: Mode, steps: int, *,
                 optimizer: dict | None = None):
    ref = {"cid": "bench", "hash": to_hex32(keccak256(shard)), "samples": len(decode_shard(shard))}
    extra = {"limbs": mode.limbs} if mode.numeric_mode == "repro" else {}
    return build_manifest(name="bench", seed=1, model=case_model, numeric_mode=mode.numeric_mode,
                          optimizer=optimizer or {"kind": "sgd", "lr": 0.01, "momentum": 0.9},
                          batch_size=batch, steps_per_task=steps, checkpoint_interval=steps,
                          rounds=1, shards=[ref], test_set={"cid": "bench", "hash": ref["hash"]}, **extra)
