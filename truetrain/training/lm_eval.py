"""What an LM job's user reads: held-out loss and bits per byte, and text sampled from a
checkpoint. Repro manifests evaluate on the repro ops, so every machine reports the same
figures and the same sampled bytes for the same checkpoint, prompt and seed."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..errors import DatasetError, TrainingError
from .gemm_check import engine_for
from .lm import TransformerLM
from .manifest import load_manifest
from .ops import ReproStep
from .repro_ops import F32, F64, first_argmax, log64, softmax_xent, xent_loss
from .rng import derive_key, uniform
from .text import decode_text_shard
from .trainer import as_checkpoint

#: Held-out windows evaluated at most (each seq_len + 1 bytes, not overlapping).
MAX_WINDOWS = 64


def _model(manifest, checkpoint, device) -> TransformerLM:
    if manifest.model.kind != "lm":
        raise TrainingError(f"job {manifest.name!r} trains a {manifest.model.kind}, not a language model")
    params = as_checkpoint(checkpoint).group("model")
    return TransformerLM(manifest.model, params).to(device or "cpu").eval()


def _logits(manifest, model: TransformerLM, ids: torch.Tensor, device) -> torch.Tensor:
    with torch.no_grad():
        if manifest.repro:
            return model(ids, ReproStep(engine_for(device), manifest.limbs, ids.numel()))
        return model(ids)


def heldout_metrics(manifest, checkpoint, text_shard: bytes, *, device=None,
                    max_windows: int = MAX_WINDOWS) -> dict:
    """``{"loss", "bits_per_byte", "bytes"}`` of a checkpoint on held-out text (a text
    shard's bytes): mean next-byte cross-entropy over up to ``max_windows`` windows."""
    manifest = load_manifest(manifest)
    model = _model(manifest, checkpoint, device)
    seq = manifest.model.seq_len
    tokens = torch.frombuffer(bytearray(decode_text_shard(text_shard)), dtype=torch.uint8).long()
    if len(tokens) < seq + 1:
        raise DatasetError(f"the held-out text has {len(tokens)} bytes, fewer than one sequence ({seq + 1})")
    starts = torch.arange(0, len(tokens) - seq, seq)[:max_windows]
    window = tokens[starts.unsqueeze(1) + torch.arange(seq + 1)].to(device or "cpu")
    ids, targets = window[:, :-1], window[:, 1:].reshape(-1)
    logits = _logits(manifest, model, ids, device).reshape(-1, manifest.model.vocab)
    if manifest.repro:
        _, sumexp, target = softmax_xent(logits, targets, targets.numel())
        loss = float(xent_loss(sumexp, target).mean())
    else:
        loss = float(F.cross_entropy(logits, targets))
    return {"loss": loss, "bits_per_byte": loss / math.log(2.0), "bytes": int(targets.numel())}


def sample(manifest, checkpoint, prompt: bytes, length: int, *, temperature: float = 0.0, seed: int = 0,
           device=None) -> bytes:
    """``length`` bytes continuing ``prompt``: greedy at temperature 0, else Gumbel-max
    sampling with noise from the keccak-keyed stream of ``seed`` (the project's log)."""
    manifest = load_manifest(manifest)
    if not prompt:
        raise TrainingError("the prompt is empty: give at least one byte to continue")
    if length < 0 or temperature < 0:
        raise TrainingError("length and temperature must be >= 0")
    model = _model(manifest, checkpoint, device)
    seq = manifest.model.seq_len
    out = list(prompt)
    for i in range(length):
        ids = torch.tensor([out[-seq:]], device=device or "cpu")
        logits = _logits(manifest, model, ids, device)[0, -1:]
        if temperature > 0:
            u = torch.from_numpy(uniform(derive_key(seed, "sample", i), manifest.model.vocab)).to(logits.device)
            gumbel = -log64(-log64(u.clamp(min=1e-300).to(F64)))
            logits = ((logits.to(F64) / temperature) + gumbel).to(F32)
        out.append(int(first_argmax(logits, 1)[0]))
    return bytes(out[len(prompt):])
