"""The step game's kinds as its kind contracts register them (contracts/numerics/StepKinds*.sol):
each kind's name (the program's ``keccak256(kind)``), inputs, attributes in encoding order,
outputs and the contract that computes its one-step (docs/onestep.md, "The step game").

:data:`program.KINDS <truetrain.trace.program.KINDS>` names the kinds the derived programs
use; this table is the contracts' side of every kind past ``StepKindsCore`` /
``StepKindsXent``, and the one place the names of the kinds ``program.py`` does not name yet
are defined (``weight_grad_transposed``, ``clip_max``, ``clip_sum``, ``pool``, ``unpool``,
``fedavg``, ``diloco``). Where the two tables differ (``bmm``, ``layernorm_backward``,
``clip_factor``: the verifier needs other attributes than the program's first proposal)
a program must follow this one for its entries to verify. Attributes encode as the program
encodes them: a float as its float32 bits (``_f64``: float64), a list as its length then
its items (a dropout site as its UTF-8 bytes, one a word)."""

from __future__ import annotations

from dataclasses import dataclass

ROW_SCALES = "row_scales"
WEIGHT_GRAD = "weight_grad"
WEIGHT_GRAD_TRANSPOSED = "weight_grad_transposed"
BMM = "bmm"
GELU = "gelu"
GELU_BACKWARD = "gelu_backward"
LAYERNORM = "layernorm"
LAYERNORM_BACKWARD = "layernorm_backward"
ADAM = "adam"
ADAM_POWERS = "adam_powers"
FEDAVG = "fedavg"
DILOCO = "diloco"
CLIP_MAX = "clip_max"
CLIP_SUM = "clip_sum"
CLIP_FACTOR = "clip_factor"
EMBEDDING = "embedding"
SCATTER = "scatter"
DROPOUT = "dropout"
POOL = "pool"
UNPOOL = "unpool"


@dataclass(frozen=True)
class KindSpec:
    """A kind's verifier contract, its inputs (in order; ``*`` a variable number), its
    attributes (in encoding order), its outputs and whether they are float64."""

    contract: str
    inputs: tuple[str, ...]
    attributes: tuple[str, ...]
    outputs: tuple[str, ...]
    float64: bool = False


KINDS: dict[str, KindSpec] = {
    ROW_SCALES: KindSpec("StepKindsQuant", ("a",), ("limbs",), ("scales",)),
    WEIGHT_GRAD: KindSpec("StepKindsQuant", ("g", "a", "row_scales(a)"), ("limbs",), ("dW",)),
    WEIGHT_GRAD_TRANSPOSED: KindSpec("StepKindsQuant", ("g.T", "a.T", "row_scales(a)"), ("limbs",), ("dW",)),
    BMM: KindSpec("StepKindsQuant", ("a", "b.T"), ("limbs", "scale"), ("out",)),
    GELU: KindSpec("StepKindsNorm", ("x",), (), ("y",)),
    GELU_BACKWARD: KindSpec("StepKindsNorm", ("x", "g"), (), ("dx",)),
    LAYERNORM: KindSpec("StepKindsNorm", ("x", "weight", "bias"), ("eps_f64",), ("y",)),
    LAYERNORM_BACKWARD: KindSpec("StepKindsNorm", ("x", "g", "weight"), ("eps_f64",), ("dx", "g_xhat")),
    ADAM: KindSpec("StepKindsOptim", ("p", "g", "m", "v", "beta1_power", "beta2_power", "clip_factor?"),
                   ("lr", "weight_decay", "beta1", "beta2", "eps", "decoupled", "clipped"), ("p", "m", "v")),
    ADAM_POWERS: KindSpec("StepKindsOptim", ("beta1_power", "beta2_power"), ("beta1", "beta2"),
                          ("beta1_power", "beta2_power")),
    FEDAVG: KindSpec("StepKindsOptim", ("contributions*",), ("weights",), ("model",)),
    DILOCO: KindSpec("StepKindsOptim", ("theta", "momentum?", "contributions*"),
                     ("lr", "momentum", "nesterov", "weights"), ("model", "momentum")),
    CLIP_MAX: KindSpec("StepKindsOptim", ("gradients*",), ("width",), ("maxima",)),
    CLIP_SUM: KindSpec("StepKindsOptim", ("gradients*", "maxima"), ("width", "count"), ("sums",), True),
    CLIP_FACTOR: KindSpec("StepKindsOptim", ("maxima", "sums"), ("count", "clip_norm_f64"), ("factor",)),
    EMBEDDING: KindSpec("StepKindsData", ("ids", "table"), (), ("rows",)),
    SCATTER: KindSpec("StepKindsData", ("g.T", "ids"), ("rows",), ("table_grad",)),
    DROPOUT: KindSpec("StepKindsData", ("x", "key"), ("site", "p_f64", "first"), ("y",)),
    POOL: KindSpec("StepKindsData", ("a",), ("shape",), ("out", "mask")),
    UNPOOL: KindSpec("StepKindsData", ("g", "mask"), ("shape",), ("dx",)),
}

#: the kind contracts of StepGame's deployment, each with the kinds it registers
CONTRACTS: dict[str, tuple[str, ...]] = {
    "StepKindsCore": ("linear", "relu", "apply_mask", "add", "permute", "column_sum", "sgd"),
    "StepKindsXent": ("xent_partial_sum", "xent_grad", "xent_loss", "softmax_row_sum", "softmax",
                      "softmax_backward"),
    **{c: tuple(k for k, s in KINDS.items() if s.contract == c)
       for c in ("StepKindsQuant", "StepKindsNorm", "StepKindsOptim", "StepKindsData")},
}
