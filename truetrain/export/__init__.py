"""Moving a model between truetrain and the tools users already run.

``export_model`` writes a global checkpoint's model as a transformers GPT-2 folder (the
LM) or as safetensors with a plain PyTorch module (the MLP and CNN); ``read_init`` reads
a user's weights (safetensors, or a GPT-2 / export folder) as a job's initial parameters.
Either way the tensors are copied exactly, and a model that does not map exactly is
refused by name (:class:`~truetrain.errors.ModelFormatError`).
"""

from .files import FORMAT_CLASSIFIER, FORMAT_GPT2, export_model, init_config, read_init
from .gpt2 import config_shape, gpt2_config, to_gpt2

__all__ = ["FORMAT_CLASSIFIER", "FORMAT_GPT2", "config_shape", "export_model", "gpt2_config", "init_config",
           "read_init", "to_gpt2"]
