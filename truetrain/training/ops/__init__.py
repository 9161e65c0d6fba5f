"""The op library: each op's forward and backward in one place, stock (PyTorch's own ops,
autograd) or repro (bit-reproducible; the integer GEMM engine; parameter gradients as
exact sums in the step's :class:`GradBook`). A model calls these functions with a
:class:`ReproStep` for repro mode or ``None`` for stock, and is an ordinary
``torch.nn.Module`` either way; :func:`repro_gradients` takes one repro step's gradients
of any such model."""

from .attention import bmm_exact, causal_attention
from .book import GradBook
from .conv import conv2d, max_pool2x2, relu
from .dropout import dropout
from .elementwise import gelu, layer_norm
from .linear import embedding, linear
from .loss import cross_entropy, softmax_xent
from .step import ReproStep, repro_gradients

__all__ = ["GradBook", "ReproStep", "bmm_exact", "causal_attention", "conv2d", "cross_entropy", "dropout", "embedding",
           "gelu", "layer_norm", "linear", "max_pool2x2", "relu", "repro_gradients", "softmax_xent"]
