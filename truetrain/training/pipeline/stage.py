"""One stage of a pipelined repro step: its layers, its optimizer state, and the phases
of a step as methods that take and give message addresses.

A step on a stage, given M micro-batches (slices of the step's batch, in order):

1. ``forward(m, address)`` for each m: the received activations (or, on stage 0, the
   step's byte ids / rows) through the stage's layers; sends the output (the last stage
   takes the loss instead). Every micro-batch's graph is kept.
2. ``backward(m, address)`` for each m: the received output gradient back through that
   graph; sends the input gradient upstream. **Batch-wide maxima:** repro parameter
   gradients are integer sums quantised against the whole batch's column maxima, so with
   M > 1 this first pass only *observes* (``GradBook`` mode ``observe``) and keeps the
   received gradients; ``finish_backward`` then runs every micro-batch's backward a
   second time (graphs retained) to *add*, exactly as ``repro_gradients`` does on one
   machine with micro-batches. Input gradients do not depend on the pass, so they flow
   upstream in the first one and the pipeline is never held up by the second. With
   M = 1 one pass does both.
3. ``send_tied`` / ``receive_tied`` (stage 0 and the last): swap the parts of
   ``tok_emb``'s gradient (see ``split.py``).
4. ``send_norm_max``, ``send_norm_sum``, then ``update`` (adamw with clipping): the global
   norm is ``sqrt64`` of an exact integer sum of squares on a power-of-two grid set by
   the largest square and the value count (``schedule.global_norm``). Each stage sends
   its largest square and count; all then quantise to the same grid, send their integer
   partial sums, and add them (exact), so every stage gets the single-process clip factor
   bit for bit. Without clipping, ``update`` alone.

Dropout keeps its mask: each micro-batch's forward runs with ``ReproStep.offset`` at its
first sample's batch position, as on one machine.
"""

from __future__ import annotations

from typing import Callable

import torch

from ...errors import CheckpointError, PipelineError
from ..checkpoint import Checkpoint
from ..gemm_check import engine_for
from ..intgemm import GemmEngine
from ..ops import ReproStep
from ..optim import init_state, repro_update
from ..repro_ops import F32, F64, xent_loss
from ..rng import subkey
from ..schedule import clip_of_norm, grid_sum, norm_of_sum, square_grid, square_terms
from ..trainer import DROPOUT_DOMAIN, BatchFeed, as_shard
from .split import TIED, StagePlan, build_stage_module
from .wire import Entry, Kind, Message, MessageStore, StageLog

#: Fault injection: sees every outgoing message and returns what is sent instead.
Tamper = Callable[[Message], Message]


def micro_slices(n: int, m: int) -> list[tuple[int, int]]:
    """``m`` contiguous slices of ``n`` samples, sizes differing by at most one."""
    if not 1 <= m <= n:
        raise PipelineError(f"micro-batches: expected 1 to {n} (the batch size), got {m}")
    return [(i * n // m, (i + 1) * n // m) for i in range(m)]


class Stage:
    """Stage ``index`` of ``plan``, at its checkpoint ``ckpt`` (:func:`~.split.stage_checkpoint`).

    ``shard`` is needed by stage 0 (inputs) and the last stage (targets). Messages go
    through ``store``; ``checkpoint_every`` steps (default: the manifest's interval) the
    stage keeps its checkpoint in ``checkpoints`` and its hash in the log.
    """

    def __init__(self, manifest, plan: StagePlan, index: int, ckpt: Checkpoint, shard, store: MessageStore, *,
                 micro_batches: int = 1, engine: GemmEngine | None = None, device=None,
                 checkpoint_every: int | None = None, tamper: Tamper | None = None):
        if not manifest.repro:
            raise PipelineError("a pipelined job runs in repro mode")
        if not 0 <= index < plan.stages:
            raise PipelineError(f"stage {index} of a {plan.stages}-stage plan")
        self.m, self.plan, self.index, self.store, self.tamper = manifest, plan, index, store, tamper
        self.first, self.last = index == 0, index == plan.stages - 1
        self.device = torch.device(device or "cpu")
        self.engine = engine or engine_for(self.device)
        self.slices = micro_slices(manifest.batch_size, micro_batches)
        self.multi = micro_batches > 1
        spec = manifest.model
        self.rows = manifest.batch_size * (spec.seq_len if spec.kind == "lm" else 1)  # the batch's loss rows
        params = ckpt.group("model")
        self.module = build_stage_module(plan, index, params).to(self.device)
        self.params = {k: p.data for k, p in self.module.named_parameters()}
        state = ckpt.group("optim")
        fresh = init_state(manifest.optimizer, params)
        if set(state) != set(fresh):
            raise CheckpointError(f"stage {index} optimizer state {sorted(state)} does not match "
                                  f"{manifest.optimizer.kind}'s {sorted(fresh)}")
        self.state = {k: v.to(self.device).clone() for k, v in state.items()}
        self.step, self.rng_key = ckpt.step, ckpt.rng_key
        self.feed = BatchFeed(manifest, as_shard(shard, manifest), self.device) if self.first or self.last else None
        self.every = checkpoint_every or manifest.checkpoint_interval
        self.log = StageLog(index)
        self.checkpoints: dict[int, Checkpoint] = {}
        self._losses: list = []
        #: Each step's training loss, where a caller takes them (the last stage; ``take_losses``).
        self.losses: list[float] = []
        self.commit()

    @property
    def clipping(self) -> bool:
        return self.m.optimizer.kind == "adamw" and bool(self.m.optimizer.clip_norm)

    # --- messages ---------------------------------------------------------------------

    def _send(self, kind: Kind, micro: int, tensors: dict[str, torch.Tensor]) -> bytes:
        message = Message(kind, self.step, micro, self.index, {k: v.detach().cpu() for k, v in tensors.items()})
        if self.tamper is not None:
            message = self.tamper(message)
        address = self.store.put(message)
        self.log.add(Entry(self.step, kind, micro, self.index, True, address))
        return address

    def _receive(self, address: bytes, kind: Kind, micro: int, source: int,
                 want: dict[str, tuple[tuple, torch.dtype]]) -> dict[str, torch.Tensor]:
        """The tensors of the message at ``address``, checked to be ``kind`` of this step,
        ``micro`` and ``source``, with the ``want``ed names, shapes and dtypes."""
        where = f"{kind.name} of step {self.step}, micro-batch {micro} from stage {source}"
        if address is None:
            raise PipelineError(f"stage {self.index} received no {where}")
        message = self.store.get(address)
        if (message.kind, message.step, message.micro, message.source) != (kind, self.step, micro, source):
            raise PipelineError(f"stage {self.index} expected {where}; got {message.kind.name} of step "
                                f"{message.step}, micro-batch {message.micro} from stage {message.source}")
        got = {n: (tuple(t.shape), t.dtype) for n, t in message.tensors.items()}
        if got != {n: (tuple(shape), dtype) for n, (shape, dtype) in want.items()}:
            raise PipelineError(f"stage {self.index}: {where} holds {got}, expected {want}")
        self.log.add(Entry(self.step, kind, micro, source, False, bytes(address)))
        return {n: t.to(self.device) for n, t in message.tensors.items()}

    # --- the step's phases ----------------------------------------------------------------

    def begin_step(self) -> None:
        """Start step ``self.step``: its batch (stage 0, last), dropout key, gradient book."""
        self.rstep = ReproStep(self.engine, self.m.limbs, self.rows)
        self.rstep.book.mode = "observe" if self.multi else "both"
        if self.m.model.kind == "lm" and self.m.model.dropout:
            self.module.dropout_key = subkey(self.rng_key, DROPOUT_DOMAIN, self.step)
        if self.feed is not None:
            self.inputs, self.targets = self.feed.batch(self.rng_key, self.step)
        self.kept: dict[int, list] = {}  # micro-batch -> [input, output, received gradient]
        self.grads: dict[str, torch.Tensor] | None = None

    def forward(self, micro: int, address: bytes | None = None) -> bytes | None:
        """Micro-batch ``micro`` through the stage; the address of the output sent on (None
        on the last stage, which takes the loss)."""
        lo, hi = self.slices[micro]
        self.rstep.offset = lo
        if self.first:
            x = self.inputs[lo:hi]
        else:
            x = self._receive(address, Kind.ACT, micro, self.index - 1, {"x": (self._boundary(hi - lo), F32)})["x"]
            x.requires_grad_(True)
        y = self.module(x, self.rstep)
        if self.last:
            y = self.module.loss(y, self.targets[lo:hi], self.rstep, self.rows, self._losses)
        self.kept[micro] = [x, y, None]
        return None if self.last else self._send(Kind.ACT, micro, {"x": y})

    def _boundary(self, samples: int) -> tuple[int, ...]:
        """The shape of ``samples`` samples' activations entering this stage."""
        spec = self.m.model
        if spec.kind == "lm":
            return samples, spec.seq_len, spec.d_model
        return samples, spec.fc_widths[self.module.layers[0]]

    def _backward(self, micro: int, retain: bool) -> torch.Tensor | None:
        x, y, g = self.kept[micro]
        y.backward(g, retain_graph=retain)
        if self.first:
            return None
        dx, x.grad = x.grad, None
        return dx

    def backward(self, micro: int, address: bytes | None = None) -> bytes | None:
        """Micro-batch ``micro``'s received output gradient (none on the last stage) back
        through the stage; the address of the input gradient sent upstream (None on stage 0)."""
        kept = self.kept[micro]
        if not self.last:
            kept[2] = self._receive(address, Kind.GRAD, micro, self.index + 1, {"g": (kept[1].shape, F32)})["g"]
        dx = self._backward(micro, retain=self.multi)
        return None if self.first else self._send(Kind.GRAD, micro, {"g": dx})

    def finish_backward(self) -> None:
        """The adding pass over every micro-batch (M > 1), then the stage's gradients."""
        if self.multi:
            self.rstep.book.mode = "add"
            for micro in range(len(self.slices)):
                self._backward(micro, retain=False)
        self.kept = {}
        self.grads = self.rstep.book.result()
        missing = sorted(set(self.params) - set(self.grads))
        if missing:
            raise PipelineError(f"stage {self.index} has no gradient for {missing[0]}")

    def send_tied(self) -> bytes | None:
        """This stage's part of ``tok_emb``'s gradient, to the other stage holding it."""
        if self.plan.tied_partner(self.index) is None:
            return None
        return self._send(Kind.TIED, 0, {"g": self.grads[TIED]})

    def receive_tied(self, address: bytes | None) -> None:
        """Add the other part: ``head + rows``, the order the one-process book adds them."""
        partner = self.plan.tied_partner(self.index)
        if partner is None:
            return
        other = self._receive(address, Kind.TIED, 0, partner, {"g": (self.grads[TIED].shape, F32)})["g"]
        head, rows = (self.grads[TIED], other) if self.last else (other, self.grads[TIED])
        self.grads[TIED] = head + rows

    def send_norm_max(self) -> bytes:
        """The largest square and the count of this stage's share of the global norm."""
        self._squares = square_terms([self.grads[n] for n in self.plan.norm_names(self.index)])
        self._largest = torch.stack([s.amax() for s in self._squares]).amax()
        self._count = sum(s.numel() for s in self._squares)
        return self._send(Kind.NORM_MAX, 0, {"largest": self._largest,
                                             "count": torch.tensor(self._count, dtype=torch.int64)})

    def _others(self, addresses: dict[int, bytes] | None, kind: Kind, want) -> dict[int, dict[str, torch.Tensor]]:
        """The ``kind`` message of every other stage, by stage."""
        addresses = addresses or {}
        if set(addresses) != set(range(self.plan.stages)) - {self.index}:
            raise PipelineError(f"stage {self.index} needs {kind.name} from every other stage, got {sorted(addresses)}")
        return {s: self._receive(addresses[s], kind, 0, s, want) for s in sorted(addresses)}

    def send_norm_sum(self, maxima: dict[int, bytes] | None) -> bytes:
        """This stage's integer sum of squares on the grid of every stage's largest and count
        (``maxima``: the other stages' ``NORM_MAX`` addresses)."""
        others = self._others(maxima, Kind.NORM_MAX, {"largest": ((), F64), "count": ((), torch.int64)})
        largest = {s: m["largest"] for s, m in others.items()} | {self.index: self._largest}
        total = self._count + sum(int(m["count"]) for m in others.values())
        self._up, self._down = square_grid(torch.stack([largest[s] for s in sorted(largest)]).amax(), total)
        self._partial = grid_sum(self._squares, self._up)
        return self._send(Kind.NORM_SUM, 0, {"sum": self._partial})

    def update(self, sums: dict[int, bytes] | None = None) -> None:
        """The optimizer step (``sums``: the other stages' ``NORM_SUM`` addresses when
        clipping), then the next step; a checkpoint every ``checkpoint_every`` steps."""
        clip = None
        if self.clipping:
            others = self._others(sums, Kind.NORM_SUM, {"sum": ((), F64)})
            partials = {s: m["sum"] for s, m in others.items()} | {self.index: self._partial}
            total = torch.stack([partials[s] for s in sorted(partials)]).sum()  # integers: exact
            clip = clip_of_norm(norm_of_sum(total, self._down), self.m.optimizer.clip_norm)
        repro_update(self.m.optimizer, self.params, self.grads, self.state, clip=clip)
        self.grads = None
        self.step += 1
        if self.step % self.every == 0:
            self.commit()

    # --- state ----------------------------------------------------------------------------

    def checkpoint(self) -> Checkpoint:
        """The stage's state now: its parameters and optimizer state, step, task key."""
        tensors = {"model." + k: v.detach().cpu().clone() for k, v in self.params.items()}
        tensors.update({"optim." + k: v.detach().cpu().clone() for k, v in self.state.items()})
        return Checkpoint(self.step, self.rng_key, tensors)

    def commit(self) -> bytes:
        """Keep the checkpoint at this step and log its hash (once a step)."""
        if self.step not in self.checkpoints:
            ckpt = self.checkpoints[self.step] = self.checkpoint()
            self.log.add(Entry(self.step, Kind.CHECKPOINT, 0, self.index, True, ckpt.hash()))
        return self.log.checkpoints()[self.step]

    def take_losses(self) -> float:
        """The last stage's mean training loss since the last call (NaN elsewhere or if none)."""
        if not self._losses:
            return float("nan")
        loss = xent_loss(torch.cat([s for s, _ in self._losses]), torch.cat([t for _, t in self._losses]))
        self._losses = []
        return float(loss.mean())
