"""One-entry step games of the kinds of StepKindsQuant, Norm, Optim and Data (for the tests and
the bench): a program of one application whose inputs are the step's state tensors (real
engine tensors), its output the next value of state tensor 0; one step, so the game's levels
1 and 2 end at once and level 3 descends the output to one element, which the one-step
recomputes through StepGame's dispatch to the kind's contract. The faulty side flips the
significand's top bit of one element. :func:`entry_game` plays a real program's entry the same
way (its inputs taken from a trace)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from eth_abi import encode

from tests.contracts.step_game_play import LAYOUT_HASH, _flip
from truetrain.hashing import keccak256
from truetrain.numerics.tensor_merkle import canonical_bits, words_of
from truetrain.trace.builder import Trace, committed
from truetrain.trace.game import CheckpointLeaf, Party, batches_root
from truetrain.trace.kind_names import CONTRACTS, KINDS
from truetrain.trace.program import ENTRY_TYPES, STATE, Application, Program, Ref, dims2
from truetrain.training.tensor_roots import tensor_root
from truetrain.training.merkle import merkle_root

CLOCK = 50


def kind_id(name: str) -> str:
    return "0x" + keccak256(name.encode()).hex()


def deployment() -> tuple[list[str], list[str]]:
    """(kinds, contract names) of a StepGame with every kind contract."""
    pairs = [(k, c) for c, ks in CONTRACTS.items() for k in ks]
    return [kind_id(k) for k, _ in pairs], [c for _, c in pairs]


def flat(kind: str, attrs: dict) -> list[int]:
    """The attributes' words in the kind's order: ints as they are, lists as length then items."""
    out: list[int] = []
    for name in KINDS[kind].attributes:
        v = attrs[name]
        out += [len(v), *map(int, v)] if isinstance(v, (tuple, list)) else [int(v)]
    return out


@dataclass(frozen=True)
class KindEntry(Application):
    """An entry encoded from :mod:`truetrain.trace.kind_names` (attributes given as words)."""

    @property
    def words(self) -> int:
        return KINDS[self.kind].words

    def encode(self) -> bytes:
        return encode(ENTRY_TYPES, [keccak256(self.kind.encode()), self.output, self.words, list(self.shape),
                                    [r.word() for r in self.inputs], flat(self.kind, self.attrs), list(self.dims)])


@dataclass
class KindGame:
    """The program, the honest and the faulty party, the setup's pieces."""

    program: Program
    honest: Party
    faulty: Party
    trace: Trace
    element: int

    def setup(self, defender, challenger, d: Party, c: Party, receiver, clock: int = CLOCK) -> tuple:
        return (defender.address, challenger.address, receiver, self.program.root(), 1, self.program.layout(),
                self.honest.start.hash(), batches_root(self.honest.batch_roots), 1, d.end.hash(), c.end.hash(),
                clock, 0)

    def want(self) -> int:
        """The honest element (its word, or its two words of a float64 or int64 as one value)."""
        out = self.trace.outputs[0]
        bits, e = canonical_bits(out), self.element
        return int(bits[2 * e]) << 32 | int(bits[2 * e + 1]) if words_of(out.dtype) == 2 else int(bits[e])


def kind_game(kind: str, inputs: list[torch.Tensor], out: torch.Tensor, attrs: dict, output: int = 0,
              element: int = 0) -> KindGame:
    """A one-entry game of ``kind`` on ``inputs`` (state tensors) with the honest ``out``; the
    faulty party flips ``element``."""
    dims = tuple(d for x in inputs for d in dims2(x.shape, words_of(x.dtype)))
    return entry_game(KindEntry(kind, (), tuple(out.shape), tuple(attrs.items()), output, kind, dims), inputs, out,
                      element)


def entry_game(app: Application, inputs: list[torch.Tensor], out: torch.Tensor, element: int = 0) -> KindGame:
    """A one-entry game of entry ``app`` (a real program's: its kind, attributes, output and
    descriptors) whose inputs are ``inputs``, read as state tensors 0..n-1, with the honest
    ``out``; the faulty party flips ``element``."""
    app = replace(app, inputs=tuple(Ref(STATE, s) for s in range(len(inputs))))
    names = tuple(f"in{s}" for s in range(len(inputs)))
    program = Program((app,), names, tuple(tuple(x.shape) for x in inputs), ("pad",), ((1,),), {0: 0})
    batch = [torch.zeros(1)]
    state_roots = [tensor_root(committed(x)) for x in inputs]
    batch_roots = [tensor_root(b) for b in batch]

    def trace(o: torch.Tensor) -> Trace:
        root = tensor_root(committed(o))
        return Trace(0, program.root(), [root], state_roots, batch_roots, [root] + state_roots[1:], {0: o},
                     list(inputs), batch)

    good = trace(out)
    bad = trace(_flip(0, element)(0, out))
    step_batch = [merkle_root(batch_roots)]
    start = CheckpointLeaf(0, keccak256(b"a kind game's rng key"), LAYOUT_HASH, good.state_root)
    return KindGame(program, Party(program, [good.next_state_root], {0: good}, step_batch, start),
                    Party(program, [bad.next_state_root], {0: bad}, step_batch, start), good, element)

