"""Generated cases for the one-step elementwise and data-movement elements
(contracts/numerics/OneStepElementwise.sol), each run through the engine: the ReLU and its
backward mask (truetrain/training/intgemm_fused.py's eager ``_relu`` / ``_apply_mask`` and
the compiled kernels' select formulations, which must agree), ``+`` with broadcasting (the
LM's embedding sum, bias rows, residuals), ``permute(...).contiguous()`` (transposes and the
LM's head split), the embedding's gather (truetrain/training/ops/linear.py ``embedding``)
and dropout (truetrain/training/ops/dropout.py). Elements come from the float library's
generators (±0, ±inf, NaN, subnormals, ties, uniform bit patterns). Shared by
tests/contracts/test_onestep_elementwise.py and scripts/onestep_kinds_fuzz.py.
"""

from __future__ import annotations

import numpy as np
import torch

from tests.contracts.float_cases import F32 as FMT32, random_floats
from truetrain.numerics import elementwise as ref
from truetrain.numerics.ieee import bits32
from truetrain.training.intgemm import GemmEngine
from truetrain.training.intgemm_fused import _apply_mask, _apply_mask_selects, _relu, _relu_selects
from truetrain.training.ops.dropout import dropout
from truetrain.training.ops.linear import embedding
from truetrain.training.ops.step import ReproStep

#: (shape, perm) of the LM's permutes (batch 2, T 8, 2 heads of 4) and transposes
PERMUTES = [((2, 8, 3, 2, 4), (2, 0, 3, 1, 4)), ((2, 2, 8, 4), (0, 2, 1, 3)), ((16, 12), (1, 0)), ((5, 7, 3), (2, 0, 1))]
DROPOUT_P = [0.1, 0.5, 0.9, 0.0, 2.0**-40, 0.25, 3 * 2.0**-33, 5 * 2.0**-33, 0.9 - 2.0**-50]


def floats(rng, n: int) -> np.ndarray:
    """``n`` float32 bit patterns, NaNs canonical (as a tensor's tree holds them)."""
    return bits32(random_floats(rng, n, FMT32).astype(np.uint64).astype(np.uint32).view(np.float32))


def _t(bits) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(bits, np.uint32).view(np.float32)).clone()


def _same(*outs) -> np.ndarray:
    bits = [bits32(o.numpy()) for o in outs]
    for other in bits[1:]:
        if not np.array_equal(bits[0], other):
            raise AssertionError("the engine's formulations disagree")
    return bits[0]


def relu_case(rng, n: int, call):
    h = floats(rng, n)
    (y, mask), (ys, masks) = _relu(_t(h)), _relu_selects(_t(h))
    engine = [_same(y, ys), _same(mask, masks)]
    words = call("reluBatch", h.astype(">u4").tobytes())
    chain = [np.array([w >> 32 for w in words], np.uint32), np.array([w & 0xFFFFFFFF for w in words], np.uint32)]
    return chain, list(ref.relu(h)), engine, {"h": h}


def apply_mask_case(rng, n: int, call):
    g = floats(rng, n)
    mask = np.where(rng.random(n) < 0.5, np.uint32(0x3F800000), np.uint32(0))
    engine = [_same(_apply_mask(_t(mask), _t(g)), _apply_mask_selects(_t(mask), _t(g)))]
    chain = [np.array(call("applyMaskBatch", np.stack([g, mask], 1).astype(">u4").tobytes()), np.uint32)]
    return chain, [ref.apply_mask(g, mask)], engine, {"g": g, "mask": mask}


def add_case(rng, n: int, call):
    rows = [1, 2, 4, 8][int(rng.integers(4))]
    a = floats(rng, n)
    b = floats(rng, n // rows)
    if rng.random() < 0.3:  # b built to cancel a or to tie with it
        b = np.where(rng.random(len(b)) < 0.5, a[:len(b)] ^ np.uint32(0x80000000), a[:len(b)] + np.uint32(1))
    engine = [bits32((_t(a).view(rows, -1) + _t(b)).reshape(-1).numpy())]
    chain = [np.array(call("addBatch", a.astype(">u4").tobytes(), b.astype(">u4").tobytes()), np.uint32)]
    return chain, [ref.add(a, b)], engine, {"a": a, "b": np.tile(b, rows)}


def permute_case(rng, n: int, call):
    shape, perm = PERMUTES[int(rng.integers(len(PERMUTES)))]
    if rng.random() < 0.5:  # a random shape and order
        shape = tuple(int(d) for d in rng.integers(1, 7, int(rng.integers(2, 6))))
        perm = tuple(int(d) for d in rng.permutation(len(shape)))
    x = floats(rng, int(np.prod(shape)))
    out = bits32(_t(x).view(*shape).permute(*perm).contiguous().reshape(-1).numpy())
    picks = rng.integers(0, len(x), min(n, len(x)))
    want = np.array([x[ref.permute_source(shape, perm, int(i))] for i in picks], np.uint32)
    chain = [np.array(call("permuteBatch", list(shape), list(perm), x.astype(">u4").tobytes(), [int(i) for i in picks]),
                      np.uint32)]
    return chain, [bits32(want.view(np.float32))], [out[picks]], {"pick": picks.astype(np.uint32)}


def embedding_case(rng, n: int, call):
    rows, cols = int(rng.integers(1, 300)), int(rng.integers(1, 40))
    count = max(1, n // cols + 1)
    ids = rng.integers(0, rows, count)
    ids[: min(count, 2)] = [0, rows - 1][: min(count, 2)]
    table = floats(rng, rows * cols)
    step = ReproStep(GemmEngine(), 2, count)
    out = bits32(embedding(torch.from_numpy(ids), _t(table).view(rows, cols), step, "tok_emb").reshape(-1).numpy())
    picks = [(int(r), int(c)) for r, c in zip(rng.integers(0, count, n), rng.integers(0, cols, n))]
    want = np.array([table[ref.embedding_source([int(i) for i in ids], rows, cols, r, c)] for r, c in picks], np.uint32)
    words = ids.astype(">u4").tobytes()
    chain = [np.array(call("embeddingBatch", words, table.astype(">u4").tobytes(), rows, cols,
                           [(r << 128) | c for r, c in picks]), np.uint32)]
    return chain, [bits32(want.view(np.float32))], [out[[r * cols + c for r, c in picks]]], {}


def dropout_case(rng, n: int, call):
    p = DROPOUT_P[int(rng.integers(len(DROPOUT_P)))] if rng.random() < 0.7 else float(rng.random() * 0.9)
    per = int(rng.integers(1, 33))
    samples = max(1, n // per)
    first_sample = int(rng.integers(0, 64)) if rng.random() < 0.5 else (2**32 // per) - 3 + int(rng.integers(0, 8))
    key, site = rng.bytes(32), ["emb", "blocks.0.attn", "blocks.3.mlp", ""][int(rng.integers(4))]
    x = floats(rng, samples * per)
    out = bits32(dropout(_t(x).view(samples, per), p, key, site, first_sample).reshape(-1).numpy())
    first = first_sample * per
    attrs = (key, site.encode(), int(np.float64(p).view(np.uint64)), first)
    chain = [np.array(call("dropoutBatch", attrs, x.astype(">u4").tobytes()), np.uint32)]
    return chain, [ref.dropout(x, ref.dropout_words(key, site), first, p)], [out], {"x": x}


KINDS = {"relu": relu_case, "apply_mask": apply_mask_case, "add": add_case, "permute": permute_case,
         "embedding": embedding_case, "dropout": dropout_case}


def check(call, kind: str, rng, n: int) -> tuple[int, list[str]]:
    """``(elements, mismatches described)`` of one case of ``kind`` (about ``n`` elements,
    one eth_call through ``call(function, *args)``): the chain against the reference and
    the engine."""
    chain, want, engine, inputs = KINDS[kind](rng, n, call)
    bad = []
    for k, (got, w, e) in enumerate(zip(chain, want, engine)):
        w, e = np.asarray(w, np.uint32), np.asarray(e, np.uint32)
        for i in np.nonzero((got != w) | (w != e))[0][:5]:
            bad.append(f"{kind} output {k} [{i}]: chain {int(got[i]):#010x} reference {int(w[i]):#010x} engine "
                       f"{int(e[i]):#010x} " + " ".join(f"{name}={int(v[i]):#010x}" for name, v in inputs.items()
                                                        if i < len(v)))
    return len(chain[0]), bad
