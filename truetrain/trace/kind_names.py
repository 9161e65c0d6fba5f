"""The one table of the step's kinds (docs/onestep.md, "The step game"): each kind's name (the
program's ``keccak256(kind)``), inputs, attributes in encoding order, outputs, whether they
are float64, and the contract that computes its one-step (contracts/numerics/StepKinds*.sol,
registered in StepGame). The programs (:mod:`.program`, :mod:`.program_lm`,
:mod:`.program_optim`) take every entry's attributes, outputs and words from here, so
every entry they derive is one a kind contract verifies. Attributes encode as the program
encodes them: a float as its float32 bits (``_f64``: float64), a list as its length then
its items (a dropout site as its UTF-8 bytes, one a word).

Inputs: ``?`` an optional input (the last one, or adam's clip factor before its rate), ``*``
one or more. Adam's rate is an input, a 0-dim batch tensor (the step's rate, ``lr`` in
``derived_batch``), and its ``lr`` attribute is 0: so one program holds for every step of a
job and its root is the one the job binds."""

from __future__ import annotations

from dataclasses import dataclass

LINEAR = "linear"
RELU = "relu"
APPLY_MASK = "apply_mask"
ADD = "add"
PERMUTE = "permute"
COLUMN_SUM = "column_sum"
SGD = "sgd"
XENT_PARTIAL_SUM = "xent_partial_sum"
XENT_GRAD = "xent_grad"
XENT_LOSS = "xent_loss"
SOFTMAX_ROW_SUM = "softmax_row_sum"
SOFTMAX = "softmax"
SOFTMAX_BACKWARD = "softmax_backward"
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
INCREMENT = "increment"
EMBEDDING = "embedding"
SCATTER = "scatter"
DROPOUT = "dropout"
POOL = "pool"
UNPOOL = "unpool"


@dataclass(frozen=True)
class KindSpec:
    """A kind's verifier contract, its inputs (in order; ``*`` a variable number), its
    attributes (in encoding order), its outputs and whether they are float64 or int64 (two
    words an element, high first)."""

    contract: str
    inputs: tuple[str, ...]
    attributes: tuple[str, ...]
    outputs: tuple[str, ...]
    float64: bool = False
    int64: bool = False

    @property
    def words(self) -> int:
        """Words an element of its outputs (tensor_merkle's layout)."""
        return 2 if self.float64 or self.int64 else 1

    def arity(self) -> tuple[int, float]:
        """The fewest and most inputs an entry of the kind reads."""
        need = sum(1 for i in self.inputs if not i.endswith("?"))
        return need, float("inf") if any(i.endswith("*") for i in self.inputs) else len(self.inputs)


KINDS: dict[str, KindSpec] = {
    LINEAR: KindSpec("StepKindsCore", ("a", "bt", "bias?"), ("limbs", "bias"), ("y",)),
    RELU: KindSpec("StepKindsCore", ("h",), (), ("y", "mask")),
    APPLY_MASK: KindSpec("StepKindsCore", ("g", "mask"), (), ("dx",)),
    ADD: KindSpec("StepKindsCore", ("a", "b"), (), ("y",)),
    PERMUTE: KindSpec("StepKindsCore", ("x*",), ("shape", "perm"), ("y",)),
    COLUMN_SUM: KindSpec("StepKindsCore", ("v.T",), (), ("sums",)),
    SGD: KindSpec("StepKindsCore", ("p", "g", "momentum?"), ("lr", "weight_decay", "momentum"), ("p", "momentum")),
    XENT_PARTIAL_SUM: KindSpec("StepKindsXent", ("logits",), ("width",), ("partial_sums",), True),
    XENT_GRAD: KindSpec("StepKindsXent", ("logits", "partial_sums", "labels"), ("total_rows",), ("dlogits",)),
    XENT_LOSS: KindSpec("StepKindsXent", ("logits", "partial_sums", "labels"), (), ("losses",), True),
    SOFTMAX_ROW_SUM: KindSpec("StepKindsXent", ("scores",), (), ("sums",), True),
    SOFTMAX: KindSpec("StepKindsXent", ("scores", "sums"), (), ("p",)),
    SOFTMAX_BACKWARD: KindSpec("StepKindsXent", ("p", "dp"), ("scale",), ("ds",)),
    ROW_SCALES: KindSpec("StepKindsQuant", ("a",), ("limbs",), ("scales",)),
    WEIGHT_GRAD: KindSpec("StepKindsQuant", ("g", "a", "row_scales(a)"), ("limbs",), ("dW",)),
    WEIGHT_GRAD_TRANSPOSED: KindSpec("StepKindsQuant", ("g.T", "a.T", "row_scales(a)"), ("limbs",), ("dW",)),
    BMM: KindSpec("StepKindsQuant", ("a", "b.T"), ("limbs", "scale", "a_part", "b_part"), ("out",)),
    GELU: KindSpec("StepKindsNorm", ("x",), (), ("y",)),
    GELU_BACKWARD: KindSpec("StepKindsNorm", ("x", "g"), (), ("dx",)),
    LAYERNORM: KindSpec("StepKindsNorm", ("x", "weight", "bias"), ("eps_f64",), ("y",)),
    LAYERNORM_BACKWARD: KindSpec("StepKindsNorm", ("x", "g", "weight"), ("eps_f64",), ("dx", "g_xhat")),
    ADAM: KindSpec("StepKindsOptim", ("p", "g", "m", "v", "beta1_power", "beta2_power", "clip_factor?", "lr"),
                   ("lr", "weight_decay", "beta1", "beta2", "eps", "decoupled", "clipped"), ("p", "m", "v")),
    ADAM_POWERS: KindSpec("StepKindsOptim", ("beta1_power", "beta2_power"), ("beta1", "beta2"),
                          ("beta1_power", "beta2_power")),
    FEDAVG: KindSpec("StepKindsOptim", ("contributions*",), ("weights",), ("model",)),
    DILOCO: KindSpec("StepKindsOptim", ("theta", "momentum?", "contributions*"),
                     ("lr", "momentum", "nesterov", "weights"), ("model", "momentum")),
    CLIP_MAX: KindSpec("StepKindsOptim", ("gradients*",), ("width",), ("maxima",)),
    CLIP_SUM: KindSpec("StepKindsOptim", ("gradients*", "maxima"), ("width", "count"), ("sums",), True),
    CLIP_FACTOR: KindSpec("StepKindsOptim", ("maxima", "sums"), ("count", "clip_norm_f64"), ("factor",)),
    INCREMENT: KindSpec("StepKindsOptim", ("step",), (), ("step",), int64=True),
    EMBEDDING: KindSpec("StepKindsData", ("ids", "table"), (), ("rows",)),
    SCATTER: KindSpec("StepKindsData", ("g.T", "ids"), ("rows",), ("table_grad",)),
    DROPOUT: KindSpec("StepKindsData", ("x", "key"), ("site", "p_f64", "first"), ("y",)),
    POOL: KindSpec("StepKindsData", ("a",), ("shape",), ("out", "mask")),
    UNPOOL: KindSpec("StepKindsData", ("g", "mask"), ("shape",), ("dx",)),
}

#: the kind contracts of StepGame's deployment, each with the kinds it registers
CONTRACTS: dict[str, tuple[str, ...]] = {
    c: tuple(k for k, s in KINDS.items() if s.contract == c)
    for c in ("StepKindsCore", "StepKindsXent", "StepKindsQuant", "StepKindsNorm", "StepKindsOptim", "StepKindsData")}
