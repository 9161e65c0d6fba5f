"""Generated cases for the one-step LayerNorm elements (contracts/numerics/OneStepLayerNorm.sol):
batches of rows run through the engine's eager ``ln_forward`` / ``ln_backward``
(truetrain/training/ops/elementwise.py) and its C kernels (``native_chains.ln_forward`` /
``ln_backward``), which must agree, against the chain and the reference (truetrain/numerics/layernorm.py).
Rows of 1, 3, 7, 64, 100 and 256 elements (the padding of the pairwise sum, the LM's d):
normal rows on scales 2^±40, constant rows (variance 0), rows whose squares overflow,
subnormal rows, rows holding inf or NaN, edge-rich rows; eps 1e-5 (the LM's), 0, 1e-12 and
subnormal; gains and shifts with ±0 and edge values. Shared by
tests/contracts/test_onestep_layernorm.py and scripts/onestep_kinds_fuzz.py.
"""

from __future__ import annotations

import numpy as np
import torch

from tests.contracts.float_cases import F32 as FMT32, random_floats
from truetrain.numerics.ieee import bits32
from truetrain.numerics.layernorm import ln_backward as ref_ln_backward, ln_forward as ref_ln_forward
from truetrain.training import native, native_chains
from truetrain.training.ops.elementwise import ln_backward, ln_forward

WIDTHS = [1, 3, 7, 64, 100, 256]
EPS = [1e-5, 0.0, 1e-12, 5e-324, 1e-5, 1e-5]
ROW_KINDS = ("normal", "constant", "overflow", "subnormal", "specials", "edge")


def _floats(rng, n: int) -> np.ndarray:
    return random_floats(rng, n, FMT32).astype(np.uint64).astype(np.uint32).view(np.float32)


def rows(rng, count: int, n: int) -> np.ndarray:
    """``count`` float32 rows of ``n``, each of a kind in turn."""
    out = np.empty((count, n), np.float32)
    for r in range(count):
        kind = ROW_KINDS[int(rng.integers(len(ROW_KINDS)))]
        if kind == "normal":
            out[r] = rng.standard_normal(n) * np.exp2(rng.integers(-40, 40))
        elif kind == "constant":
            out[r] = np.float32(rng.standard_normal() * np.exp2(rng.integers(-30, 30)))
        elif kind == "overflow":
            out[r] = rng.standard_normal(n) * 2.0**120
        elif kind == "subnormal":
            out[r] = rng.standard_normal(n) * 2.0**-140
        elif kind == "specials":
            out[r] = rng.standard_normal(n)
            out[r, rng.integers(n)] = rng.choice([np.inf, -np.inf, np.nan])
        else:
            out[r] = _floats(rng, n)
    return out


def _inputs(rng, n_elements: int):
    """``(n, x rows, gain, shift, eps)`` of one case."""
    if not native.ready():
        raise AssertionError(f"the engine's C kernels are not in use: {native._state.get('reason')}")
    n = WIDTHS[int(rng.integers(len(WIDTHS)))]
    x = rows(rng, max(1, n_elements // n), n)
    w = np.where(rng.random(n) < 0.8, 1.0 + 0.1 * rng.standard_normal(n), _floats(rng, n)).astype(np.float32)
    b = np.where(rng.random(n) < 0.8, 0.1 * rng.standard_normal(n), _floats(rng, n)).astype(np.float32)
    b[rng.random(n) < 0.1] = -0.0
    return n, x, w, b, EPS[int(rng.integers(len(EPS)))]


def layernorm_case(rng, n_elements: int, call):
    n, x, w, b, eps = _inputs(rng, n_elements)
    args = [torch.from_numpy(v.copy()) for v in (x, w, b)]
    engine = [bits32(ln_forward(*args, eps)[0].numpy()), bits32(native_chains.ln_forward(*args, eps)[0].numpy())]
    xb, wb, bb = (bits32(v) for v in (x, w, b))
    eps_bits = int(np.float64(eps).view(np.uint64))
    chain = np.array(call("layerNormRows", eps_bits, n, xb.astype(">u4").tobytes(), wb.astype(">u4").tobytes(),
                          bb.astype(">u4").tobytes()), np.uint32).reshape(x.shape)
    return chain, ref_ln_forward(xb, wb, bb, eps_bits), engine, {"n": n, "eps": eps}


def layernorm_backward_case(rng, n_elements: int, call):
    """The input gradient and the gain's term from the forward's saved float64 ``xhat`` and
    ``rstd`` (eager and C: the engine's two routes)."""
    n, x, w, b, eps = _inputs(rng, n_elements)
    g = rows(rng, len(x), n)
    tx, tw, tg = (torch.from_numpy(v.copy()) for v in (x, w, g))
    _, xhat, rstd = ln_forward(tx, tw, torch.from_numpy(b), eps)
    engine = [np.stack([bits32(v.numpy()) for v in route(tg, xhat, rstd, tw)])
              for route in (ln_backward, native_chains.ln_backward)]
    xb, gb, wb = (bits32(v) for v in (x, g, w))
    eps_bits = int(np.float64(eps).view(np.uint64))
    words = call("layerNormBackwardRows", eps_bits, n, xb.astype(">u4").tobytes(), gb.astype(">u4").tobytes(),
                 wb.astype(">u4").tobytes())
    chain = np.stack([np.array([w >> 32 for w in words], np.uint32), np.array([w & 0xFFFFFFFF for w in words], np.uint32)])
    return chain.reshape(engine[0].shape), np.stack(ref_ln_backward(xb, gb, wb, eps_bits)), engine, {"n": n, "eps": eps}


KINDS = {"layernorm": layernorm_case, "layernorm_backward": layernorm_backward_case}


def check(call, kind: str, rng, n: int) -> tuple[int, list[str]]:
    """``(elements, mismatches described)`` of one batch of rows (about ``n`` elements, one
    eth_call through ``call(function, *args)``): the chain against the reference and both
    engine routes."""
    chain, want, engines, info = KINDS[kind](rng, n, call)
    chain, want = chain.reshape(-1), np.asarray(want, np.uint32).reshape(-1)
    engines = [np.asarray(e, np.uint32).reshape(-1) for e in engines]
    wrong = chain != want
    for e in engines:
        wrong |= want != e
    elements = chain.size if kind == "layernorm" else chain.size // 2  # a backward element is (dx, g * xhat)
    return elements, [f"{kind} n={info['n']} eps={info['eps']} [{i}]: chain {int(chain[i]):#010x} "
                      f"reference {int(want[i]):#010x} engine " + "/".join(f"{int(e[i]):#010x}" for e in engines)
                      for i in np.nonzero(wrong)[0][:5]]
