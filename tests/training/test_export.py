"""A model out of truetrain and back in, without a chain: the LM as a transformers GPT-2
folder (loaded by the real transformers package), the MLP and CNN as safetensors with the
exported PyTorch module, and a user's weights fitted to a job's model or refused by name."""

from __future__ import annotations

import dataclasses
import importlib.util
import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.training.conftest import data_ref
from truetrain.errors import ModelFormatError
from truetrain.export import export_model, gpt2_config, read_init, to_gpt2
from truetrain.training import build_manifest, init_params
from truetrain.training.models import build_model
from truetrain.training.aggregate import global_checkpoint
from truetrain.training.lm import LMSpec, TransformerLM
from truetrain.training.lm_eval import sample

LM = {"kind": "lm", "d_model": 32, "n_layers": 2, "n_heads": 4, "seq_len": 24}
CNN = {"kind": "cnn", "in_shape": [1, 8, 8], "channels": [4, 6], "kernel": 3, "hidden": [12], "classes": 10}
MLP = {"kind": "mlp", "widths": [64, 16, 10]}


def manifest_of(model: dict, numeric_mode: str = "stock"):
    ref = data_ref(b"TTTEXT1\n" + b"x" * 64)
    return build_manifest(name="export-test", seed=7, numeric_mode=numeric_mode, model=model,
                          optimizer={"kind": "adamw", "lr": 0.01}, batch_size=2, steps_per_task=2,
                          checkpoint_interval=1, rounds=1, shards=[ref], test_set=ref)


def trained_like(manifest, scale: float = 0.3) -> dict[str, torch.Tensor]:
    """The seed's parameters moved off their initial values (biases and LayerNorms too), so
    a mapping that swapped, transposed or dropped a tensor shows in the outputs."""
    g = torch.Generator().manual_seed(1)
    return {k: v + scale * torch.randn(v.shape, generator=g) for k, v in init_params(manifest.model, 7).items()}


def export(manifest, params, out):
    ckpt = global_checkpoint(manifest, 1, params)
    return export_model(manifest, ckpt, out, {"job_id": 1, "round": 1, "rounds": 1,
                                              "checkpoint": {"cid": "stand-in", "hash": "0x" + ckpt.hash().hex()}})


@pytest.fixture(scope="module")
def lm_export(tmp_path_factory):
    manifest = manifest_of(LM)
    params = trained_like(manifest)
    out = tmp_path_factory.mktemp("lm")
    written = export(manifest, params, out)
    return manifest, params, out, written


def test_lm_export_loads_in_transformers_with_our_stock_logits(lm_export):
    from transformers import GPT2LMHeadModel

    manifest, params, out, written = lm_export
    assert written["format"] == "transformers-gpt2"
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json",
                                                      "tokenizer_config.json", "truetrain.json"]
    hf = GPT2LMHeadModel.from_pretrained(out).eval()
    assert hf.config.activation_function == "gelu" and hf.config.n_inner == 128 and hf.config.vocab_size == 256
    ids = torch.tensor([list(b"def main(argv):\n    retu"), list(b"import os, sys\nfrom path")])
    with torch.no_grad():
        theirs = hf(ids).logits
        ours = TransformerLM(manifest.model, params).eval()(ids)
    assert ours.abs().max() > 1.0  # not a degenerate model
    assert (theirs - ours).abs().max() <= 1e-5
    # the head is tied to the embedding, as in our model, and holds the checkpoint's bits
    assert hf.lm_head.weight.data_ptr() == hf.transformer.wte.weight.data_ptr()
    assert torch.equal(hf.transformer.wte.weight, params["tok_emb"])
    assert torch.equal(hf.transformer.h[1].attn.c_attn.weight, params["blocks.1.attn.qkv.weight"].T)


def test_lm_export_greedy_generation_is_our_sample(lm_export):
    from transformers import GPT2LMHeadModel

    manifest, params, out, _ = lm_export
    hf = GPT2LMHeadModel.from_pretrained(out).eval()
    prompt = b"def f(x):"
    ckpt = global_checkpoint(manifest, 1, params)
    ours = sample(manifest, ckpt, prompt, 24 - len(prompt))  # within the model's context: no sliding window
    generated = hf.generate(torch.tensor([list(prompt)]), max_new_tokens=len(ours), do_sample=False)
    assert bytes(generated[0, len(prompt):].tolist()) == ours


def test_lm_export_tokenizer_maps_each_byte_to_its_id(lm_export):
    from transformers import AutoTokenizer

    out = lm_export[2]
    tokenizer = AutoTokenizer.from_pretrained(out)
    text = "naïve café ✓ 🙂\n\tdef f():\x00\x7f"
    ids = tokenizer(text)["input_ids"]
    assert ids == list(text.encode())
    assert tokenizer.decode(ids) == text
    assert len(tokenizer) == 256


def test_lm_export_records_where_it_came_from(lm_export):
    manifest, _, out, _ = lm_export
    record = json.loads((out / "truetrain.json").read_text())
    assert record["format"] == "transformers-gpt2" and record["model"] == manifest.raw["model"]
    assert record["checkpoint"]["hash"] == load_file_metadata(out / "model.safetensors")["truetrain.checkpoint"]
    assert "one id per byte" in record["inputs"]


def load_file_metadata(path) -> dict:
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        return f.metadata()


def test_an_lm_option_gpt2_lacks_is_refused_by_name(lm_export, tmp_path):
    @dataclasses.dataclass(frozen=True)
    class RotarySpec(LMSpec):
        rotary: bool = True

    spec = RotarySpec(**{f.name: getattr(lm_export[0].model, f.name) for f in dataclasses.fields(LMSpec)})
    with pytest.raises(ModelFormatError, match=r"^model\.rotary: GPT-2 has no such option; not exported"):
        gpt2_config(spec)
    assert not any(tmp_path.iterdir())


def test_a_checkpoint_that_is_not_the_models_is_refused_before_writing(lm_export, tmp_path):
    manifest, params, _, _ = lm_export
    wrong = {k: v for k, v in params.items() if k != "blocks.1.ln2.bias"}
    with pytest.raises(ModelFormatError, match=r"^the checkpoint's model: no tensor blocks\.1\.ln2\.bias$"):
        export(manifest, wrong, tmp_path / "out")
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- back in: --init's reading

def test_an_export_reads_back_as_the_same_bits(lm_export):
    manifest, params, out, _ = lm_export
    back = read_init(out, manifest.model, "--init x")
    assert back.keys() == params.keys() and all(torch.equal(back[k], params[k]) for k in params)
    ckpt = global_checkpoint(manifest, 0, params)
    assert global_checkpoint(manifest, 0, back).hash() == ckpt.hash()


def test_a_transformers_save_pretrained_folder_and_bare_files_read_back(lm_export, tmp_path):
    from transformers import GPT2LMHeadModel

    manifest, params, out, _ = lm_export
    GPT2LMHeadModel.from_pretrained(out).save_pretrained(tmp_path / "saved")
    assert all(torch.equal(v, params[k]) for k, v in read_init(tmp_path / "saved", manifest.model, "x").items())
    # GPT-2's names without the prefix, a tied lm_head and the old causal-mask buffers (the Hub's gpt2 files)
    hub_style = {k.removeprefix("transformer."): v for k, v in load_file(str(out / "model.safetensors")).items()}
    hub_style["lm_head.weight"] = hub_style["wte.weight"].clone()
    hub_style["h.0.attn.bias"] = torch.tril(torch.ones(1, 1, 24, 24))
    save_file(hub_style, str(tmp_path / "hub.safetensors"))
    assert all(torch.equal(v, params[k]) for k, v in read_init(tmp_path / "hub.safetensors", manifest.model, "x").items())
    # truetrain's own names, half precision (widens exactly)
    half = {k: v.to(torch.bfloat16) for k, v in params.items()}
    save_file(half, str(tmp_path / "ours.safetensors"))
    back = read_init(tmp_path / "ours.safetensors", manifest.model, "x")
    assert all(torch.equal(back[k], half[k].float()) for k in params)


def _gpt2_folder(tmp_path, out, config_change=None, tensors_change=None):
    folder = tmp_path / "user-model"
    folder.mkdir()
    config = json.loads((out / "config.json").read_text())
    config.update(config_change or {})
    config = {k: v for k, v in config.items() if v is not None or k not in (config_change or {})}  # None: absent
    (folder / "config.json").write_text(json.dumps(config))
    tensors = load_file(str(out / "model.safetensors"))
    if tensors_change:
        tensors_change(tensors)
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


@pytest.mark.parametrize("change, message", [
    ({"activation_function": "gelu_new"},
     "config.json activation_function 'gelu_new': truetrain's LM uses the exact erf GELU ('gelu'), which this is not"),
    ({"scale_attn_by_inverse_layer_idx": True},
     "config.json scale_attn_by_inverse_layer_idx True: truetrain's LM has no per-layer attention scaling"),
    ({"layer_norm_epsilon": 1e-6}, "config.json layer_norm_epsilon 1e-06: truetrain's LM normalises with eps 1e-05"),
    ({"tie_word_embeddings": False},
     "config.json tie_word_embeddings False: truetrain's LM has the output layer tied to the byte embedding"),
    ({"n_head": 2}, "config.json n_head 2: the job's model has 4 (--heads)"),
    ({"model_type": "llama"}, "config.json model_type 'llama': not a GPT-2 model (truetrain's LM is GPT-2's shape)"),
    ({"n_head": None}, "config.json n_head absent (GPT-2's default 12): the job's model has 4 (--heads)"),
    ({"activation_function": None},
     "config.json activation_function absent (GPT-2's default 'gelu_new'): truetrain's LM uses the exact erf GELU "
     "('gelu'), which this is not"),
])
def test_a_gpt2_option_the_lm_lacks_is_refused_by_name(lm_export, tmp_path, change, message):
    manifest, _, out, _ = lm_export
    folder = _gpt2_folder(tmp_path, out, config_change=change)
    with pytest.raises(ModelFormatError) as caught:
        read_init(folder, manifest.model, f"--init {folder}")
    assert str(caught.value) == f"--init {folder}: {message}"


def _drop(name):
    return lambda t: t.pop(name)


def _put(name, value):
    return lambda t: t.__setitem__(name, value)


@pytest.mark.parametrize("change, message", [
    (_drop("transformer.h.1.ln_2.bias"),
     "transformer.h.1.ln_2.bias is missing; the job's model needs it with shape [32]"),
    (_put("transformer.h.0.attn.c_attn.weight", torch.zeros(96, 32)),
     "transformer.h.0.attn.c_attn.weight has shape [96, 32], the job's model needs [32, 96]"),
    (_put("transformer.h.2.ln_1.weight", torch.ones(32)),
     "transformer.h.2.ln_1.weight is not a parameter of the job's model"),
    (_put("transformer.wpe.weight", torch.zeros(24, 32, dtype=torch.float64)),
     "transformer.wpe.weight is float64; the job trains float32 (float16 and bfloat16 widen exactly; round "
     "anything else yourself)"),
    (_put("transformer.ln_f.bias", torch.full((32,), float("nan"))), "transformer.ln_f.bias holds NaN or infinite values"),
    (_put("lm_head.weight", torch.zeros(256, 32)),
     "lm_head.weight differs from transformer.wte.weight; truetrain's LM ties its output layer to the byte embedding"),
])
def test_mismatched_names_shapes_and_values_are_refused_naming_the_first(lm_export, tmp_path, change, message):
    manifest, _, out, _ = lm_export
    folder = _gpt2_folder(tmp_path, out, tensors_change=change)
    with pytest.raises(ModelFormatError) as caught:
        read_init(folder, manifest.model, "--init m")
    assert str(caught.value) == f"--init m: {message}"


def test_an_lm_read_into_a_job_of_another_shape_names_the_first_mismatch(lm_export):
    manifest, _, out, _ = lm_export
    wider = manifest_of({**LM, "d_model": 48, "n_heads": 4}).model
    with pytest.raises(ModelFormatError, match=r"^x: config\.json n_embd 32: the job's model has 48 \(--d-model\)$"):
        read_init(out, wider, "x")
    with pytest.raises(ModelFormatError, match=r"^x: transformer\.wte\.weight has shape \[256, 32\], the job's model "
                                               r"needs \[256, 48\]$"):
        read_init(out / "model.safetensors", wider, "x")  # a bare file: no config, the shapes decide


def test_not_a_safetensors_file_is_one_line(tmp_path):
    bad = tmp_path / "weights.safetensors"
    bad.write_bytes(b"not safetensors at all")
    with pytest.raises(ModelFormatError, match=r"^x: weights\.safetensors is not a safetensors file \("):
        read_init(bad, manifest_of(MLP).model, "x")
    with pytest.raises(ModelFormatError, match=r"^x: no model\.safetensors in the folder"):
        read_init(tmp_path, manifest_of(MLP).model, "x")


# ---------------------------------------------------------------- the MLP and CNN

@pytest.mark.parametrize("model", [MLP, CNN], ids=["mlp", "cnn"])
def test_classifier_export_loads_into_its_module_with_equal_outputs(model, tmp_path):
    manifest = manifest_of(model)
    params = trained_like(manifest, scale=0.1)
    written = export(manifest, params, tmp_path)
    assert written["format"] == "truetrain-classifier"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.py", "model.safetensors",
                                                          "truetrain.json"]
    source = (tmp_path / "model.py").read_text()
    assert "import truetrain" not in source and "from truetrain" not in source  # torch and safetensors only
    spec = importlib.util.spec_from_file_location("exported_model", tmp_path / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    net = module.TruetrainClassifier.from_pretrained(tmp_path)
    x = torch.rand(50, manifest.model.features, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ours = build_model(manifest.model, params).eval()(x)
        theirs = net(x)
    assert theirs.shape == (50, 10) and torch.equal(theirs, ours)
    back = read_init(tmp_path, manifest.model, "x")
    assert all(torch.equal(back[k], params[k]) for k in params)


def test_a_gpt2_folder_for_a_classifier_job_is_refused(lm_export):
    out = lm_export[2]
    with pytest.raises(ModelFormatError, match=r"^x: a GPT-2 language model, but the job trains a mlp \(add --model lm\)$"):
        read_init(out, manifest_of(MLP).model, "x")


def test_to_gpt2_transposes_only_the_conv1d_weights(lm_export):
    from truetrain.export.gpt2 import gpt2_name

    manifest, params, _, _ = lm_export
    mapped = to_gpt2(manifest.model, params)
    assert len(mapped) == len(params)
    transposed = []
    for ours, value in params.items():
        theirs = mapped[gpt2_name(ours)[0]]
        if not torch.equal(theirs, value):
            assert torch.equal(theirs, value.T)
            transposed.append(gpt2_name(ours)[0])
    assert sorted(transposed) == sorted(f"transformer.h.{i}.{p}.weight" for i in range(2)
                                        for p in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"))
