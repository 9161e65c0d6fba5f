"""How much memory training a manifest's model takes: what a submitter asks the workers to
declare, and what a worker checks before it accepts a task (a submitter may understate
its job's needs; a worker that cannot hold the model declines instead of crashing)."""

from __future__ import annotations

import math

from .models import ModelSpec, param_shapes

#: The runtime's own share (the interpreter, torch, the C kernels, and torch.compile building
#: the large-tensor kernels in the process on first use: some 130 MiB of it), in MiB.
RUNTIME_MIB = 512


def training_memory_mib(spec, batch: int) -> int:
    """About how many MiB one training task of ``spec`` at ``batch`` samples takes, at most:
    parameters, gradients and two optimizer moments (16 bytes a parameter), what a repro
    step holds at its peak, and the runtime. For an LM the step takes, per layer, 212
    bytes a token and channel and 90 bytes an attention score (float64 scores and their
    quantised copies); for an MLP or CNN, 40 bytes a sample per unit of every layer's
    output. Fitted as an upper bound of measured peaks (d64-d512, 2-8 layers, contexts
    64-256: ``tests/training/test_memory.py`` checks one in a fresh process)."""
    params = sum(math.prod(s) for s in param_shapes(spec).values())
    if isinstance(spec, ModelSpec):
        units = sum(o * (h // 2) * (w // 2) * 4 for o, (_, h, w) in zip(spec.channels, spec.conv_shapes()))
        activations = 4 * batch * 10 * (units + sum(spec.fc_widths))
    else:
        tokens = batch * spec.seq_len
        activations = tokens * spec.n_layers * (212 * spec.d_model + 90 * spec.n_heads * spec.seq_len)
    return math.ceil((16 * params + activations) / 2**20) + RUNTIME_MIB


def stage_memory_mib(plan, s: int, batch: int) -> int:
    """About how many MiB stage ``s`` of a pipelined job (``plan``: a
    :class:`~.pipeline.split.StagePlan`) takes at ``batch`` samples a step, so a worker can
    decline a stage it cannot hold: the stage's parameters (the tied replica included),
    gradients and two optimizer moments (16 bytes a parameter), the activations it keeps,
    and the runtime. Under GPipe a stage keeps all M micro-batches' graphs until its adding
    pass, M slices of the batch: the whole batch's activations of its own layers, whatever
    M is (at the per-layer rates of :func:`training_memory_mib`), plus what crosses its
    boundaries (received activations and gradients: 8 bytes a value) and, on the last
    stage of an LM, the logits and their gradient (16 bytes a token and symbol)."""
    spec = plan.spec
    params = plan.param_counts()[s]
    units = plan.units_of(s)
    if isinstance(spec, ModelSpec):  # an MLP: fc.j maps widths[j] to widths[j + 1]
        layers = [int(u.split(".")[1]) for u in units]
        widths = spec.fc_widths
        activations = 4 * batch * 10 * (widths[layers[0]] + sum(widths[j + 1] for j in layers))
    else:
        tokens = batch * spec.seq_len
        blocks = sum(u.startswith("block.") for u in units)
        activations = tokens * blocks * (212 * spec.d_model + 90 * spec.n_heads * spec.seq_len)
        activations += 8 * tokens * spec.d_model * ((s > 0) + (s < plan.stages - 1))
        activations += 16 * tokens * spec.vocab * ("head" in units)
    return math.ceil((16 * params + activations) / 2**20) + RUNTIME_MIB


def offer_refusal(job, manifest, device_class: int, memory_mib: int, stage: int | None = None) -> str | None:
    """Why a worker of ``device_class`` declaring ``memory_mib`` declines an offered task of
    ``job`` (its on-chain terms: ``device_class``, ``memory_mib``) with ``manifest``, or
    None when it takes it. The terms are the submitter's word; the manifest's model (for a
    pipelined job's ``stage``, that stage's layers) is what the worker must actually hold."""
    if job.device_class > device_class or job.memory_mib > memory_mib:
        return f"the job asks for device class {job.device_class} and {job.memory_mib:,} MiB"
    if stage is None:
        need, what = training_memory_mib(manifest.model, manifest.batch_size), "the job's model"
    else:
        plan = manifest.pipeline.plan(manifest.model)
        need, what = stage_memory_mib(plan, stage, manifest.batch_size), f"stage {stage} of the job's model"
    if need > memory_mib:
        return (f"{what} needs about {need:,} MiB to train (its terms say {job.memory_mib:,}); "
                f"this worker declares {memory_mib:,}")
    return None
