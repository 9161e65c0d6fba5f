"""Generated cases for the one-step causal softmax (contracts/numerics/OneStepSoftmax.sol):
score tensors (N, T, T) run through the engine's eager ``softmax_causal`` /
``softmax_backward`` (truetrain/training/ops/attention.py) and its C kernels
(``native_chains``), which must agree, and the engine's row sums (``exp64`` and
``unit_row_sum`` as ``softmax_causal`` calls them), against the chain and the reference
(truetrain/numerics/softmax.py). A case sends some consecutive rows of one sequence.

Sequence lengths 1, 2, 3, 7, 64, 100 and 128 (the LM's; the row sum's ``k`` from 53 to 46):
normal scores on scales 2^-4 to 2^8, spreads whose exps underflow (below -708: 0), small
integers (tied maxima, exact exps), constant rows, subnormal and near-largest scores, rows
holding ±inf or NaN (visible, or hidden past the diagonal where they must not count), and
the float library's edge-rich values. Backward: the engine's own probabilities or edge-rich
ones, gradients normal or edge-rich, the LM's scale 1/8 and others. Shared by
tests/contracts/test_onestep_softmax.py and scripts/onestep_kinds_fuzz.py.
"""

from __future__ import annotations

import numpy as np
import torch

from tests.contracts.float_cases import F32 as FMT32, random_floats
from tests.contracts.onestep_kinds import mismatches
from truetrain.numerics.ieee import bits32, bits64
from truetrain.numerics.softmax import row_sums, softmax, softmax_backward
from truetrain.training import native, native_chains
from truetrain.training.ops.attention import _causal_mask, softmax_backward as eager_backward, softmax_causal
from truetrain.training.repro_ops import F64, exp64, unit_row_sum

LENGTHS = [1, 2, 3, 7, 64, 100, 128]
SHORT = [1, 2, 3, 5, 8, 16]  # the row-sum kind: many rows a call
SCORE_KINDS = ("normal", "spread", "integers", "constant", "subnormal", "large", "specials", "edge")
#: exp64s one eth_call may run (about 35,000 gas each, within the call's 30 M)
EXPS_A_CALL = 600


def _edge(rng, n: int) -> np.ndarray:
    return random_floats(rng, n, FMT32).astype(np.uint64).astype(np.uint32).view(np.float32)


def scores(rng, t: int) -> np.ndarray:
    """One sequence's scores (T, T) of a kind."""
    kind = SCORE_KINDS[int(rng.integers(len(SCORE_KINDS)))]
    shape = (t, t)
    if kind == "normal":
        return (rng.standard_normal(shape) * np.exp2(rng.integers(-4, 9))).astype(np.float32)
    if kind == "spread":
        return (rng.standard_normal(shape) * np.exp2(rng.integers(8, 13))).astype(np.float32)
    if kind == "integers":
        return rng.integers(-3, 4, shape).astype(np.float32)
    if kind == "constant":
        return np.full(shape, np.float32(rng.standard_normal() * 100), np.float32)
    if kind == "subnormal":
        return (rng.integers(-100, 100, shape) * 2.0**-149).astype(np.float32)
    if kind == "large":
        return (rng.choice([-1.0, 1.0], shape) * (1 + rng.random(shape)) * 2.0**127).astype(np.float32)
    out = (rng.standard_normal(shape) * 4).astype(np.float32)
    if kind == "specials":
        for _ in range(int(rng.integers(1, 4))):
            out[rng.integers(t), rng.integers(t)] = rng.choice([np.inf, -np.inf, np.nan])
        return out
    return _edge(rng, t * t).reshape(shape)


def _engine_sums(s: torch.Tensor) -> np.ndarray:
    """The row sums ``softmax_causal`` divides by (its own ops), float64 bits (N·T,)."""
    n, t, _ = s.shape
    z = s.to(F64).masked_fill(_causal_mask(t, s.device), float("-inf"))
    return bits64(unit_row_sum(exp64(z - z.amax(-1, keepdim=True)).view(n * t, t)).numpy())


def _forward(rng, lengths, call):
    """Consecutive rows (from a random position, across sequences) of sequences of a random
    length, about :data:`EXPS_A_CALL` exp64s in all."""
    if not native.ready():
        raise AssertionError(f"the engine's C kernels are not in use: {native._state.get('reason')}")
    t = lengths[int(rng.integers(len(lengths)))]
    count = max(1, EXPS_A_CALL // (2 * t))
    first = int(rng.integers(0, t))
    s = np.stack([scores(rng, t) for _ in range((first + count + t - 1) // t)])
    ts = torch.from_numpy(s)
    probs = [bits32(route(ts).numpy()).reshape(-1, t) for route in (softmax_causal, native_chains.softmax_causal)]
    sb = bits32(s).reshape(-1, t)
    sums, out = call("softmaxRows", t, first, sb[first:first + count].astype(">u4").tobytes())
    want_sums = row_sums(sb)
    rows = slice(first, first + count)
    return ({"sums": np.array(sums, np.uint64), "p": np.array(out, np.uint32).reshape(count, t)},
            {"sums": want_sums[rows], "p": softmax(sb, want_sums)[rows]},
            [{"sums": _engine_sums(ts)[rows], "p": p[rows]} for p in probs], {"t": t, "first": first})


def row_sum_case(rng, n_elements: int, call):
    chain, want, engines, info = _forward(rng, SHORT + [128], call)
    return chain["sums"], want["sums"], [e["sums"] for e in engines], info


def softmax_case(rng, n_elements: int, call):
    chain, want, engines, info = _forward(rng, LENGTHS, call)
    return chain["p"], want["p"], [e["p"] for e in engines], info


def softmax_backward_case(rng, n_elements: int, call):
    t = LENGTHS[int(rng.integers(len(LENGTHS)))]
    count = max(1, min(t, n_elements // t))
    if rng.random() < 0.6:
        p = softmax_causal(torch.from_numpy(scores(rng, t)).unsqueeze(0))[0][:count].numpy()
    else:
        p = _edge(rng, count * t).reshape(count, t)
    dp = (rng.standard_normal((count, t)) * np.exp2(rng.integers(-20, 20))).astype(np.float32)
    if rng.random() < 0.3:
        dp = _edge(rng, count * t).reshape(count, t)
    scale = np.float32(rng.choice([0.125, 1.0, 0.25, 1 / np.sqrt(48.0), 3e-39, 1e30]))
    tp, tdp = torch.from_numpy(p.copy()).unsqueeze(0), torch.from_numpy(dp.copy()).unsqueeze(0)
    engines = [bits32(route(tp, tdp, float(scale))[0].numpy()) for route in (eager_backward,
                                                                           native_chains.softmax_backward)]
    pb, db, sc = bits32(p), bits32(dp), bits32(scale)
    chain = np.array(call("softmaxBackwardRows", t, sc, pb.astype(">u4").tobytes(), db.astype(">u4").tobytes()),
                     np.uint32).reshape(count, t)
    return chain, softmax_backward(pb, db, sc), engines, {"t": t, "scale": float(scale)}


KINDS = {"softmax_row_sum": row_sum_case, "softmax": softmax_case, "softmax_backward": softmax_backward_case}


def check(call, kind: str, rng, n: int) -> tuple[int, list[str]]:
    """``(elements, mismatches described)`` of one case (one eth_call through
    ``call(function, *args)``): the chain against the reference and both engine routes."""
    chain, want, engines, info = KINDS[kind](rng, n, call)
    return np.asarray(chain).size, mismatches(kind, chain, want, engines, info)
