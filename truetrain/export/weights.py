"""Fitting tensors read from another format to a job's parameters: names, shapes, dtypes, values.

A file's tensors are checked against what the job's model expects, in the model's layer
order, and the first thing that does not fit raises :class:`ModelFormatError` naming it as
the file names it. Nothing is rounded: float16 and bfloat16 widen to float32 exactly; any
other dtype is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import ModelFormatError

#: Dtypes that become float32 without changing a value.
EXACT_TO_F32 = (torch.float32, torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class Slot:
    """Where one of the file's tensors goes: the job's parameter ``name`` with ``shape`` as
    the file holds it; ``transposed``: the file holds it as (in, out), the job as (out, in)."""

    name: str
    shape: tuple[int, ...]
    transposed: bool = False


def shape_text(shape) -> str:
    return "[" + ", ".join(str(int(n)) for n in shape) + "]"


def fit_tensors(found: dict[str, torch.Tensor], slots: dict[str, Slot], label: str) -> dict[str, torch.Tensor]:
    """The job's parameters (float32, contiguous) from ``found`` (the file's tensors by its
    names) given ``slots`` (the file's name → :class:`Slot`, in the model's layer order).
    The first missing name, wrong shape, dtype that does not widen exactly or non-finite
    value, then the first name the job has no place for, is refused as ``label: ...``."""
    params = {}
    for file_name, slot in slots.items():
        if file_name not in found:
            raise ModelFormatError(f"{label}: {file_name} is missing; the job's model needs it with shape "
                                   f"{shape_text(slot.shape)}")
        tensor = found[file_name]
        if tuple(tensor.shape) != slot.shape:
            raise ModelFormatError(f"{label}: {file_name} has shape {shape_text(tensor.shape)}, the job's model needs "
                                   f"{shape_text(slot.shape)}")
        if tensor.dtype not in EXACT_TO_F32:
            raise ModelFormatError(f"{label}: {file_name} is {str(tensor.dtype).removeprefix('torch.')}; the job trains "
                                   f"float32 (float16 and bfloat16 widen exactly; round anything else yourself)")
        value = tensor.to(torch.float32)
        if not bool(torch.isfinite(value).all()):
            raise ModelFormatError(f"{label}: {file_name} holds NaN or infinite values")
        params[slot.name] = (value.T if slot.transposed else value).contiguous().clone()
    extra = sorted(set(found) - set(slots))
    if extra:
        raise ModelFormatError(f"{label}: {extra[0]} is not a parameter of the job's model")
    return params


def own_slots(shapes: dict[str, tuple[int, ...]]) -> dict[str, Slot]:
    """Slots of a file that names the job's parameters as truetrain does (``fc.0.weight``)."""
    return {name: Slot(name, tuple(shape)) for name, shape in shapes.items()}


def check_params(params: dict[str, torch.Tensor], shapes: dict[str, tuple[int, ...]], what: str) -> None:
    """Refuse ``params`` unless they are exactly ``shapes``' names and shapes, in float32."""
    for name, shape in shapes.items():
        if name not in params:
            raise ModelFormatError(f"{what}: no tensor {name}")
        if tuple(params[name].shape) != tuple(shape) or params[name].dtype != torch.float32:
            raise ModelFormatError(f"{what}: {name} is {str(params[name].dtype).removeprefix('torch.')} "
                                   f"{shape_text(params[name].shape)}, the model's is float32 {shape_text(shape)}")
    extra = sorted(set(params) - set(shapes))
    if extra:
        raise ModelFormatError(f"{what}: {extra[0]} is not a parameter of the model")
