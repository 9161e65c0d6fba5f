"""The named cheat that plays its dispute to the end (``flip-element:<step>[@<kind>]``, see
``truetrain.daemon.faults``): in task step ``<step>`` one element of one operator's output
(the program's first entry, or its first of that kind: ``@adam`` corrupts the update alone)
is wrong (the top bit of its significand flipped), and everything after it follows from that
wrong value honestly. So every claim the cheater makes is one its own trace backs, at every
level of the game, down to the one element the chain recomputes, and only that recomputation
tells it from an honest party. A worker computes its result this way; the named false
challenger its replay; both play their StepGame from the same edited steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from truetrain.trace.builder import build_trace, updated_state
from truetrain.trace.program import derive, step_scalars
from truetrain.training.checkpoint import Checkpoint
from truetrain.training.trainer import train

#: How many elements (from the first on) are tried for a flip that reaches the step's new
#: state (a flip a ReLU or the loss's metrics drop changes nothing the game is about).
TRIES = 64


def flip(entry: int, element: int):
    """The trace builder's edit flipping the significand's top bit of ``element`` of entry ``entry``'s output."""
    def edit(u: int, out: torch.Tensor) -> torch.Tensor:
        if u != entry:
            return out
        out = out.clone()
        wide = out.dtype == torch.float64
        flat = out.view(-1).view(torch.int64 if wide else torch.int32)
        flat[element] ^= 1 << (51 if wide else 22)
        return out
    return edit


@dataclass
class FlipCheat:
    """Flip one element of an entry's output in the step from task step ``at``: entry
    ``entry``, or the first of kind ``kind`` when one is named (``adam``: the update alone)."""

    at: int
    entry: int = 0
    kind: str | None = None

    @classmethod
    def parse(cls, arg: str) -> "FlipCheat":
        """``<step>`` or ``<step>@<kind>`` (``flip-element``'s argument)."""
        step, _, kind = arg.partition("@")
        return cls(int(step), kind=kind or None)

    def __post_init__(self):
        self._edits: dict[bytes, tuple] = {}

    def edited_step(self, manifest, shard, ckpt: Checkpoint):
        """(edit, the state after the edited step) for the step from ``ckpt`` when it is the
        cheat's step, else None. The element is the first whose flip reaches the new state."""
        if ckpt.step != self.at:
            return None
        key = ckpt.hash()
        if key not in self._edits:
            program = derive(manifest, **step_scalars(manifest, ckpt))
            entry = self.entry if self.kind is None else next(
                t for t, a in enumerate(program.entries) if a.kind == self.kind)
            honest = build_trace(manifest, shard, ckpt).next_state_root
            numel = math.prod(program.entries[entry].shape)
            for k in range(min(numel, TRIES)):
                edit = flip(entry, k)
                bad = build_trace(manifest, shard, ckpt, keep=True, edit=edit)
                if bad.next_state_root != honest:
                    break
            after = Checkpoint(ckpt.step + 1, ckpt.rng_key, {**ckpt.tensors, **updated_state(program, bad)})
            self._edits[key] = (edit, after)
        return self._edits[key]

    def edit_for(self, manifest, shard, ckpt: Checkpoint):
        """The trace builder's edit of the step from ``ckpt`` (None: an honest step)."""
        edited = self.edited_step(manifest, shard, ckpt)
        return None if edited is None else edited[0]

    def train(self, manifest, shard, start: Checkpoint, steps: int, device=None) -> list[Checkpoint]:
        """The cheater's state after each of ``steps`` steps from ``start`` (``start`` first)."""
        a = self.at - start.step
        if not 0 <= a < steps:
            return train(manifest, shard, start, steps, every=1, device=device)[0]
        before = train(manifest, shard, start, a, every=1, device=device)[0] if a else [start]
        _, after = self.edited_step(manifest, shard, before[-1])
        rest = train(manifest, shard, after, steps - a - 1, every=1, device=device)[0] if steps - a - 1 else [after]
        return before + rest


__all__ = ["FlipCheat", "flip"]
