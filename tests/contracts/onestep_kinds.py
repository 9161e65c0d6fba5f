"""What the one-step kinds' tests share (tests/contracts/test_onestep_{optim,elementwise,
gelu,layernorm}.py): the batched bit-for-bit comparison of a kind's generated cases, tensors
from bit patterns, and openings in the harnesses' ABI."""

from __future__ import annotations

import numpy as np
import torch

from truetrain.numerics.tensor_merkle import TensorTree

#: generated elements a kind in ``make test``
AT_LEAST = 2_000


def assert_kind_matches(harness, check, kind: str, per_call: int = 256) -> int:
    """Run ``check(call, kind, rng, per_call)`` (a cases module's: one eth_call of
    ``harness`` a case, its mismatches against the reference and the engine) until
    :data:`AT_LEAST` elements are done; fail listing the first mismatches. Returns the count."""
    rng = np.random.default_rng([28, len(kind)])
    total, bad = 0, []
    while total < AT_LEAST:
        done, wrong = check(lambda fn, *a: getattr(harness, fn).call(*a), kind, rng, per_call)
        total += done
        bad += wrong
    assert not bad, f"{len(bad)} differ, e.g.\n" + "\n".join(bad[:10])
    return total


def mismatches(kind: str, chain, want, engines, info: dict) -> list[str]:
    """The first five elements (described) where the chain differs from the reference or the
    reference from an engine route, all flattened to one order."""
    chain, want = np.asarray(chain).reshape(-1), np.asarray(want).reshape(-1)
    engines = [np.asarray(e).reshape(-1) for e in engines]
    wrong = chain != want
    for e in engines:
        wrong |= want != e
    return [f"{kind} {info} [{i}]: chain {int(chain[i]):#x} reference {int(want[i]):#x} engine "
            + "/".join(f"{int(e[i]):#x}" for e in engines) for i in np.nonzero(wrong)[0][:5]]


def tensor_of(bits) -> torch.Tensor:
    """A float32 tensor holding the bit patterns ``bits`` (uint32)."""
    return torch.from_numpy(np.ascontiguousarray(bits, np.uint32).view(np.float32)).clone()


def opening(tree: TensorTree, start: int, count: int = 1):
    """``(chunks, proof)`` opening elements [start, start + count) of ``tree``."""
    chunks, proof = tree.open(start, count)
    return (chunks, ["0x" + p.hex() for p in proof])


def descriptor(tree: TensorTree, rows: int, cols: int):
    """The harnesses' ``Tensor`` (root, rows, cols)."""
    return ("0x" + tree.root.hex(), rows, cols)
