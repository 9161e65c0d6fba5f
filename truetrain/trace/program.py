"""The program of a job's step: the fixed list of operator applications one repro step is,
derived from the manifest (docs/onestep.md, "Trace and program").

Entry ``t`` is ``(kind, inputs, attributes)`` plus which of the kind's outputs it is and its
shape (the program fixes every tensor's shape, so its tree's depth). An input is a
:class:`Ref`: an earlier entry's output (``APP``), a tensor of the step's state (``STATE``:
the checkpoint's ``model.*`` tensors in the model's parameter order, then its ``optim.*``
tensors in the optimizer's order) or of the step's batch (``BATCH``: 0 the inputs, 1 the
targets; ids and labels are committed as int32 words). A kind with several outputs (ReLU's
``(y, mask)``, an update's ``(p, buf)``) is one entry an output, with the same inputs: each
entry is one tensor, so level 3 descends one tree, and the one-step's call returns every
output and the game compares entry ``output``'s.

**Encoding** of entry ``t`` (its leaf is ``keccak256`` of it; the program root is
``MerkleCommitment``'s tree over the leaves in order, :func:`~truetrain.training.merkle.merkle_root`)::

    abi.encode(bytes32 keccak256(kind), uint256 output, uint256 words,
               uint256[] shape, uint256[] inputs, uint256[] attributes, uint256[] dims)

``words``: 1 for a float32 tensor, 2 for a float64 one (two words an element); an input
``source << 32 | index``; the attributes in the kind's order (:data:`KINDS`), a float as
its float32 (or, named so, float64) bits, a list as its length and then its items;
``dims``: each input's 2-D descriptor ``(rows, cols)`` as the one-step verifiers take it
(:func:`dims2`), two words an input. The step game (contracts/StepGame.sol) opens one leaf
and has every input's shape: a state or batch tensor's shape is in no other commitment,
and an earlier entry's would cost an opening of its own.

The program's **commitment** (what a job binds, :meth:`Program.commitment`) is
``keccak256(abi.encode(bytes32 root, uint256 entries, uint256[] layout))``: ``layout[s]``
is 1 + the entry whose output is state tensor ``s`` after the step, or 0 for a tensor the
step leaves as it is (the game checks a party's trace against its next state root with it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch
from eth_abi import encode

from ..errors import TraceError
from ..hashing import keccak256
from ..training.manifest import Manifest, load_manifest
from ..training.merkle import merkle_root
from ..training.models import param_shapes
from ..training.optim import init_state

APP, STATE, BATCH = 0, 1, 2

#: kind -> (attribute names in encoding order, outputs, the on-chain one-step or None where
#: it is not written yet). ``*_f64`` attributes are float64 bits.
KINDS: dict[str, tuple[tuple[str, ...], int, str | None]] = {
    "linear": (("limbs", "bias"), 1, "OneStepGemm.linearElement"),
    "relu": ((), 2, "OneStepElementwise.reluElement"),
    "apply_mask": ((), 1, "OneStepElementwise.applyMaskElement"),
    "add": ((), 1, "OneStepElementwise.addElement"),
    "permute": (("shape", "perm"), 1, "OneStepElementwise.permuteElement"),
    "embedding": ((), 1, "OneStepElementwise.embeddingElement"),
    "dropout": (("key", "site", "p_f64", "first"), 1, "OneStepElementwise.dropoutElement"),
    "gelu": ((), 1, "OneStepGelu.geluElement"),
    "gelu_backward": ((), 1, "OneStepGelu.geluBackwardElement"),
    "layernorm": (("eps_f64",), 1, "OneStepLayerNorm.layerNormElement"),
    "layernorm_backward": (("eps_f64",), 2, "OneStepLayerNorm.layerNormBackwardElement"),
    "column_sum": ((), 1, "OneStepExactSum.columnSumElement"),
    "scatter": (("rows",), 1, "OneStepExactSum.scatterElement"),
    "softmax_row_sum": ((), 1, "OneStepSoftmax.rowSumElement"),
    "softmax": ((), 1, "OneStepSoftmax.softmaxElement"),
    "softmax_backward": (("scale",), 1, "OneStepSoftmax.softmaxBackwardElement"),
    "xent_partial_sum": (("width",), 1, "OneStepXent.partialSumElement"),
    "xent_grad": (("total_rows",), 1, "OneStepXent.gradElement"),
    "xent_loss": ((), 1, "OneStepXent.lossElement"),
    "sgd": (("lr", "weight_decay", "momentum"), 2, "OneStepOptim.sgdElement"),
    "adam": (("lr", "weight_decay", "beta1", "beta2", "eps", "decoupled", "clipped"), 3,
             "OneStepOptim.adamElement"),
    "adam_powers": (("beta1", "beta2"), 2, "OneStepOptim.adamPowersElement"),
    # no one-step yet (issue 28's item 1, being written): the name and inputs are this
    # program's proposal
    "row_scales": (("limbs",), 1, None),  # (rows,) float32: a row's power-of-two scale
    "weight_grad": (("limbs",), 1, None),  # (g, a, row_scales(a)) -> dW = gᵀ a, (out, in)
    # (a, bt) -> float32(A[n] · Bt[n]ᵀ) · scale for n < N, A = part a_part of ``a`` viewed
    # (parts, N, M, K), Bt = part b_part of ``bt`` viewed (parts, N, P, K); output (N, M, P)
    "bmm": (("limbs", "scale", "a_part", "b_part"), 1, None),
    # the inputs' elements one after another (a flat concatenation) viewed as ``shape``,
    # permuted by ``perm`` (the attention's dq, dk, dv back into the qkv layout)
    "concat_permute": (("shape", "perm"), 1, None),
    "positions": (("seq_len",), 1, None),  # (rows,) int32 words: row r's position r mod seq_len
    "increment": ((), 1, None),  # a 0-dim int32 word plus one (AdamW's lr_step)
    # the clip factor (as truetrain/numerics/clip.py cuts it): every gradient, in the
    # parameters' order, cut into ranges of ``width`` values (the last of a tensor shorter):
    # each range's largest magnitude (float32), its integer sum of squares on the grid of
    # the largest of those (float64), then the norm (float64) and the factor (float32)
    "clip_max": (("width",), 1, None),
    "clip_sum": (("width", "count"), 1, None),
    "clip_factor": (("count", "clip_norm_f64"), 2, None),
}
#: kinds whose output is float64 (two words an element)
FLOAT64 = {"softmax_row_sum", "xent_partial_sum", "xent_loss", "clip_sum", ("clip_factor", 0)}
#: attributes whose values depend on the step (docs/onestep.md, "The program and the trace
#: builder"): written as 0 in the job's template
STEP_ATTRIBUTES = {("adam", "lr"), ("dropout", "key")}
#: the cross-entropy's widest block of columns (a row of 256 exps is over the gas limit)
XENT_BLOCK = 128
#: the clip factor's ranges of gradient values (one range opened by a one-step)
CLIP_WIDTH = 16384


@dataclass(frozen=True)
class Ref:
    """An input of an application: ``(source, index)``, source one of APP, STATE, BATCH."""

    source: int
    index: int

    def word(self) -> int:
        return self.source << 32 | self.index


@dataclass(frozen=True)
class Application:
    """One entry of a program (``label`` names it for people; it is not encoded)."""

    kind: str
    inputs: tuple[Ref, ...]
    shape: tuple[int, ...]
    attributes: tuple[tuple[str, object], ...] = ()
    output: int = 0
    label: str = ""
    dims: tuple[int, ...] = ()

    @property
    def attrs(self) -> dict:
        return dict(self.attributes)

    @property
    def words(self) -> int:
        return 2 if self.kind in FLOAT64 or (self.kind, self.output) in FLOAT64 else 1

    def encode(self, template: bool = False) -> bytes:
        """The entry's ABI encoding; ``template``: the step-dependent attributes as 0."""
        names, outputs, _ = KINDS[self.kind]
        given = self.attrs
        if tuple(given) != names or not 0 <= self.output < outputs:
            raise TraceError(f"{self.label or self.kind}: attributes {tuple(given)} / output {self.output} "
                             f"do not fit the kind {self.kind!r} ({names}, {outputs} outputs)")
        flat: list[int] = []
        for name in names:
            value = 0 if template and (self.kind, name) in STEP_ATTRIBUTES else given[name]
            if isinstance(value, str):
                value = value.encode()
            if isinstance(value, bytes) and name == "key":
                flat.append(int.from_bytes(value, "big"))
            elif isinstance(value, (tuple, list, bytes)):
                flat += [len(value), *map(int, value)]
            elif isinstance(value, float):
                flat.append(_f64_bits(value) if name.endswith("_f64") else _f32_bits(value))
            else:
                flat.append(int(value))
        return encode(ENTRY_TYPES, [keccak256(self.kind.encode()), self.output, self.words, list(self.shape),
                                    [r.word() for r in self.inputs], flat, list(self.dims)])


#: the ABI types of an entry's encoding
ENTRY_TYPES = ["bytes32", "uint256", "uint256", "uint256[]", "uint256[]", "uint256[]", "uint256[]"]


def dims2(shape, words: int = 1) -> tuple[int, int]:
    """A tensor's 2-D descriptor ``(rows, cols)``: a 0-dim one (1, words), a vector
    (1, n·words), else (its first dimension, the rest times words)."""
    shape = tuple(int(s) for s in shape)
    numel = int(np.prod(shape)) if shape else 1
    if len(shape) <= 1:
        return 1, numel * words
    return shape[0], numel // shape[0] * words


def _f32_bits(v: float) -> int:
    return int(np.float32(v).view(np.uint32))


def _f64_bits(v: float) -> int:
    return int(np.float64(v).view(np.uint64))


@dataclass(frozen=True)
class Program:
    """A step's applications, the state and batch tensors they read, and which entry gives
    each state tensor's value after the step (``updates``: state index -> entry index)."""

    entries: tuple[Application, ...]
    state: tuple[str, ...]
    state_shapes: tuple[tuple[int, ...], ...]
    batch: tuple[str, ...]
    batch_shapes: tuple[tuple[int, ...], ...]
    updates: dict[int, int] = field(default_factory=dict)
    scalars: tuple[tuple[str, object], ...] = ()  # the step's values of STEP_ATTRIBUTES' sources

    def __len__(self) -> int:
        return len(self.entries)

    def leaves(self) -> list[bytes]:
        return [keccak256(a.encode()) for a in self.entries]

    @cached_property
    def root_hash(self) -> bytes:
        return merkle_root(self.leaves())

    def root(self) -> bytes:
        """The program root: MerkleCommitment's tree over the entries' leaves (this step's)."""
        return self.root_hash

    def layout(self) -> list[int]:
        """Per state tensor: 1 + the entry that gives it after the step, 0 if none does."""
        return [self.updates[s] + 1 if s in self.updates else 0 for s in range(len(self.state))]

    def commitment(self) -> bytes:
        """What a job binds: ``keccak256(abi.encode(root, entries, layout))``."""
        return keccak256(encode(["bytes32", "uint256", "uint256[]"], [self.root(), len(self.entries), self.layout()]))

    def template_root(self) -> bytes:
        """The job's program root: the same tree with the step-dependent attributes as 0
        (every step of a job has this template)."""
        return merkle_root([keccak256(a.encode(template=True)) for a in self.entries])


class Builder:
    """Appends applications and hands back their references."""

    def __init__(self, state: list[str], state_shapes: list[tuple[int, ...]], batch: list[str], batch_shapes):
        self.entries: list[Application] = []
        self.state, self.state_shapes = state, state_shapes
        self.batch, self.batch_shapes = batch, [tuple(s) for s in batch_shapes]
        self.updates: dict[int, int] = {}
        self.scalars: dict[str, object] = {}

    def state_ref(self, name: str) -> Ref:
        return Ref(STATE, self.state.index(name))

    def shape(self, ref: Ref) -> tuple[int, ...]:
        if ref.source == APP:
            return self.entries[ref.index].shape
        return (self.state_shapes if ref.source == STATE else self.batch_shapes)[ref.index]

    def words(self, ref: Ref) -> int:
        return self.entries[ref.index].words if ref.source == APP else 1

    def add(self, kind: str, inputs, out_shape, label: str = "", output: int = 0, **attributes) -> Ref:
        """Append one application (attributes in the kind's order) and return its output."""
        names = KINDS[kind][0]
        inputs = tuple(inputs)
        dims = tuple(d for r in inputs for d in dims2(self.shape(r), self.words(r)))
        app = Application(kind, inputs, tuple(int(s) for s in out_shape),
                          tuple((n, attributes[n]) for n in names), output, label, dims)
        if set(attributes) != set(names):
            raise TraceError(f"{label}: {kind} takes {names}, given {sorted(attributes)}")
        self.entries.append(app)
        return Ref(APP, len(self.entries) - 1)

    def outputs(self, kind: str, inputs, shapes, label: str, **attributes) -> list[Ref]:
        """One entry an output of a multi-output kind (same inputs and attributes)."""
        return [self.add(kind, inputs, shape, label, output=i, **attributes) for i, shape in enumerate(shapes)]

    def transpose(self, ref: Ref, label: str) -> Ref:
        rows, cols = self.shape(ref)
        return self.add("permute", [ref], (cols, rows), label, shape=(rows, cols), perm=(1, 0))

    def linear(self, a: Ref, bt: Ref, bias: Ref | None, limbs: int, label: str) -> Ref:
        rows, out = self.shape(a)[0], self.shape(bt)[0]
        inputs = [a, bt] + ([bias] if bias is not None else [])
        return self.add("linear", inputs, (rows, out), label, limbs=limbs, bias=int(bias is not None))

    def param_grads(self, g: Ref, a: Ref, wname: str, bname: str | None, limbs: int, label: str) -> dict[str, Ref]:
        """A linear map's weight gradient ``gᵀ a`` (from ``aᵀ``, ``gᵀ`` and the scales of
        ``a``'s rows) and its bias gradient (column sums of ``g``: the rows of ``gᵀ``)."""
        rows = self.shape(a)[0]
        scales = self.add("row_scales", [a], (rows,), f"{label} row scales", limbs=limbs)
        gt = self.transpose(g, f"{label} output gradient transposed")
        at = self.transpose(a, f"{label} input transposed")
        out = {wname: self.add("weight_grad", [at, gt, scales], self.shape(self.state_ref(wname)),
                               f"{label} weight gradient", limbs=limbs)}
        if bname:
            out[bname] = self.add("column_sum", [gt], (self.shape(g)[1],), f"{label} bias gradient")
        return out

    def cross_entropy(self, logits: Ref, labels: Ref, total_rows: int, label: str) -> Ref:
        """Partial sums, then the loss (kept for the metrics) and the gradient; returns the
        gradient's reference."""
        rows, classes = self.shape(logits)
        width = min(classes, XENT_BLOCK)
        blocks = -(-classes // width)
        parts = self.add("xent_partial_sum", [logits], (rows, blocks), f"{label} partial sums", width=width)
        self.add("xent_loss", [logits, parts, labels], (rows,), f"{label} loss")
        return self.add("xent_grad", [logits, parts, labels], (rows, classes), f"{label} gradient",
                        total_rows=total_rows)

    def program(self) -> Program:
        return Program(tuple(self.entries), tuple(self.state), tuple(self.state_shapes), tuple(self.batch),
                       tuple(self.batch_shapes), dict(self.updates), tuple(self.scalars.items()))


def state_names(manifest: Manifest) -> tuple[list[str], list[tuple[int, ...]]]:
    """The step's state tensors by index: the parameters in the model's order, then the
    optimizer's tensors in its order (a checkpoint's ``model.*`` and ``optim.*``)."""
    shapes = param_shapes(manifest.model)
    params = {k: torch.empty(s) for k, s in shapes.items()}
    optim = init_state(manifest.optimizer, params)
    names = ["model." + k for k in shapes] + ["optim." + k for k in optim]
    return names, [tuple(shapes[k]) for k in shapes] + [tuple(v.shape) for v in optim.values()]


def derive(manifest, *, lr_step: int = 0, dropout_key: bytes | None = None) -> Program:
    """The program of one step of ``manifest``'s job. The entries are the same for every
    step; the step-dependent attributes (:data:`STEP_ATTRIBUTES`) are computed from the
    manifest and the step's position: AdamW's learning rate from ``lr_step`` (the global
    inner step, the state's ``optim.lr_step``), dropout's key (the step's, from the task's
    key and the step number; None: the template's 0). :func:`step_scalars` gives both from
    a checkpoint."""
    manifest = load_manifest(manifest)
    if not manifest.repro:
        raise TraceError("only a repro job's step has a program")
    if manifest.model.kind == "mlp":
        return _mlp(manifest)
    if manifest.model.kind == "lm":
        from .program_lm import lm_program

        return lm_program(manifest, lr_step, dropout_key)
    raise TraceError(f"the program of a {manifest.model.kind!r} model is not derived yet")


def step_scalars(manifest, ckpt) -> dict:
    """``derive``'s step arguments for the step from checkpoint ``ckpt``: ``lr_step`` (an
    AdamW state's) and the dropout key (a model with dropout)."""
    from ..training.rng import subkey
    from ..training.trainer import DROPOUT_DOMAIN

    manifest = load_manifest(manifest)
    out: dict = {}
    if "optim.lr_step" in ckpt.tensors:
        out["lr_step"] = int(ckpt.tensors["optim.lr_step"])
    if getattr(manifest.model, "dropout", 0):
        out["dropout_key"] = subkey(ckpt.rng_key, DROPOUT_DOMAIN, ckpt.step)
    return out


def _mlp(manifest: Manifest) -> Program:
    """Linear layers with ReLU between them, the mean cross-entropy, SGD."""
    widths, limbs, rows = manifest.model.fc_widths, manifest.limbs, manifest.batch_size
    b = Builder(*state_names(manifest), ["inputs", "targets"], [(rows, widths[0]), (rows,)])
    x, labels = Ref(BATCH, 0), Ref(BATCH, 1)
    acts, masks = [x], []
    for j in range(len(widths) - 1):
        w, bias = b.state_ref(f"model.fc.{j}.weight"), b.state_ref(f"model.fc.{j}.bias")
        z = b.linear(acts[-1], w, bias, limbs, f"fc.{j} forward")
        if j < len(widths) - 2:
            y, mask = b.outputs("relu", [z], [b.shape(z)] * 2, f"fc.{j} relu")
            acts.append(y)
            masks.append(mask)
        else:
            logits = z
    g = b.cross_entropy(logits, labels, rows, "loss")
    grads: dict[str, Ref] = {}
    for j in reversed(range(len(widths) - 1)):
        grads.update(b.param_grads(g, acts[j], f"model.fc.{j}.weight", f"model.fc.{j}.bias", limbs, f"fc.{j}"))
        if j:
            wt = b.transpose(b.state_ref(f"model.fc.{j}.weight"), f"fc.{j} weight transposed")
            da = b.linear(g, wt, None, limbs, f"fc.{j} input gradient")
            g = b.add("apply_mask", [da, masks[j - 1]], b.shape(da), f"fc.{j - 1} relu backward")
    from .program_optim import update

    update(b, manifest, {k.removeprefix("model."): v for k, v in grads.items()},
           [k.removeprefix("model.") for k in param_shapes(manifest.model)], 0)
    return b.program()
