"""The program of a job's step: the fixed list of operator applications one repro step is,
derived from the manifest (docs/onestep.md, "Trace and program").

Entry ``t`` is ``(kind, inputs, attributes)`` plus which of the kind's outputs it is and its
shape (the program fixes every tensor's shape, so its tree's depth). An input is a
:class:`Ref`: an earlier entry's output (``APP``), a tensor of the step's state (``STATE``:
the checkpoint's tensors in its encoding's order, sorted by name, so the state root is the
checkpoint hash's ``tensors_root``) or of the step's batch (``BATCH``: 0 the inputs, 1 the
targets; ids and labels are int32 tensors, one word each). A kind with several outputs (ReLU's
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
from ..numerics.tensor_merkle import words_of
from ..training.manifest import Manifest, load_manifest
from ..training.merkle import merkle_root
from ..training.models import param_shapes
from ..training.optim import init_state
from . import kind_names

APP, STATE, BATCH = 0, 1, 2

#: kind -> its inputs, attributes (in encoding order), outputs, float64-ness and verifier
#: contract: the one table (:mod:`.kind_names`), which every entry follows
KINDS = kind_names.KINDS
#: attributes whose values depend on the step (docs/onestep.md, "The program and the trace
#: builder"): written as 0 in the job's template. None: Adam's rate, the one value that
#: changes from step to step, is the batch tensor ``lr`` (:func:`derived_batch`), so a job's
#: steps share one program and the template is the program itself.
STEP_ATTRIBUTES: frozenset[tuple[str, str]] = frozenset()
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
        return KINDS[self.kind].words

    def encode(self, template: bool = False) -> bytes:
        """The entry's ABI encoding; ``template``: the step-dependent attributes as 0."""
        spec = KINDS[self.kind]
        names, outputs, given = spec.attributes, len(spec.outputs), self.attrs
        low, high = spec.arity()
        if tuple(given) != names or not 0 <= self.output < outputs or not low <= len(self.inputs) <= high:
            raise TraceError(f"{self.label or self.kind}: attributes {tuple(given)} / output {self.output} / "
                             f"{len(self.inputs)} inputs do not fit the kind {self.kind!r} ({names}, "
                             f"{outputs} outputs, inputs {spec.inputs})")
        flat: list[int] = []
        for name in names:
            value = 0 if template and (self.kind, name) in STEP_ATTRIBUTES else given[name]
            if isinstance(value, str):
                value = value.encode()
            if isinstance(value, (tuple, list, bytes)):
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
    (1, n·words), a matrix (its rows, its columns times words), a tensor of more dimensions
    its rows of the last one (the batched products' operands, the softmax's scores)."""
    shape = tuple(int(s) for s in shape)
    numel = int(np.prod(shape)) if shape else 1
    if len(shape) <= 1:
        return 1, numel * words
    return numel // shape[-1], shape[-1] * words


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

    def __init__(self, state: list[str], state_shapes: list[tuple[int, ...]], state_words: list[int],
                 batch: list[str], batch_shapes):
        self.entries: list[Application] = []
        self.state, self.state_shapes, self.state_words = state, state_shapes, state_words
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
        if ref.source == APP:
            return self.entries[ref.index].words
        return self.state_words[ref.index] if ref.source == STATE else 1

    def add(self, kind: str, inputs, out_shape, label: str = "", output: int = 0, **attributes) -> Ref:
        """Append one application (attributes in the kind's order) and return its output."""
        names = KINDS[kind].attributes
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
        """A linear map's weight gradient ``gᵀ a`` (``weight_grad_transposed`` of ``gᵀ``,
        ``aᵀ`` and the scales of ``a``'s rows: its one-step opens one row of each) and its
        bias gradient (column sums of ``g``: the rows of ``gᵀ``)."""
        rows = self.shape(a)[0]
        scales = self.add("row_scales", [a], (rows,), f"{label} row scales", limbs=limbs)
        gt = self.transpose(g, f"{label} output gradient transposed")
        at = self.transpose(a, f"{label} input transposed")
        out = {wname: self.add("weight_grad_transposed", [gt, at, scales], self.shape(self.state_ref(wname)),
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


def state_names(manifest: Manifest) -> tuple[list[str], list[tuple[int, ...]], list[int]]:
    """The step's state tensors by index, their shapes and words an element: a checkpoint's
    ``model.*`` and ``optim.*`` tensors in its encoding's order (sorted by UTF-8 name), so
    the state root is the checkpoint hash's ``tensors_root``."""
    params = {k: torch.empty(s) for k, s in param_shapes(manifest.model).items()}
    tensors = {**{"model." + k: v for k, v in params.items()},
               **{"optim." + k: v for k, v in init_state(manifest.optimizer, params).items()}}
    names = sorted(tensors, key=lambda n: n.encode())
    return names, [tuple(tensors[n].shape) for n in names], [words_of(tensors[n].dtype) for n in names]


def derive(manifest, *, lr_step: int = 0) -> Program:
    """The program of one step of ``manifest``'s job. The entries are the same for every
    step; the step-dependent attribute (:data:`STEP_ATTRIBUTES`) is computed from the
    manifest and the step's position: AdamW's learning rate from ``lr_step`` (the global
    inner step, the state's ``optim.lr_step``; :func:`step_scalars` gives it from a
    checkpoint). Dropout's key is a batch tensor (:func:`derived_batch`), not an attribute."""
    manifest = load_manifest(manifest)
    if not manifest.repro:
        raise TraceError("only a repro job's step has a program")
    if manifest.model.kind == "mlp":
        return _mlp(manifest)
    if manifest.model.kind == "lm":
        from .program_lm import lm_program

        return lm_program(manifest, lr_step)
    raise TraceError(f"the program of a {manifest.model.kind!r} model is not derived yet")


def step_scalars(manifest, ckpt) -> dict:
    """``derive``'s step arguments for the step from checkpoint ``ckpt``: ``lr_step`` (an
    AdamW state's)."""
    return {"lr_step": int(ckpt.tensors["optim.lr_step"])} if "optim.lr_step" in ckpt.tensors else {}


def optimizer_batch(manifest) -> tuple[list[str], list[tuple[int, ...]]]:
    """The batch tensors the update reads beside the model's: Adam's rate ``lr`` (0-dim)."""
    return (["lr"], [()]) if manifest.optimizer.kind in ("adam", "adamw") else ([], [])


def step_rate(manifest, lr_step: int) -> float:
    """Adam's rate in the step at global inner step ``lr_step``: AdamW's schedule there, plain
    Adam's constant rate (float32 values, as the engine's update uses them)."""
    return manifest.optimizer.lr_at(lr_step)


def derived_batch(program: Program, ckpt, device=None, manifest=None) -> list[torch.Tensor]:
    """The batch tensors the program derives beside the shard's inputs and targets (after
    them, in ``program.batch``'s order): ``positions`` (each token's position in its
    sequence, int32 words, the position embedding's scatter reads it) and ``dropout_key``
    (the step's dropout key, ``subkey(task key, "drop", step)``, as 8 int32 words, the
    big-endian words of its 32 bytes). Both parties derive them; the batch root commits to
    them as to the shard's."""
    from ..training.rng import subkey
    from ..training.trainer import DROPOUT_DOMAIN

    out = []
    for name, shape in zip(program.batch[2:], program.batch_shapes[2:]):
        if name == "positions":
            out.append(torch.arange(shape[-1], dtype=torch.int32, device=device).repeat(shape[0], 1))
        elif name == "dropout_key":
            words = np.frombuffer(subkey(ckpt.rng_key, DROPOUT_DOMAIN, ckpt.step), ">i4").astype(np.int32)
            out.append(torch.from_numpy(words.copy()).to(device))
        elif name == "lr" and manifest is not None:
            lr_step = int(ckpt.tensors["optim.lr_step"]) if "optim.lr_step" in ckpt.tensors else 0
            out.append(torch.tensor(step_rate(manifest, lr_step), dtype=torch.float32, device=device))
        else:
            raise TraceError(f"no derived batch tensor {name!r}")
    return out


def _mlp(manifest: Manifest) -> Program:
    """Linear layers with ReLU between them, the mean cross-entropy, SGD."""
    widths, limbs, rows = manifest.model.fc_widths, manifest.limbs, manifest.batch_size
    names, shapes = optimizer_batch(manifest)
    b = Builder(*state_names(manifest), ["inputs", "targets", *names], [(rows, widths[0]), (rows,), *shapes])
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
