"""A step's trace: the program (:mod:`.program`) evaluated by the engine, one application at
a time (:mod:`.kinds`), with every output's tensor root (docs/onestep.md, levels 1 and 2).

Nothing here runs on a worker's normal path: a party builds the trace of the one step a
dispute has narrowed to, from the checkpoint before it (its state), the shard (its batch)
and the manifest (its program). Level 1 compares state roots, level 2 the trace's entries
(:func:`first_divergence`), level 3 descends one output's tree (:class:`TensorTree`, kept
for the entries asked for with ``keep``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import torch
from eth_abi import encode

from ..errors import TraceError
from ..hashing import keccak256
from ..numerics.tensor_merkle import in_layout
from ..training.checkpoint import Checkpoint
from ..training.gemm_check import engine_for
from ..training.manifest import load_manifest
from ..training.merkle import merkle_root
from ..training.trainer import BatchFeed, as_checkpoint, as_shard
from .kinds import Context, evaluate
from .program import APP, BATCH, STATE, Program, Ref, derive, derived_batch, step_scalars
from ..training.tensor_roots import tensor_root


#: outputs whose roots may lag behind the evaluation (their tensors kept meanwhile)
ROOTS_AHEAD = 16
#: threads hashing outputs beside the evaluation
HASHERS = 1


def committed(t: torch.Tensor) -> torch.Tensor:
    """The tensor as its tree holds it (tensor_merkle's layout of its dtype: a trace's ids,
    labels and positions are int32 tensors, one word each; AdamW's ``lr_step`` an int64 one,
    two words, as in a checkpoint)."""
    return in_layout(t)


@dataclass
class Trace:
    """One step's commitments. ``roots[t]``: entry ``t``'s output root; ``state_roots``: the
    state tensors' roots before the step (``state_root`` their Merkle root, level 1's
    commitment) and ``next_state_root`` after it; ``outputs``: the kept entries' tensors."""

    step: int
    program_root: bytes
    roots: list[bytes]
    state_roots: list[bytes]
    batch_roots: list[bytes]
    next_state_roots: list[bytes]
    outputs: dict[int, torch.Tensor] = field(default_factory=dict, repr=False)
    state: list[torch.Tensor] = field(default_factory=list, repr=False)
    batch: list[torch.Tensor] = field(default_factory=list, repr=False)

    @property
    def state_root(self) -> bytes:
        return merkle_root(self.state_roots)

    @property
    def next_state_root(self) -> bytes:
        return merkle_root(self.next_state_roots)

    def leaves(self) -> list[bytes]:
        """Level 2's leaves: ``keccak256(abi.encode(uint256 t, bytes32 root_t))``."""
        return [keccak256(encode(["uint256", "bytes32"], [t, r])) for t, r in enumerate(self.roots)]

    def root(self) -> bytes:
        """The trace root: the Merkle root over the entries ``(t, output root)``."""
        return merkle_root(self.leaves())

    def tensor(self, ref) -> torch.Tensor:
        """An input's tensor (an entry's only where kept)."""
        if ref.source == STATE:
            return self.state[ref.index]
        if ref.source == BATCH:
            return self.batch[ref.index]
        if ref.index not in self.outputs:
            raise TraceError(f"entry {ref.index}'s output was not kept")
        return self.outputs[ref.index]


def build_trace(manifest, shard, ckpt: Checkpoint | bytes, *, device=None, keep: bool | set[int] = False,
                edit: Callable[[int, torch.Tensor], torch.Tensor] | None = None,
                program: Program | None = None) -> Trace:
    """The trace of the step from ``ckpt`` (its step's batch of ``shard``): every entry of the
    program evaluated by the engine and its output's root. ``keep``: the entries whose
    outputs to keep (True: all); the state and batch tensors are kept either way. ``edit``
    (a deliberately faulty step, for tests): ``edit(t, output)`` replaces entry ``t``'s
    output before it is committed to and read."""
    manifest = load_manifest(manifest)
    ckpt = as_checkpoint(ckpt)
    scalars = step_scalars(manifest, ckpt)
    if program is None:
        program = derive(manifest, **scalars)
    elif dict(program.scalars) != scalars:
        raise TraceError("the program given is not this step's (its step-dependent attributes differ)")
    dev = torch.device(device or "cpu")
    batch = step_batch(manifest, shard, ckpt, program, dev)
    try:
        state = [ckpt.tensors[name].to(dev) for name in program.state]
    except KeyError as exc:
        raise TraceError(f"the checkpoint holds no state tensor {exc}") from None
    ctx = Context(engine_for(dev), manifest.limbs)
    last_use = _last_uses(program)
    live: dict[int, torch.Tensor] = {}
    kept: dict[int, torch.Tensor] = {}
    memo: dict[tuple, tuple] = {}
    last_of = {(a.kind, a.inputs, a.attributes): t for t, a in enumerate(program.entries)}
    roots: list = []
    hashing = ThreadPoolExecutor(max_workers=HASHERS)  # roots while the next entries evaluate (C, no GIL)
    for t, app in enumerate(program.entries):
        key = (app.kind, app.inputs, app.attributes)
        if key not in memo:
            ins = [_input(r, live, state, batch) for r in app.inputs]
            memo[key] = evaluate(t, app, ins, ctx)
        out = memo[key][app.output]
        if tuple(out.shape) != app.shape:
            raise TraceError(f"entry {t} ({app.label}): the engine gave {tuple(out.shape)}, the program says {app.shape}")
        edited = out if edit is None else edit(t, out)
        if edited is not out:
            ctx.release(Ref(APP, t))  # what its evaluation saved is not the edited output's
            out = edited
        roots.append(hashing.submit(tensor_root, out))
        if len(roots) > ROOTS_AHEAD and not roots[-ROOTS_AHEAD - 1].done():
            roots[-ROOTS_AHEAD - 1].result()  # bounded: at most ROOTS_AHEAD outputs wait for their root
        live[t] = out
        if keep is True or (keep and t in keep):
            kept[t] = out
        for done in last_use.get(t, ()):  # outputs no later entry reads
            live.pop(done, None)
            ctx.release(Ref(APP, done))
        if last_of[key] == t:  # a multi-output kind's last entry
            del memo[key]
    roots = [r.result() for r in roots]
    hashing.shutdown()
    state_roots = [tensor_root(s) for s in state]  # a checkpoint's tensors' roots, in its order
    next_roots = list(state_roots)
    for s, t in program.updates.items():
        next_roots[s] = roots[t]
    return Trace(ckpt.step, program.root(), roots, state_roots, [tensor_root(b) for b in batch],
                 next_roots, kept, state, batch)


def step_batch(manifest, shard, ckpt: Checkpoint, program: Program, dev: torch.device) -> list[torch.Tensor]:
    """The step's batch tensors: the shard's (ids and labels as int32 words, as the derived
    ones are, one word each) and the program's derived ones."""
    feed = BatchFeed(manifest, as_shard(shard, manifest), dev)
    shard_batch = [b if b.is_floating_point() else b.to(torch.int32) for b in feed.batch(ckpt.rng_key, ckpt.step)]
    return shard_batch + derived_batch(program, ckpt, dev, manifest)


def batch_root(manifest, shard, ckpt: Checkpoint | bytes) -> bytes:
    """The step's batch root (the root over its batch tensors' roots, a leaf of the game's
    ``batches``) without tracing the step."""
    manifest, ckpt = load_manifest(manifest), as_checkpoint(ckpt)
    program = derive(manifest, **step_scalars(manifest, ckpt))
    return merkle_root([tensor_root(b) for b in step_batch(manifest, shard, ckpt, program, torch.device("cpu"))])


def updated_state(program: Program, trace: Trace) -> dict[str, torch.Tensor]:
    """The state tensors the update entries give (kept outputs), by checkpoint name."""
    return {program.state[s]: trace.outputs[t] for s, t in program.updates.items()}


def _input(ref, live, state, batch) -> torch.Tensor:
    if ref.source == APP:
        return live[ref.index]
    return state[ref.index] if ref.source == STATE else batch[ref.index]


def _last_uses(program: Program) -> dict[int, list[int]]:
    """entry t -> the outputs whose last reader is t (an update's output: never dropped)."""
    last: dict[int, int] = {}
    for t, app in enumerate(program.entries):
        for r in app.inputs:
            if r.source == APP:
                last[r.index] = t
    for t in range(len(program.entries)):
        last.setdefault(t, t)
    out: dict[int, list[int]] = {}
    for src, t in last.items():
        out.setdefault(t, []).append(src)
    return out


def first_divergence(a: Trace, b: Trace) -> int | None:
    """The first entry whose output roots differ (level 2's end), by bisection over the
    prefixes of the two traces (hash chains, as the game's moves compare one commitment a
    round); None when the traces agree. Traces of different programs or steps cannot be
    compared (:class:`TraceError`)."""
    if a.program_root != b.program_root or len(a.roots) != len(b.roots) or a.step != b.step:
        raise TraceError("traces of different programs or steps")
    ca, cb = _chain(a.roots), _chain(b.roots)
    if ca[-1] == cb[-1]:
        return None
    lo, hi = 0, len(a.roots) - 1  # the prefixes up to hi differ; find the first that does
    while lo < hi:
        mid = (lo + hi) // 2
        if ca[mid] == cb[mid]:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _chain(roots: list[bytes]) -> list[bytes]:
    """``h_t = keccak256(h_{t-1} ‖ root_t)`` from 32 zero bytes: h_t commits to entries 0..t."""
    out, h = [], bytes(32)
    for r in roots:
        h = keccak256(h + r)
        out.append(h)
    return out


__all__ = ["Trace", "batch_root", "build_trace", "committed", "first_divergence", "step_batch", "updated_state"]
