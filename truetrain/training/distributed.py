"""One repro step across several processes (ranks): each trains a fixed share of the batch
and the ranks all-reduce the *exact integer* gradient sums, so every world size gives the
bits of one process.

Why it is exact: a repro parameter gradient is an integer sum over the batch rows, each
column quantised against its largest magnitude over the *whole* batch (``ops/book.py``),
then scaled and rounded to float32 once. A batch split in micro-batches already gets the
same bits by observing every slice's maxima before adding. Across ranks the same two
phases become two collectives per step:

1. while the backward runs, each rank's :class:`ShardedBook` observes its rows' column
   maxima and records the material of each sum (no integer sum is taken yet);
2. the ranks all-reduce those maxima with MAX (exact for any float), then take their
   integer sums against the whole batch's scales and all-reduce them with SUM: integers,
   so exact in any order, in float64 where the whole batch's sum is bounded below 2**53
   (column sums always are: the book sizes them so) and in int64 otherwise (within 2**62,
   as ``check_contraction`` bounds the whole batch);
3. every rank rounds the same integers the same way and applies the same update, so the
   ranks hold identical parameters and rank 0's checkpoints are the single-process ones.

Rank ``r`` of ``n`` trains rows ``rank_rows(batch, n, r)`` of each step's batch: a
contiguous share fixed by the manifest's batch size and the world size, never by timing.
The per-row loss parts are gathered in that order at each checkpoint, so the reported
training loss is the single-process figure too.

Only repro jobs train across ranks (stock PyTorch gives other bits at every world size
anyway, so a worker runs a stock job in one process).
"""

from __future__ import annotations

import torch

from ..errors import TrainingError
from .intgemm import I64, ExactSum, operand_bits
from .manifest import Manifest
from .ops.book import GradBook
from .ops.step import ReproStep
from .repro_ops import F64
from .trainer import TrainRun


def rank_rows(batch: int, world: int, rank: int) -> tuple[int, int]:
    """The batch positions ``[lo, hi)`` rank ``rank`` of ``world`` trains: contiguous, the
    first ``batch % world`` ranks one sample more."""
    if not 0 < world <= batch:
        raise TrainingError(f"a batch of {batch} cannot be split across {world} devices (1 to {batch})")
    if not 0 <= rank < world:
        raise TrainingError(f"rank {rank} out of range for {world} devices")
    base, extra = divmod(batch, world)
    lo = rank * base + min(rank, extra)
    return lo, lo + base + (rank < extra)


def check_shardable(manifest: Manifest, world: int) -> None:
    """Refuse a job that cannot train across ``world`` ranks: a stock one, or a batch
    smaller than the world."""
    if not manifest.repro:
        raise TrainingError("only repro jobs train across devices (stock bits depend on the split)")
    rank_rows(manifest.batch_size, world, 0)


class Comm:
    """The collectives a sharded step needs, over ``torch.distributed``'s default group
    (gloo on CPU, NCCL on CUDA). ``reduced_bytes`` counts what went through all-reduces."""

    def __init__(self, rank: int, world: int):
        self.rank, self.world = rank, world
        self.reduced_bytes = 0

    def all_reduce(self, tensors: list[torch.Tensor], op: str) -> list[torch.Tensor]:
        """``tensors`` reduced elementwise across ranks (``op``: "max" or "sum"), in one
        collective per dtype; each rank passes the same shapes in the same order."""
        out: list[torch.Tensor | None] = [None] * len(tensors)
        for dtype in sorted({t.dtype for t in tensors}, key=str):
            picked = [i for i, t in enumerate(tensors) if t.dtype == dtype]
            flat = torch.cat([tensors[i].reshape(-1) for i in picked])
            self.reduced_bytes += flat.numel() * flat.element_size()
            flat = self._reduce(flat, op)
            for i, piece in zip(picked, flat.split([tensors[i].numel() for i in picked])):
                out[i] = piece.view(tensors[i].shape)
        return out  # type: ignore[return-value]

    def _reduce(self, flat: torch.Tensor, op: str) -> torch.Tensor:
        if self.world == 1:
            return flat
        import torch.distributed as dist

        dist.all_reduce(flat, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM)
        return flat

    def gather(self, t: torch.Tensor) -> list[torch.Tensor]:
        """Every rank's ``t`` (same dtype and trailing shape, any first dimension), by rank."""
        if self.world == 1:
            return [t]
        import torch.distributed as dist

        size = torch.tensor([t.shape[0]], dtype=I64, device=t.device)
        sizes = [torch.empty_like(size) for _ in range(self.world)]
        dist.all_gather(sizes, size)
        longest = max(int(s) for s in sizes)
        padded = torch.zeros((longest, *t.shape[1:]), dtype=t.dtype, device=t.device)
        padded[:t.shape[0]] = t
        parts = [torch.empty_like(padded) for _ in range(self.world)]
        dist.all_gather(parts, padded)
        return [p[:int(s)] for p, s in zip(parts, sizes)]


class ShardedBook(GradBook):
    """A :class:`GradBook` over one rank's share of the batch: the backward only observes
    maxima and records each sum's material; :meth:`reduce` then takes the sums against
    the whole batch's maxima and adds every rank's (see the module's text)."""

    def __init__(self, engine, limbs: int, rows: int):
        super().__init__(engine, limbs, rows)
        self.mode = "observe"
        self._calls: list = []
        self._terms: dict[tuple[str, str], int] = {}  # a weight sum's terms over the whole batch

    def weight(self, name: str, g: torch.Tensor, qa, site: str = "", per_row: int = 1) -> None:
        self._terms[(name, "w:" + site)] = self.rows * per_row
        self._record(GradBook.weight, (name, g, qa, site, per_row), {})

    def columns(self, *args, **kwargs) -> None:
        self._record(GradBook.columns, args, kwargs)

    def scatter(self, *args, **kwargs) -> None:
        self._record(GradBook.scatter, args, kwargs)

    def _record(self, method, args, kwargs) -> None:
        if self.mode == "observe":
            self._calls.append((method, args, kwargs))
        method(self, *args, **kwargs)

    def reduce(self, comm: Comm) -> None:
        """All-reduce the maxima, take this rank's sums, all-reduce them (exact integers)."""
        keys = sorted(self._max)
        for key, value in zip(keys, comm.all_reduce([self._max[k] for k in keys], "max")):
            self._max[key] = value
        self.mode, calls, self._calls = "add", self._calls, []
        for method, args, kwargs in calls:
            method(self, *args, **kwargs)
        entries = [(name, site, entry) for name in sorted(self._parts)
                   for site, entry in sorted(self._parts[name].items())]
        sums = [self._summable(name, site, entry) for name, site, entry in entries]
        for (_, _, entry), total in zip(entries, comm.all_reduce(sums, "sum")):
            entry[0] = ExactSum(total, 0) if entry[2] == "weight" else total

    def _summable(self, name: str, site: str, entry: list) -> torch.Tensor:
        """An entry's integers as a tensor whose cross-rank sum is exact: float64 while the
        whole batch's sum stays below 2**53 (every partial sum then does too), else int64.
        The choice depends on the whole batch alone, so every rank makes the same one."""
        if entry[2] != "weight":
            return entry[0]  # float64 column or row sums, sized for the whole batch
        total = entry[0]
        if self._terms[(name, site)] << (2 * operand_bits(self.limbs)) >= 2**53:
            return total.exact()
        if total.value.dtype == F64 and total.shift == 0:
            return total.value
        return total.exact().to(F64)


def sharded_gradients(model: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor, engine,
                      limbs: int, comm: Comm, micro_batch: int | None = None):
    """This rank's part of :func:`~.ops.repro_gradients` over the whole batch ``(inputs,
    targets)``: ``(grads, [(sumexp, target)] of its rows)``; ``grads`` are the whole
    batch's, the same on every rank."""
    n, rows = inputs.shape[0], targets.numel()
    lo, hi = rank_rows(n, comm.world, comm.rank)
    size = hi - lo if not micro_batch else max(1, int(micro_batch))
    step = ReproStep(engine, limbs, rows)
    step.book = ShardedBook(engine, limbs, rows)
    losses: list = []
    for start in range(lo, hi, size):
        end = min(start + size, hi)
        step.offset = start
        model.loss(inputs[start:end], targets[start:end], step, rows, losses).backward()
    step.book.reduce(comm)
    return step.book.result(), losses


class ShardedRun(TrainRun):
    """A :class:`TrainRun` on one rank: the same state on every rank, this rank's share of
    each batch, the whole batch's gradients."""

    def __init__(self, manifest: Manifest, shard, ckpt, comm: Comm, **kwargs):
        check_shardable(manifest, comm.world)
        super().__init__(manifest, shard, ckpt, **kwargs)
        self.comm = comm

    def gradients(self, inputs: torch.Tensor, targets: torch.Tensor):
        return sharded_gradients(self.module, inputs, targets, self.engine, self.m.limbs, self.comm,
                                 self.micro_batch)

    def take_losses(self) -> float:
        """The whole batches' mean loss since the last call (a collective: every rank calls
        it at the same steps): the rows of every rank, step by step, in batch order."""
        if self._losses:
            whole = []
            for column in zip(*self._losses):  # sumexp, then target: (this rank's rows, steps)
                ranks = self.comm.gather(torch.stack(column, 1))
                whole.append(torch.cat(ranks).T.reshape(-1))  # step by step, rank by rank
            self._losses = [tuple(whole)]
        return super().take_losses()
