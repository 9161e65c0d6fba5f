"""truetrain's byte-level LM as transformers' GPT-2 (``GPT2LMHeadModel``), and back.

The LM (``training/lm.py``) has GPT-2's shape: pre-LayerNorm blocks (eps 1e-5), learned
positions, one q/k/v projection split into q, k, v and then into heads, attention scaled
by 1/sqrt(head_dim), a GELU MLP of width ``d_ff``, a final LayerNorm and an output layer
tied to the token embedding, without a bias. Two things differ only in form: GPT-2's
``Conv1D`` holds its weights as (in, out) where ours are (out, in) like ``nn.Linear``, so
those four matrices are transposed (an exact copy); and our GELU is the exact erf form,
which is GPT-2's ``activation_function: "gelu"`` (its default, ``gelu_new``, is the tanh
approximation: refused on the way in, never written).

Every field of the LM's spec has a GPT-2 equivalent in :data:`SPEC_TO_CONFIG`; a field
without one (a future option GPT-2 lacks) is refused by name rather than exported
approximately, and so is a GPT-2 config option the LM lacks on the way in.
"""

from __future__ import annotations

import dataclasses
import re

import torch

from ..errors import ModelFormatError
from ..training.lm import LN_EPS, LMSpec, lm_param_shapes
from .weights import Slot, check_params, fit_tensors

#: Each LM spec field and the GPT-2 config fields that say the same.
SPEC_TO_CONFIG = {"kind": (), "vocab": ("vocab_size",), "seq_len": ("n_positions",), "d_model": ("n_embd",),
                  "n_layers": ("n_layer",), "n_heads": ("n_head",), "d_ff": ("n_inner",),
                  # dropout acts where GPT-2's embd_pdrop and resid_pdrop do; no attention dropout
                  "dropout": ("embd_pdrop", "resid_pdrop")}

#: (our name, GPT-2's name without ``transformer.``, transposed); ``{i}`` is a block index.
_NAMES = [("tok_emb", "wte.weight", False), ("pos_emb", "wpe.weight", False)] + [
    (f"blocks.{{i}}.{ours}.{kind}", f"h.{{i}}.{theirs}.{kind}", kind == "weight" and ours not in ("ln1", "ln2"))
    for ours, theirs in (("ln1", "ln_1"), ("attn.qkv", "attn.c_attn"), ("attn.proj", "attn.c_proj"),
                         ("ln2", "ln_2"), ("mlp.fc", "mlp.c_fc"), ("mlp.proj", "mlp.c_proj"))
    for kind in ("weight", "bias")] + [("ln_f.weight", "ln_f.weight", False), ("ln_f.bias", "ln_f.bias", False)]
_RULES = [(re.compile("^" + re.escape(ours).replace(r"\{i\}", r"(\d+)") + "$"), theirs, transposed)
          for ours, theirs, transposed in _NAMES]
#: Buffers older GPT-2 files hold beside the weights (the causal mask): not parameters.
_BUFFERS = re.compile(r"^h\.\d+\.attn\.(bias|masked_bias)$")
PREFIX = "transformer."


def gpt2_name(name: str) -> tuple[str, bool]:
    """GPT-2's name (with ``transformer.``) of our parameter ``name``, and whether it is transposed."""
    for pattern, theirs, transposed in _RULES:
        match = pattern.match(name)
        if match:
            return PREFIX + theirs.replace("{i}", match.group(1) if pattern.groups else ""), transposed
    raise ModelFormatError(f"model.{name}: GPT-2 has no parameter for it; not exported")


def gpt2_config(spec: LMSpec) -> dict:
    """config.json of ``GPT2LMHeadModel`` for ``spec``; a spec field GPT-2 cannot say is refused by name."""
    for field in dataclasses.fields(spec):
        if field.name not in SPEC_TO_CONFIG:
            raise ModelFormatError(f"model.{field.name}: GPT-2 has no such option; not exported "
                                   f"(an approximate model would not be the one the job trained)")
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "dtype": "float32",
            "vocab_size": spec.vocab, "n_positions": spec.seq_len, "n_embd": spec.d_model, "n_layer": spec.n_layers,
            "n_head": spec.n_heads, "n_inner": spec.d_ff, "activation_function": "gelu",
            "layer_norm_epsilon": LN_EPS, "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
            "reorder_and_upcast_attn": False, "add_cross_attention": False, "tie_word_embeddings": True,
            "embd_pdrop": spec.dropout, "resid_pdrop": spec.dropout, "attn_pdrop": 0.0,
            "bos_token_id": None, "eos_token_id": None, "pad_token_id": None, "use_cache": True}


def to_gpt2(spec: LMSpec, params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The model's parameters under GPT-2's names and layout (the head is tied: not stored)."""
    check_params(params, lm_param_shapes(spec), "the checkpoint's model")
    out = {}
    for name, value in params.items():
        theirs, transposed = gpt2_name(name)
        out[theirs] = (value.T if transposed else value).contiguous().clone()
    return out


#: GPT-2 config fields that must hold these values for the LM to compute the same function
#: (absent: GPT2Config's default, which is the value here unless said otherwise).
_REQUIRED = {"scale_attn_weights": (True, "attention scaled by 1/sqrt(head_dim)"),
             "scale_attn_by_inverse_layer_idx": (False, "no per-layer attention scaling"),
             "add_cross_attention": (False, "no cross-attention"),
             "tie_word_embeddings": (True, "the output layer tied to the byte embedding")}
#: GPT2Config's defaults that differ from the LM's (what a config.json without them means).
GPT2_DEFAULTS = {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12,
                 "activation_function": "gelu_new"}
#: Activations that are the exact erf GELU (``gelu_python`` is the same function in Python).
EXACT_GELU = ("gelu", "gelu_python")


def check_gpt2_config(config: dict, spec: LMSpec, label: str) -> None:
    """Refuse, naming the field, a GPT-2 config.json that is not the job's LM exactly."""
    def refuse(key, why):
        shown = repr(config[key]) if key in config else (
            f"absent (GPT-2's default {GPT2_DEFAULTS[key]!r})" if key in GPT2_DEFAULTS else "absent")
        raise ModelFormatError(f"{label}: config.json {key} {shown}: {why}")

    if config.get("model_type") != "gpt2":
        refuse("model_type", "not a GPT-2 model (truetrain's LM is GPT-2's shape)")
    if config.get("activation_function", GPT2_DEFAULTS["activation_function"]) not in EXACT_GELU:
        refuse("activation_function", "truetrain's LM uses the exact erf GELU ('gelu'), which this is not")
    eps = config.get("layer_norm_epsilon", 1e-5)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or eps != LN_EPS:
        refuse("layer_norm_epsilon", f"truetrain's LM normalises with eps {LN_EPS:g}")
    for key, (value, what) in _REQUIRED.items():
        if config.get(key, value) != value:
            refuse(key, f"truetrain's LM has {what}")
    wanted = {"vocab_size": (spec.vocab, "256 byte ids"), "n_embd": (spec.d_model, "--d-model"),
              "n_layer": (spec.n_layers, "--layers"), "n_head": (spec.n_heads, "--heads"),
              "n_positions": (spec.seq_len, "--seq-len")}
    for key, (value, what) in wanted.items():
        if config.get(key, GPT2_DEFAULTS[key]) != value:
            refuse(key, f"the job's model has {value} ({what})")
    inner = config.get("n_inner")
    if (4 * spec.d_model if inner is None else inner) != spec.d_ff:  # None: GPT-2's 4 x n_embd
        refuse("n_inner", f"the job's model has an MLP of width {spec.d_ff} (4 x d_model)")


def config_shape(config: dict) -> dict:
    """The LM shape flags a GPT-2 config.json implies: d_model, n_layers, n_heads, seq_len."""
    keys = {"d_model": "n_embd", "n_layers": "n_layer", "n_heads": "n_head", "seq_len": "n_positions"}
    return {ours: config.get(theirs, GPT2_DEFAULTS[theirs]) for ours, theirs in keys.items()}


def is_gpt2_naming(names) -> bool:
    """Whether tensor names are GPT-2's (``transformer.h.0...``, or without the prefix)."""
    return any(n.startswith(PREFIX) or n in ("wte.weight", "wpe.weight") or n.startswith("h.") for n in names)


def from_gpt2(found: dict[str, torch.Tensor], spec: LMSpec, label: str) -> dict[str, torch.Tensor]:
    """Our parameters from a GPT-2 state dict (``transformer.`` prefix or not, a tied
    ``lm_head.weight`` or none, old causal-mask buffers ignored); the first name or shape
    that does not fit the job's model is refused."""
    prefixed = any(n.startswith(PREFIX) for n in found)
    body = {}
    for name, value in found.items():
        short = name.removeprefix(PREFIX) if prefixed else name
        if name != "lm_head.weight" and not _BUFFERS.match(short):
            body[name] = value
    slots = {}
    for name, shape in lm_param_shapes(spec).items():
        theirs, transposed = gpt2_name(name)
        file_name = theirs if prefixed else theirs.removeprefix(PREFIX)
        slots[file_name] = Slot(name, tuple(reversed(shape)) if transposed else tuple(shape), transposed)
    params = fit_tensors(body, slots, label)
    head = found.get("lm_head.weight")
    if head is not None and not torch.equal(head.to(torch.float32), params["tok_emb"]):
        embedding = "transformer.wte.weight" if prefixed else "wte.weight"
        raise ModelFormatError(f"{label}: lm_head.weight differs from {embedding}; truetrain's LM ties its output "
                               f"layer to the byte embedding")
    return params

