"""A decoder-only, byte-level transformer language model built from the op library.

Pre-LayerNorm blocks (causal multi-head self-attention, then a GELU MLP of width
``d_ff``), learned positions, and the output projection tied to the input embedding.
Bytes are the tokens (256 symbols): no tokenizer to download. The same module runs stock
(PyTorch's ops) or repro (``ops`` with a :class:`~.ops.ReproStep`), with the same
parameter names, so checkpoints move between modes.

Initial values are uniform with standard deviation 0.02 (0.02 / sqrt(2 * layers) for the
projections into the residual stream, as GPT-2 scales them), drawn from the keccak-keyed
PCG64 stream like the other models': plain arithmetic, the same on every machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..errors import ManifestError
from .ops import ReproStep, causal_attention, cross_entropy, dropout, embedding, gelu, layer_norm, linear
from .rng import derive_key, uniform

VOCAB = 256
LN_EPS = 1e-5


@dataclass(frozen=True)
class LMSpec:
    """A validated language-model description."""

    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    seq_len: int
    dropout: float = 0.0
    vocab: int = VOCAB

    kind: str = "lm"

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def rows_per_sample(self) -> int:
        """Rows one sample (a sequence) adds to a weight gradient's sums: its tokens."""
        return self.seq_len


def parse_lm_spec(raw, field: str = "model") -> LMSpec:
    """``{"kind": "lm", "d_model", "n_layers", "n_heads", "seq_len", "d_ff" (default
    4 * d_model), "dropout" (default 0)}``; the first problem raises ManifestError naming
    the field."""
    if not isinstance(raw, dict) or raw.get("kind") != "lm":
        raise ManifestError(f"{field}: expected an object with kind 'lm'")
    allowed = {"kind", "d_model", "n_layers", "n_heads", "d_ff", "seq_len", "dropout"}
    extra = sorted(set(raw) - allowed)
    if extra:
        raise ManifestError(f"{field}.{extra[0]}: unknown field")

    def num(key, lo, hi, default=None):
        value = raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ManifestError(f"{field}.{key}: expected an integer in [{lo}, {hi}], got {value!r}")
        return value

    d = num("d_model", 8, 4096)
    heads = num("n_heads", 1, 64)
    if d % heads:
        raise ManifestError(f"{field}.n_heads: {heads} does not divide d_model {d}")
    p = raw.get("dropout", 0)
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 0.9:
        raise ManifestError(f"{field}.dropout: expected a number in [0, 0.9], got {p!r}")
    return LMSpec(d, num("n_layers", 1, 96), heads, num("d_ff", 8, 16384, 4 * d), num("seq_len", 2, 8192),
                  float(p))


def lm_param_shapes(spec: LMSpec) -> dict[str, tuple[int, ...]]:
    d = spec.d_model
    shapes = {"tok_emb": (spec.vocab, d), "pos_emb": (spec.seq_len, d)}
    for i in range(spec.n_layers):
        p = f"blocks.{i}."
        shapes.update({p + "ln1.weight": (d,), p + "ln1.bias": (d,),
                       p + "attn.qkv.weight": (3 * d, d), p + "attn.qkv.bias": (3 * d,),
                       p + "attn.proj.weight": (d, d), p + "attn.proj.bias": (d,),
                       p + "ln2.weight": (d,), p + "ln2.bias": (d,),
                       p + "mlp.fc.weight": (spec.d_ff, d), p + "mlp.fc.bias": (spec.d_ff,),
                       p + "mlp.proj.weight": (d, spec.d_ff), p + "mlp.proj.bias": (d,)})
    shapes.update({"ln_f.weight": (d,), "ln_f.bias": (d,)})
    return shapes


def lm_init_params(spec: LMSpec, seed: int) -> dict[str, torch.Tensor]:
    """Initial float32 parameters (CPU), a pure function of (spec, seed)."""
    params = {}
    for name, shape in lm_param_shapes(spec).items():
        if name.endswith(".bias"):
            values = np.zeros(shape, dtype=np.float32)
        elif ".ln" in name or name.startswith("ln_f"):
            values = np.ones(shape, dtype=np.float32)
        else:
            std = 0.02 / math.sqrt(2 * spec.n_layers) if name.endswith("proj.weight") else 0.02
            u = uniform(derive_key(seed, "init/" + name), math.prod(shape))
            values = ((2.0 * u - 1.0) * (std * math.sqrt(3.0))).astype(np.float32).reshape(shape)
        params[name] = torch.from_numpy(values)
    return params


class _Affine(nn.Module):
    def __init__(self, out: int, inp: int | None = None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty((out, inp) if inp is not None else (out,)))
        self.bias = nn.Parameter(torch.empty(out))


class _Block(nn.Module):
    def __init__(self, spec: LMSpec):
        super().__init__()
        d = spec.d_model
        self.ln1, self.ln2 = _Affine(d), _Affine(d)
        self.attn = nn.Module()
        self.attn.qkv, self.attn.proj = _Affine(3 * d, d), _Affine(d, d)
        self.mlp = nn.Module()
        self.mlp.fc, self.mlp.proj = _Affine(spec.d_ff, d), _Affine(d, spec.d_ff)


class TransformerLM(nn.Module):
    """The model; ``forward(ids, step)`` gives logits (B, T, 256) for byte ids (B, T).

    With ``spec.dropout`` > 0, dropout acts on the embeddings and on each residual branch
    (after the attention and MLP projections) while ``dropout_key`` is set: the trainer
    sets it for every step (from the task's RNG key and the step number); left None, as
    in evaluation and sampling, nothing is dropped.
    """

    def __init__(self, spec: LMSpec, params: dict[str, torch.Tensor] | None = None):
        super().__init__()
        self.spec = spec
        self.tok_emb = nn.Parameter(torch.empty(spec.vocab, spec.d_model))
        self.pos_emb = nn.Parameter(torch.empty(spec.seq_len, spec.d_model))
        self.blocks = nn.ModuleList(_Block(spec) for _ in range(spec.n_layers))
        self.ln_f = _Affine(spec.d_model)
        self.dropout_key: bytes | None = None
        if params is not None:
            self.load_state_dict({k: v.clone() for k, v in params.items()})

    def forward(self, ids: torch.Tensor, step: ReproStep | None = None) -> torch.Tensor:
        x = lm_embed(self, ids, step)
        for i, blk in enumerate(self.blocks):
            x = lm_block(self, i, blk, x, step)
        return lm_head(self, x, step)

    def loss(self, ids: torch.Tensor, targets: torch.Tensor, step: ReproStep | None = None,
             total_rows: int | None = None, losses: list | None = None) -> torch.Tensor:
        """Mean next-byte cross-entropy (repro: the placeholder to call ``backward`` on)."""
        logits = self.forward(ids, step)
        return cross_entropy(logits.reshape(-1, self.spec.vocab), targets.reshape(-1), step, total_rows, losses)


# The model's pieces, shared by TransformerLM and a pipeline's stages (pipeline/split.py):
# ``m`` is any module with ``spec``, ``dropout_key`` and the parameters a piece reads
# (``tok_emb``, ``pos_emb``; ``ln_f`` and ``tok_emb`` for the head), under the same names.


def _drop(m: nn.Module, x: torch.Tensor, site: str, step: ReproStep | None) -> torch.Tensor:
    return dropout(x, m.spec.dropout, m.dropout_key, site, step.offset if step is not None else 0)


def lm_embed(m: nn.Module, ids: torch.Tensor, step: ReproStep | None) -> torch.Tensor:
    """Token plus position embeddings of byte ids (B, T), dropped at site ``emb``: (B, T, d)."""
    b, t = ids.shape
    positions = torch.arange(t, device=ids.device).expand(b, t)
    x = embedding(ids, m.tok_emb, step, "tok_emb") + embedding(positions, m.pos_emb, step, "pos_emb")
    return _drop(m, x, "emb", step)


def lm_block(m: nn.Module, i: int, blk: nn.Module, x: torch.Tensor, step: ReproStep | None) -> torch.Tensor:
    """Pre-LayerNorm block ``i`` (parameters ``blocks.{i}.*`` in ``blk``) on the residual stream (B, T, d)."""
    spec = m.spec
    b, t, _ = x.shape
    h, dh = spec.n_heads, spec.head_dim
    p = f"blocks.{i}."
    a = layer_norm(x, blk.ln1.weight, blk.ln1.bias, LN_EPS, step, p + "ln1")
    qkv = linear(a, blk.attn.qkv.weight, blk.attn.qkv.bias, step, p + "attn.qkv")
    q, k, v = qkv.view(b, t, 3, h, dh).permute(2, 0, 3, 1, 4).unbind(0)
    a = causal_attention(q.contiguous(), k.contiguous(), v.contiguous(), step)
    a = a.transpose(1, 2).reshape(b, t, spec.d_model)
    x = x + _drop(m, linear(a, blk.attn.proj.weight, blk.attn.proj.bias, step, p + "attn.proj"), p + "attn", step)
    a = layer_norm(x, blk.ln2.weight, blk.ln2.bias, LN_EPS, step, p + "ln2")
    a = gelu(linear(a, blk.mlp.fc.weight, blk.mlp.fc.bias, step, p + "mlp.fc"), step)
    return x + _drop(m, linear(a, blk.mlp.proj.weight, blk.mlp.proj.bias, step, p + "mlp.proj"), p + "mlp", step)


def lm_head(m: nn.Module, x: torch.Tensor, step: ReproStep | None) -> torch.Tensor:
    """The final LayerNorm and the output projection tied to ``tok_emb``: logits (B, T, vocab)."""
    x = layer_norm(x, m.ln_f.weight, m.ln_f.bias, LN_EPS, step, "ln_f")
    return linear(x, m.tok_emb, None, step, "head", weight_name="tok_emb")
