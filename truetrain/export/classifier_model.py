"""A truetrain MLP or CNN classifier as a plain PyTorch module.

`truetrain job export` writes this file as ``model.py`` beside ``model.safetensors`` and
``config.json``; it needs only torch and safetensors (not truetrain):

    import sys; sys.path.insert(0, "my-model")
    from model import TruetrainClassifier
    net = TruetrainClassifier.from_pretrained("my-model")
    logits = net(x)  # x: float32 (rows, features), each row as in the job's data

The layers are the job's: an MLP is Linear layers with ReLU between them; a CNN is, per
conv layer, a 'same'-padded stride-1 convolution, ReLU and 2x2 max-pooling, then the
feature map flattened in (C, H, W) order into Linear layers with ReLU between them. The
parameter names are truetrain's (``conv.{i}.weight``, ``fc.{j}.weight``), so the state
dict loads with ``strict=True``.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


class TruetrainClassifier(nn.Module):
    """The classifier ``config`` (config.json) describes; ``forward(x)`` gives logits (rows, classes)."""

    def __init__(self, config: dict):
        super().__init__()
        self.in_shape = tuple(config["in_shape"])
        channels, kernel = config["channels"], config["kernel"]
        inputs = [self.in_shape[0], *channels[:-1]]
        self.conv = nn.ModuleList(nn.Conv2d(c, o, kernel, padding=kernel // 2) for c, o in zip(inputs, channels))
        widths = config["fc_widths"]
        self.fc = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0]
        if len(self.conv):
            x = x.reshape(rows, *self.in_shape)
            for conv in self.conv:
                x = F.max_pool2d(torch.relu(conv(x)), 2)
            x = x.reshape(rows, -1)
        for j, fc in enumerate(self.fc):
            x = fc(x)
            if j < len(self.fc) - 1:
                x = torch.relu(x)
        return x

    @classmethod
    def from_pretrained(cls, folder) -> "TruetrainClassifier":
        """The module of an export folder, its weights loaded (strict), in eval mode."""
        from safetensors.torch import load_file

        folder = Path(folder)
        net = cls(json.loads((folder / "config.json").read_text()))
        net.load_state_dict(load_file(str(folder / "model.safetensors")), strict=True)
        return net.eval()
