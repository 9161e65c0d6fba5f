"""A model cut into stages by layers: the plan, the stage modules, stage checkpoints.

A model is a sequence of **units**, its layers in order: for the transformer LM
``embed`` (token and position embeddings), ``block.0`` ... ``block.{L-1}`` and ``head``
(final LayerNorm and the output projection); for an MLP ``fc.0`` ... ``fc.{n-1}`` (each
followed by its ReLU but the last). A :class:`StagePlan` cuts the units into S contiguous,
non-empty runs: stage 0 holds the embeddings, the last stage the head.

**The tied embedding.** The LM's head reuses ``tok_emb``. With S > 1 the first and the
last stage each hold a *replica* of ``tok_emb`` (and of its optimizer state). Each stage
takes its own exact contribution to the gradient (the embedding's scattered rows on stage
0, the head's product on the last), rounded once to float32 as the single-process
:class:`~..ops.GradBook` rounds each contribution; the two stages swap their parts and
both form ``head + rows``, the very float32 sum the single process forms. Both replicas
then take the same update, bit for bit (:func:`merge_checkpoints` checks they agree). An
untied head for pipelined jobs would change the model, so a pipelined job could not equal
the single-machine run. Stage 0 owning the table and sending the updated weights down
each step moves as many bytes (the head's part up, the weights down) and spares the
replica's Adam moments, but puts stage 0's update before the last stage's next forward
and makes the last stage's weights an upstream message rather than its own state. A
replica costs ``vocab x d_model`` parameters and their two moments on the last stage
(64 Ki values each at d_model 256). The global-norm clip counts
``tok_emb`` once, on stage 0 (:meth:`StagePlan.norm_names`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ...errors import CheckpointError, PipelineError
from ..checkpoint import Checkpoint
from ..lm import LMSpec, _Affine, _Block, lm_block, lm_embed, lm_head
from ..models import ModelSpec, param_shapes
from ..ops import ReproStep, cross_entropy, linear, relu

TIED = "tok_emb"  # the LM's embedding, also its output projection


def model_units(spec) -> tuple[str, ...]:
    """The model's layers in order, as a plan cuts them."""
    if isinstance(spec, LMSpec):
        return ("embed", *(f"block.{i}" for i in range(spec.n_layers)), "head")
    if isinstance(spec, ModelSpec) and spec.kind == "mlp":
        return tuple(f"fc.{j}" for j in range(len(spec.fc_widths) - 1))
    raise PipelineError(f"model kind {getattr(spec, 'kind', spec)!r} does not split into stages "
                        f"(the transformer LM and the MLP do)")


def unit_params(spec, unit: str) -> list[str]:
    """The parameter names a unit reads (``head``: the final LayerNorm's and ``tok_emb``)."""
    if unit == "embed":
        return [TIED, "pos_emb"]
    if unit == "head":
        return ["ln_f.weight", "ln_f.bias", TIED]
    kind, index = unit.split(".")
    prefix = f"blocks.{index}." if kind == "block" else f"fc.{index}."
    return [name for name in param_shapes(spec) if name.startswith(prefix)]


@dataclass(frozen=True)
class StagePlan:
    """Which units each stage holds: stage ``s`` holds ``units[starts[s]:starts[s + 1]]``."""

    spec: object  # an LMSpec or an MLP's ModelSpec
    starts: tuple[int, ...]  # each stage's first unit; starts[0] == 0

    def __post_init__(self):
        n = len(model_units(self.spec))
        starts = tuple(self.starts)
        if not starts or starts[0] != 0 or any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] >= n:
            raise PipelineError(f"stage starts {list(starts)}: expected 0 then strictly increasing unit "
                                f"indices below {n} (the model has {n} units: {', '.join(model_units(self.spec))})")

    @property
    def stages(self) -> int:
        return len(self.starts)

    @property
    def units(self) -> tuple[str, ...]:
        return model_units(self.spec)

    def units_of(self, s: int) -> tuple[str, ...]:
        ends = (*self.starts[1:], len(self.units))
        return self.units[self.starts[s]:ends[s]]

    def param_names(self, s: int) -> list[str]:
        """The parameters stage ``s`` holds (a tied replica included), in model order."""
        names: list[str] = []
        for unit in self.units_of(s):
            names += [n for n in unit_params(self.spec, unit) if n not in names]
        return names

    def tied_partner(self, s: int) -> int | None:
        """The other stage holding ``tok_emb`` (None: no replica on either side)."""
        if not isinstance(self.spec, LMSpec) or self.stages == 1 or s not in (0, self.stages - 1):
            return None
        return self.stages - 1 - s

    def norm_names(self, s: int) -> list[str]:
        """The gradients stage ``s`` adds to the global norm: each parameter once (the
        last stage leaves its ``tok_emb`` replica to stage 0)."""
        names = self.param_names(s)
        return [n for n in names if not (n == TIED and s > 0 and self.tied_partner(s) is not None)]

    def param_counts(self) -> list[int]:
        """Parameters (float32 values) each stage holds."""
        shapes = param_shapes(self.spec)
        return [sum(math.prod(shapes[n]) for n in self.param_names(s)) for s in range(self.stages)]


def split_at(spec, starts) -> StagePlan:
    """An explicit split: ``starts`` are the unit indices where stages begin (``[0, 2, 4]``:
    for a 4-block LM, stage 0 = embed + block.0, stage 1 = block.1-2, stage 2 = block.3 + head)."""
    return StagePlan(spec, tuple(int(s) for s in starts))


def split_by_params(spec, stages: int) -> StagePlan:
    """The split into ``stages`` stages whose largest holds the fewest parameters (the tied
    replica counted on the head); ties go to the plan that starts each stage earliest."""
    units = model_units(spec)
    if not 1 <= stages <= len(units):
        raise PipelineError(f"stages: expected 1 to {len(units)} for this model, got {stages}")
    shapes = param_shapes(spec)
    cost = [sum(math.prod(shapes[n]) for n in unit_params(spec, u)) for u in units]
    prefix = [0]
    for c in cost:
        prefix.append(prefix[-1] + c)
    n = len(units)
    # best[k][i]: (largest stage, starts) over splits of units[:i] into k stages
    best: list[dict[int, tuple[int, tuple[int, ...]]]] = [{0: (0, ())}]
    for k in range(1, stages + 1):
        row = {}
        for i in range(k, n - (stages - k) + 1):
            row[i] = min((max(best[k - 1][j][0], prefix[i] - prefix[j]), best[k - 1][j][1] + (j,))
                         for j in range(k - 1, i) if j in best[k - 1])
        best.append(row)
    return StagePlan(spec, best[stages][n][1])


class LMStage(nn.Module):
    """The units of a transformer LM one stage holds, under the whole model's parameter
    names (``blocks.3.attn.qkv.weight`` stays that). ``forward`` maps byte ids (stage 0) or
    the residual stream (B, T, d) to the residual stream, or logits on the last stage."""

    def __init__(self, spec: LMSpec, units: tuple[str, ...]):
        super().__init__()
        self.spec, self.dropout_key = spec, None
        self.embeds, self.heads = "embed" in units, "head" in units
        self.block_ids = [int(u.split(".")[1]) for u in units if u.startswith("block.")]
        d = spec.d_model
        if self.embeds or self.heads:
            self.tok_emb = nn.Parameter(torch.empty(spec.vocab, d))
        if self.embeds:
            self.pos_emb = nn.Parameter(torch.empty(spec.seq_len, d))
        self.blocks = nn.ModuleDict({str(i): _Block(spec) for i in self.block_ids})
        if self.heads:
            self.ln_f = _Affine(d)

    def forward(self, x: torch.Tensor, step: ReproStep) -> torch.Tensor:
        if self.embeds:
            x = lm_embed(self, x, step)
        for i in self.block_ids:
            x = lm_block(self, i, self.blocks[str(i)], x, step)
        return lm_head(self, x, step) if self.heads else x

    def loss(self, logits, targets, step: ReproStep, rows: int, losses: list) -> torch.Tensor:
        return cross_entropy(logits.reshape(-1, self.spec.vocab), targets.reshape(-1), step, rows, losses)


class MLPStage(nn.Module):
    """The dense layers of an MLP one stage holds (``fc.{j}``), each but the model's last
    followed by its ReLU."""

    def __init__(self, spec: ModelSpec, units: tuple[str, ...]):
        super().__init__()
        self.spec, self.dropout_key = spec, None
        self.layers = [int(u.split(".")[1]) for u in units]
        w = spec.fc_widths
        self.fc = nn.ModuleDict({str(j): _Affine(w[j + 1], w[j]) for j in self.layers})

    def forward(self, x: torch.Tensor, step: ReproStep) -> torch.Tensor:
        for j in self.layers:
            fc = self.fc[str(j)]
            x = linear(x, fc.weight, fc.bias, step, f"fc.{j}")
            if j < len(self.spec.fc_widths) - 2:
                x = relu(x, step)
        return x

    def loss(self, logits, targets, step: ReproStep, rows: int, losses: list) -> torch.Tensor:
        return cross_entropy(logits, targets, step, rows, losses)


def build_stage_module(plan: StagePlan, s: int, params: dict[str, torch.Tensor]) -> nn.Module:
    """Stage ``s``'s module holding copies of ``params`` (exactly its parameters)."""
    cls = LMStage if isinstance(plan.spec, LMSpec) else MLPStage
    module = cls(plan.spec, plan.units_of(s))
    shapes = param_shapes(plan.spec)
    want = plan.param_names(s)
    if set(params) != set(want):
        raise CheckpointError(f"stage {s} checkpoint holds {sorted(params)}, the plan gives it {sorted(want)}")
    for name in want:
        if tuple(params[name].shape) != shapes[name] or params[name].dtype != torch.float32:
            raise CheckpointError(f"{name}: expected float32 {shapes[name]}, got "
                                  f"{params[name].dtype} {tuple(params[name].shape)}")
    module.load_state_dict({k: v.clone() for k, v in params.items()})
    return module


def _state_param(key: str, names) -> str | None:
    """The parameter an optimizer state tensor belongs to (``exp_avg.fc.0.weight``), or
    None for a shared scalar (``beta1_power``, ``lr_step``)."""
    parts = key.split(".", 1)
    return parts[1] if len(parts) == 2 and parts[1] in names else None


def stage_checkpoint(full: Checkpoint, plan: StagePlan, s: int) -> Checkpoint:
    """Stage ``s``'s part of a whole-model checkpoint: its parameters, their optimizer
    state and the shared scalars (every stage keeps its own copy of those)."""
    names = set(param_shapes(plan.spec))
    mine = set(plan.param_names(s))
    tensors = {"model." + n: full.tensors["model." + n] for n in plan.param_names(s)}
    for key, value in full.group("optim").items():
        owner = _state_param(key, names)
        if owner is None or owner in mine:
            tensors["optim." + key] = value
    return Checkpoint(full.step, full.rng_key, tensors)


def merge_checkpoints(parts: list[Checkpoint]) -> Checkpoint:
    """The whole-model checkpoint from every stage's: a tensor several stages hold (the
    tied replica and its state, the optimizer's scalars) must agree bit for bit."""
    first = parts[0]
    tensors: dict[str, torch.Tensor] = {}
    for s, part in enumerate(parts):
        if (part.step, part.rng_key) != (first.step, first.rng_key):
            raise PipelineError(f"stage {s} checkpoint is at step {part.step}, stage 0's at {first.step}")
        for name, value in part.tensors.items():
            held = tensors.setdefault(name, value)
            if held is not value and not (held.dtype == value.dtype and torch.equal(held, value)):
                raise PipelineError(f"stages disagree on {name} at step {part.step} (stage {s})")
    return Checkpoint(first.step, first.rng_key, tensors)
