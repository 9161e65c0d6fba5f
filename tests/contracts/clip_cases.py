"""Generated cases for the one-step clip factor (contracts/numerics/OneStepClip.sol): sets of
gradient tensors cut into ranges, through the chain (OneStepClipHarness.clipSets: every
range's maximum and sum, each set's norm and factor) against the reference
(truetrain/numerics/clip.py) and the engine (truetrain/training/schedule.py: ``global_norm`` and
``clip_factor`` whole, and a pipeline's route: ``square_grid`` / ``grid_sum`` over two groups
of tensors, the sums added, ``norm_of_sum``, ``clip_of_norm``; per range the engine's
largest square and ``grid_sum`` of the range's squares on the set's grid).

Tensors of 1, 2, 3, 7, 64, 100, 257 and 1,024 values and the longest range (16,384, the
LM's width); ranges of 1, 3, 64, 100, 1,024 or 16,384 values; normal tensors on scales
2^-60 to 2^60, wide exponents within a tensor, all-zero tensors with ±0, subnormal tensors
(squares near 2^-298), tensors near the largest float32 (squares near 2^256), ±inf and NaN,
squares on the grid's half-quanta (ties), the float library's edge-rich values; clip norms
1, 0.05, 0.5, 0, 1e-30, 1e30, the least subnormal, inf and NaN. Shared by
tests/contracts/test_onestep_clip.py and scripts/onestep_kinds_fuzz.py.
"""

from __future__ import annotations

import numpy as np
import torch

from tests.contracts.float_cases import F32 as FMT32, random_floats
from tests.contracts.onestep_kinds import mismatches
from truetrain.numerics.clip import clip_factor as reference, ranges
from truetrain.numerics.ieee import bits32, bits64
from truetrain.training.schedule import (clip_factor, clip_of_norm, global_norm, grid_sum, norm_of_sum, square_grid,
                                         square_terms)

SIZES = [1, 2, 3, 7, 64, 100, 257, 1024]
LONGEST = 16_384
WIDTHS = [1, 3, 64, 100, 1024, LONGEST]
TENSOR_KINDS = ("normal", "wide", "zero", "subnormal", "large", "specials", "ties", "edge")
CLIP_NORMS = [1.0, 0.05, 0.5, 0.0, 1e-30, 1e30, 2.0**-1074, float("inf"), float("nan")]
#: values one eth_call reads at most, and ranges it starts at most (a float64 addition each)
VALUES_A_CALL = 24_000
RANGES_A_CALL = 1_024


def tensor(rng, n: int) -> np.ndarray:
    """A gradient tensor of ``n`` values (float32), of a kind."""
    kind = TENSOR_KINDS[int(rng.integers(len(TENSOR_KINDS)))]
    if kind == "normal":
        return (rng.standard_normal(n) * np.exp2(rng.integers(-60, 60))).astype(np.float32)
    if kind == "wide":
        return (rng.standard_normal(n) * np.exp2(rng.integers(-70, 70, n))).astype(np.float32)
    if kind == "zero":
        return np.where(rng.random(n) < 0.5, np.float32(0.0), np.float32(-0.0)).astype(np.float32)
    if kind == "subnormal":
        return (rng.integers(-(1 << 12), 1 << 12, n) * np.exp2(-149.0)).astype(np.float32)
    if kind == "large":
        return (rng.choice([-1.0, 1.0], n) * (1.0 + rng.random(n)) * 2.0**127).astype(np.float32)
    if kind == "specials":
        out = rng.standard_normal(n).astype(np.float32)
        for _ in range(int(rng.integers(1, 3))):
            out[rng.integers(n)] = rng.choice([np.inf, -np.inf, np.nan])
        return out
    if kind == "ties":
        # small odd integers times one power of two: their squares fall on half-quanta of the
        # grid whenever the quantum's exponent has the right parity
        a = int(rng.integers(-60, 40))
        return (rng.choice([-1, 1], n) * (2 * rng.integers(0, 1 << 11, n) + 1) * np.exp2(a)).astype(np.float32)
    return random_floats(rng, n, FMT32).astype(np.uint64).astype(np.uint32).view(np.float32)


def _set(rng, budget: int, most: int) -> tuple[list[np.ndarray], int, float]:
    """A set: 1 to 4 tensors (within ``budget`` values), the range width (at most ``most``
    ranges), the clip norm."""
    sizes = [SIZES[int(rng.integers(len(SIZES)))] for _ in range(int(rng.integers(1, 5)))]
    if budget >= LONGEST + 1024 and rng.random() < 0.05:
        sizes[0] = LONGEST
    while sum(sizes) > budget and len(sizes) > 1:
        sizes.pop()
    sizes = [min(n, budget) for n in sizes]
    w = int(rng.integers(len(WIDTHS)))
    while len(ranges(sizes, WIDTHS[w])) > most and w + 1 < len(WIDTHS):
        w += 1
    width = WIDTHS[w]
    return [tensor(rng, n) for n in sizes], width, CLIP_NORMS[int(rng.integers(len(CLIP_NORMS)))]


def engine_values(ts: list[np.ndarray], width: int, clip: float) -> dict:
    """The engine's per-range largest squares and grid sums, its norm and factor (whole, and
    through a pipeline's two groups)."""
    tt = [torch.from_numpy(t.copy()) for t in ts]
    squares = square_terms(tt)
    count = sum(t.numel() for t in tt)
    largest = torch.stack([s.amax() for s in squares]).amax()
    up, down = square_grid(largest, count)
    spans = ranges([t.numel() for t in tt], width)
    amax = [bits64(squares[t][s:s + n].amax().numpy()) for t, s, n in spans]
    sums = [bits64(grid_sum([squares[t][s:s + n]], up).numpy()) for t, s, n in spans]
    cut = len(tt) // 2
    total = sum((grid_sum(squares[a:b], up) for a, b in ((0, cut), (cut, len(tt))) if b > a),
                torch.zeros((), dtype=torch.float64))
    staged = norm_of_sum(total, down)
    norm, factor = global_norm(tt), clip_factor(tt, clip)
    return {"amax": amax, "sums": sums, "norm": [bits64(norm.numpy()), bits64(staged.numpy())],
            "factor": [bits32(factor.numpy()), bits32(clip_of_norm(staged, clip).numpy())]}


def _square(bits: int) -> int:
    """float64 bits of the square of the float32 magnitude ``bits`` (exact)."""
    x = np.float64(np.uint32(bits).view(np.float32))
    return bits64(x * x)


def _case(rng, n_elements: int, call, per_set: bool):
    """One eth_call over several sets: chain, reference and engine values by name."""
    sets, values, budget = [], 0, VALUES_A_CALL
    while budget > 0 and values < RANGES_A_CALL and (len(sets) if per_set else values) < n_elements:
        ts, width, clip = _set(rng, budget, 16 if per_set else RANGES_A_CALL)
        sets.append((ts, width, clip))
        values += len(ranges([t.size for t in ts], width))
        budget -= sum(t.size for t in ts)
    lengths, counts, flat = [], [], []
    for ts, width, _ in sets:
        spans = ranges([t.size for t in ts], width)
        lengths += [n for _, _, n in spans]
        counts.append(len(spans))
        flat += [bits32(ts[t][s:s + n]) for t, s, n in spans]
    clips = [int(bits64(np.float64(c))) for _, _, c in sets]
    words = call("clipSets", np.concatenate(flat).astype(">u4").tobytes(), lengths, counts, clips)
    nr = len(lengths)
    chain = {"amax": words[:nr], "sums": words[nr:2 * nr], "norm": words[2 * nr::2], "factor": words[2 * nr + 1::2]}
    want = {"amax": [], "sums": [], "norm": [], "factor": []}
    engine = {"amax": [], "sums": [], "norm": [[], []], "factor": [[], []]}
    for (ts, width, _), clip in zip(sets, clips, strict=True):
        norm, factor, maxima, sums = reference([bits32(t) for t in ts], clip, width)
        want["amax"] += maxima
        want["sums"] += sums
        want["norm"].append(norm)
        want["factor"].append(factor)
        e = engine_values(ts, width, float(np.uint64(clip).view(np.float64)))
        engine["amax"] += e["amax"]
        engine["sums"] += e["sums"]
        for k in ("norm", "factor"):
            for route in (0, 1):
                engine[k][route].append(e[k][route])
    return chain, want, engine, {"sets": len(sets), "ranges": nr}


def max_case(rng, n_elements: int, call):
    """The ranges' maxima; squared (exact), against the engine's largest squares."""
    chain, want, engine, info = _case(rng, n_elements, call, False)
    sq = lambda xs: np.array([_square(x) for x in xs], np.uint64)  # noqa: E731
    return (np.array(chain["amax"], np.uint64), np.array(want["amax"], np.uint64),
            [np.array(want["amax"], np.uint64)], info), (sq(chain["amax"]), np.array(engine["amax"], np.uint64))


def sum_case(rng, n_elements: int, call):
    chain, want, engine, info = _case(rng, n_elements, call, False)
    return (np.array(chain["sums"], np.uint64), np.array(want["sums"], np.uint64),
            [np.array(engine["sums"], np.uint64)], info), None


def factor_case(rng, n_elements: int, call):
    """Each set's norm and factor (two elements a set), against both engine routes."""
    chain, want, engine, info = _case(rng, n_elements // 2, call, True)
    both = lambda d, r=None: np.array(d["norm"] + d["factor"] if r is None  # noqa: E731
                                      else d["norm"][r] + d["factor"][r], np.uint64)
    return (both(chain), both(want), [both(engine, 0), both(engine, 1)], info), None


KINDS = {"clip_max": max_case, "clip_sum": sum_case, "clip_factor": factor_case}


def check(call, kind: str, rng, n: int) -> tuple[int, list[str]]:
    """``(elements, mismatches described)`` of one eth_call of sets: the chain against the
    reference and the engine (the maxima's squares against the engine's largest squares)."""
    (chain, want, engines, info), squares = KINDS[kind](rng, n, call)
    bad = mismatches(kind, chain, want, engines, info)
    if squares is not None:
        bad += mismatches(kind + " squared", squares[0], squares[1], [], info)
    return chain.size, bad

