"""Model registry: specs from the job manifest, deterministic init, the modules (op library).

Two kinds (see docs/manifest.md):

* ``{"kind": "mlp", "widths": [64, 128, 10]}``: Linear layers with ReLU between them.
* ``{"kind": "cnn", "in_shape": [1, 8, 8], "channels": [8, 16], "kernel": 3,
  "hidden": [], "classes": 10}``: per entry of ``channels`` a Conv2d (kernel x kernel,
  stride 1, padding kernel//2, so "same" size), ReLU and 2x2 max-pool; then the feature
  map is flattened in (C, H, W) order and fed to Linear layers
  ``[flat, *hidden, classes]`` with ReLU between them.

Parameter names follow the module's ``state_dict``: ``conv.{i}.weight`` (O, C, k, k),
``conv.{i}.bias``, ``fc.{j}.weight`` (out, in), ``fc.{j}.bias``. Initial values are
PyTorch's default ranges (uniform in +-1/sqrt(fan_in) for weights and biases) drawn from a
keccak-keyed PCG64 stream, so they are the same on every device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..errors import ManifestError
from .ops import ReproStep, conv2d, cross_entropy, linear, max_pool2x2
from .rng import derive_key, uniform


@dataclass(frozen=True)
class ModelSpec:
    """A validated model description."""

    kind: str
    in_shape: tuple[int, ...]  # (features,) for an MLP, (C, H, W) for a CNN
    channels: tuple[int, ...]  # conv output channels (empty for an MLP)
    kernel: int  # conv kernel size (0 for an MLP)
    fc_widths: tuple[int, ...]  # dense widths from the flattened input to the classes

    @property
    def features(self) -> int:
        """Length of one input row as stored in a shard."""
        return math.prod(self.in_shape)

    @property
    def classes(self) -> int:
        return self.fc_widths[-1]

    def rows_per_sample(self) -> int:
        """Rows one sample adds to a weight gradient's sums (a conv layer's patches)."""
        return max([h * w for _, h, w in self.conv_shapes()] + [1])

    def conv_shapes(self) -> list[tuple[int, int, int]]:
        """(in_channels, height, width) at the input of each conv layer."""
        if self.kind != "cnn":
            return []
        c, h, w = self.in_shape
        shapes = []
        for out in self.channels:
            shapes.append((c, h, w))
            c, h, w = out, h // 2, w // 2
        return shapes


def _int_list(raw, field: str, *, minimum: int = 1, min_len: int = 1) -> tuple[int, ...]:
    if not isinstance(raw, list) or len(raw) < min_len:
        raise ManifestError(f"{field}: expected a list of at least {min_len} integers")
    for i, v in enumerate(raw):
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise ManifestError(f"{field}[{i}]: expected an integer >= {minimum}, got {v!r}")
    return tuple(raw)


def parse_model_spec(raw, field: str = "model"):
    """Validate a model spec dict (a :class:`ModelSpec`, or an :class:`~.lm.LMSpec` for
    ``kind: lm``); errors name the offending field (``model.widths``...)."""
    if not isinstance(raw, dict):
        raise ManifestError(f"{field}: expected an object")
    kind = raw.get("kind")
    if kind == "lm":
        from .lm import parse_lm_spec

        return parse_lm_spec(raw, field)
    if kind == "mlp":
        _no_extra(raw, {"kind", "widths"}, field)
        widths = _int_list(raw.get("widths"), f"{field}.widths", min_len=2)
        return ModelSpec("mlp", (widths[0],), (), 0, widths)
    if kind == "cnn":
        _no_extra(raw, {"kind", "in_shape", "channels", "kernel", "hidden", "classes"}, field)
        in_shape = _int_list(raw.get("in_shape"), f"{field}.in_shape")
        if len(in_shape) != 3:
            raise ManifestError(f"{field}.in_shape: expected [channels, height, width]")
        channels = _int_list(raw.get("channels"), f"{field}.channels")
        kernel = raw.get("kernel")
        if isinstance(kernel, bool) or not isinstance(kernel, int) or kernel < 1 or kernel % 2 == 0:
            raise ManifestError(f"{field}.kernel: expected an odd integer >= 1, got {kernel!r}")
        hidden = _int_list(raw.get("hidden", []), f"{field}.hidden", min_len=0)
        classes = raw.get("classes")
        if isinstance(classes, bool) or not isinstance(classes, int) or classes < 2:
            raise ManifestError(f"{field}.classes: expected an integer >= 2, got {classes!r}")
        factor = 2 ** len(channels)
        if in_shape[1] % factor or in_shape[2] % factor:
            raise ManifestError(
                f"{field}.in_shape: height and width must be divisible by {factor} "
                f"(one 2x2 pool per conv layer)")
        flat = channels[-1] * (in_shape[1] // factor) * (in_shape[2] // factor)
        return ModelSpec("cnn", in_shape, channels, kernel, (flat, *hidden, classes))
    raise ManifestError(f"{field}.kind: expected 'mlp', 'cnn' or 'lm', got {kind!r}")


def _no_extra(raw: dict, allowed: set[str], field: str) -> None:
    extra = sorted(set(raw) - allowed)
    if extra:
        raise ManifestError(f"{field}.{extra[0]}: unknown field")


def param_shapes(spec) -> dict[str, tuple[int, ...]]:
    """Every parameter's name and shape, in layer order."""
    if not isinstance(spec, ModelSpec):
        from .lm import lm_param_shapes

        return lm_param_shapes(spec)
    shapes: dict[str, tuple[int, ...]] = {}
    for i, (c, _, _) in enumerate(spec.conv_shapes()):
        o, k = spec.channels[i], spec.kernel
        shapes[f"conv.{i}.weight"] = (o, c, k, k)
        shapes[f"conv.{i}.bias"] = (o,)
    w = spec.fc_widths
    for j in range(len(w) - 1):
        shapes[f"fc.{j}.weight"] = (w[j + 1], w[j])
        shapes[f"fc.{j}.bias"] = (w[j + 1],)
    return shapes


def init_params(spec, seed: int) -> dict[str, torch.Tensor]:
    """Initial float32 parameters (CPU), a pure function of (spec, seed)."""
    if not isinstance(spec, ModelSpec):
        from .lm import lm_init_params

        return lm_init_params(spec, seed)
    params = {}
    shapes = param_shapes(spec)
    for name, shape in shapes.items():
        layer = name.rsplit(".", 1)[0]
        wshape = shapes[layer + ".weight"]
        fan_in = math.prod(wshape[1:])
        bound = 1.0 / math.sqrt(fan_in)
        u = uniform(derive_key(seed, "init/" + name), math.prod(shape))
        values = ((2.0 * u - 1.0) * bound).astype(np.float32).reshape(shape)
        params[name] = torch.from_numpy(values)
    return params


class ImageNet(nn.Module):
    """An MLP or CNN classifier built from the op library: ``forward(x, step)`` gives
    logits (rows, classes) for float32 input rows (rows, features), in stock mode
    (``step=None``: PyTorch's ops, NCHW) or repro mode (a :class:`~.ops.ReproStep`: the
    op library's exact forms, NHWC inside). Each conv layer is conv, ReLU, 2x2 max-pool;
    dense layers but the last are followed by a ReLU."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.spec = spec
        self.conv = nn.ModuleList(
            nn.Conv2d(c, o, spec.kernel, padding=spec.kernel // 2)
            for (c, _, _), o in zip(spec.conv_shapes(), spec.channels))
        w = spec.fc_widths
        self.fc = nn.ModuleList(nn.Linear(w[j], w[j + 1]) for j in range(len(w) - 1))

    def forward(self, x: torch.Tensor, step: ReproStep | None = None) -> torch.Tensor:
        r = x.shape[0]
        if self.spec.kind == "cnn":
            x = x.reshape(r, *self.spec.in_shape)
            if step is not None:
                x = x.permute(0, 2, 3, 1)  # NHWC
            for i, conv in enumerate(self.conv):
                x = max_pool2x2(conv2d(x, conv.weight, conv.bias, step, f"conv.{i}", relu=True), step)
            if step is not None:
                x = x.permute(0, 3, 1, 2)  # flatten in (C, H, W) order either way
            x = x.reshape(r, -1)
        for j, fc in enumerate(self.fc):
            x = linear(x, fc.weight, fc.bias, step, f"fc.{j}", relu=j < len(self.fc) - 1)
        return x

    def fused_layers(self) -> tuple[int, list]:
        """``(kernel, layers)`` as :mod:`~.native_net` runs them in one C call: each layer's
        ``(weight name, bias name, weight, bias)``, a conv layer's with its input map's
        ``(channels, height, width)``; conv layers first."""
        convs = [(f"conv.{i}.weight", f"conv.{i}.bias", conv.weight, conv.bias, shape)
                 for i, (conv, shape) in enumerate(zip(self.conv, self.spec.conv_shapes(), strict=True))]
        dense = [(f"fc.{j}.weight", f"fc.{j}.bias", fc.weight, fc.bias) for j, fc in enumerate(self.fc)]
        return self.spec.kernel, convs + dense

    def loss(self, x: torch.Tensor, y: torch.Tensor, step: ReproStep | None = None,
             total_rows: int | None = None, losses: list | None = None) -> torch.Tensor:
        """Mean cross-entropy (repro: the placeholder to call ``backward`` on)."""
        return cross_entropy(self.forward(x, step), y, step, total_rows, losses)


def build_model(spec, params: dict[str, torch.Tensor]) -> nn.Module:
    """The model's module (an :class:`ImageNet` or a ``TransformerLM``) holding copies of
    ``params``; it runs stock or repro (see their ``forward``)."""
    if not isinstance(spec, ModelSpec):
        from .lm import TransformerLM

        return TransformerLM(spec, params)
    net = ImageNet(spec)
    net.load_state_dict({k: v.clone() for k, v in params.items()})
    return net
