"""The op library: each op's forward and backward in one place, stock (PyTorch's own ops,
autograd) or repro (bit-reproducible; the integer GEMM engine; parameter gradients as
exact sums in the step's :class:`GradBook`). A model calls these functions with a
:class:`ReproStep` for repro mode or ``None`` for stock, and is an ordinary
``torch.nn.Module`` either way."""

from .attention import bmm_exact, causal_attention, cross_entropy
from .book import GradBook
from .elementwise import gelu, layer_norm
from .linear import embedding, linear
from .step import ReproStep

__all__ = ["GradBook", "ReproStep", "bmm_exact", "causal_attention", "cross_entropy", "embedding", "gelu",
           "layer_norm", "linear"]
