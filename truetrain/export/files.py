"""A checkpoint's model as files other tools load, and a user's weights read back for a job.

:func:`export_model` writes, from a (hash-checked) global checkpoint:

* a language model: a transformers GPT-2 folder, ``config.json`` and ``model.safetensors``
  that ``GPT2LMHeadModel.from_pretrained`` loads offline, with the byte tokenizer
  (``tokenizer.json``, ``tokenizer_config.json``) beside them;
* an MLP or CNN: ``model.safetensors`` (truetrain's parameter names), ``config.json`` (the
  layers) and ``model.py``, the plain PyTorch module that loads them;

and ``truetrain.json`` in both: where the weights came from (job, round, checkpoint CID
and hash) and how inputs map to the model. The tensors are the checkpoint's bits: copied,
at most transposed, never rounded.

:func:`read_init` reads a safetensors file or an export / transformers GPT-2 folder and
fits it to a job's model, refusing the first name, shape or option that does not fit.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import torch

from ..errors import ModelFormatError
from ..training.checkpoint import Checkpoint
from ..training.models import ModelSpec, param_shapes
from .gpt2 import check_gpt2_config, from_gpt2, gpt2_config, is_gpt2_naming, to_gpt2
from .tokenizer import write_tokenizer
from .weights import check_params, fit_tensors, own_slots

FORMAT_GPT2 = "transformers-gpt2"
FORMAT_CLASSIFIER = "truetrain-classifier"
#: The classifier spec fields config.json and model.py carry.
CLASSIFIER_FIELDS = {"kind", "in_shape", "channels", "kernel", "fc_widths"}
WEIGHTS, CONFIG, PROVENANCE = "model.safetensors", "config.json", "truetrain.json"
_MODULE_SOURCE = Path(__file__).with_name("classifier_model.py")


def classifier_config(spec: ModelSpec) -> dict:
    """config.json of an MLP or CNN (what model.py builds); a field it cannot carry is refused by name."""
    for field in dataclasses.fields(spec):
        if field.name not in CLASSIFIER_FIELDS:
            raise ModelFormatError(f"model.{field.name}: the exported module has no such option; not exported")
    return {"format": FORMAT_CLASSIFIER, "kind": spec.kind, "in_shape": list(spec.in_shape),
            "channels": list(spec.channels), "kernel": spec.kernel, "fc_widths": list(spec.fc_widths),
            "features": spec.features, "classes": spec.classes}


def export_model(manifest, checkpoint: Checkpoint, out_dir, provenance: dict) -> dict:
    """Write ``checkpoint``'s model (of ``manifest``) into ``out_dir`` (created; files of the
    same names replaced) with ``provenance`` in truetrain.json; return what was written.
    Everything is checked before the first file is written."""
    spec, params = manifest.model, checkpoint.group("model")
    lm = spec.kind == "lm"
    if lm:
        config, tensors = gpt2_config(spec), to_gpt2(spec, params)
        inputs = ("UTF-8 text, one id per byte (0-255): ids = list(text.encode()), text = bytes(ids).decode(); "
                  "tokenizer.json does the same")
    else:
        config = classifier_config(spec)
        check_params(params, param_shapes(spec), "the checkpoint's model")
        tensors = {name: value.contiguous() for name, value in params.items()}
        inputs = f"float32 rows of {spec.features} features, as in the job's data" + (
            f" (a {'x'.join(map(str, spec.in_shape))} image in (C, H, W) order)" if spec.kind == "cnn" else "")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ModelFormatError(f"--out {out}: not a folder")
    out.mkdir(parents=True, exist_ok=True)
    from safetensors.torch import save

    # save() and write_bytes, not save_file: that one creates the file readable by its owner only.
    (out / WEIGHTS).write_bytes(save(tensors, metadata={"format": "pt",
                                                        "truetrain.checkpoint": provenance["checkpoint"]["hash"]}))
    files = [out / WEIGHTS, out / CONFIG]
    files[1].write_text(json.dumps(config, indent=2) + "\n")
    if lm:
        files += write_tokenizer(out, spec.seq_len)
    else:
        shutil.copyfile(_MODULE_SOURCE, out / "model.py")
        files.append(out / "model.py")
    record = {"format": FORMAT_GPT2 if lm else FORMAT_CLASSIFIER, **provenance, "model": manifest.raw["model"],
              "numeric_mode": manifest.numeric_mode, "inputs": inputs}
    if manifest.repro:
        record["note"] = ("the weights are the checkpoint's bits; a float32 forward of them (transformers', or "
                          "truetrain's stock mode) differs from the repro forward the market audits by that "
                          "forward's int8-limb rounding")
    (out / PROVENANCE).write_text(json.dumps(record, indent=2) + "\n")
    files.append(out / PROVENANCE)
    return {"format": record["format"], "files": [str(f) for f in files]}


def _read_json(path: Path, label: str) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ModelFormatError(f"{label}: {path.name} is not readable JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ModelFormatError(f"{label}: {path.name} is not a JSON object")
    return data


def _locate(path: Path, label: str) -> tuple[Path, dict | None]:
    """The safetensors file ``path`` names (itself, or a folder's model.safetensors) and the folder's config.json."""
    if path.is_dir():
        weights = path / WEIGHTS
        if not weights.is_file():
            raise ModelFormatError(f"{label}: no {WEIGHTS} in the folder (a sharded checkpoint is not read: save "
                                   f"it as one file)")
        config = path / CONFIG
        return weights, _read_json(config, label) if config.is_file() else None
    if path.is_file():
        return path, None
    raise ModelFormatError(f"{label}: no such file or folder")


def init_config(path) -> dict | None:
    """The GPT-2 config.json of a folder ``path`` (None: a file, or a folder without one)."""
    path = Path(path)
    config = path / CONFIG
    if not path.is_dir() or not config.is_file():
        return None
    data = _read_json(config, f"--init {path}")
    return data if data.get("model_type") == "gpt2" else None


def read_init(path, spec, label: str) -> dict[str, torch.Tensor]:
    """The job's initial parameters (float32, truetrain's names) from ``path``: a
    safetensors file, or a folder with ``model.safetensors`` (and, for a GPT-2 folder, its
    config.json, whose every option must be the job's LM). Names may be GPT-2's (with or
    without ``transformer.``) for an LM, or truetrain's. The first thing that does not fit
    is refused as ``label: ...``."""
    weights, config = _locate(Path(path), label)
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        found = load_file(str(weights))
    except (SafetensorError, OSError, ValueError) as exc:
        raise ModelFormatError(f"{label}: {weights.name} is not a safetensors file ({exc})") from exc
    if not found:
        raise ModelFormatError(f"{label}: {weights.name} holds no tensors")
    if spec.kind == "lm":
        if config is not None:
            check_gpt2_config(config, spec, label)
        if is_gpt2_naming(found):
            return from_gpt2(found, spec, label)
    elif config is not None and config.get("model_type") == "gpt2":
        raise ModelFormatError(f"{label}: a GPT-2 language model, but the job trains a {spec.kind} (add --model lm)")
    return fit_tensors(found, own_slots(param_shapes(spec)), label)
