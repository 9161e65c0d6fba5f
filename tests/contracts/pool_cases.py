"""Generated cases for the one-step 2x2 max pooling (contracts/numerics/OneStepPool.sol): maps
through the engine's ``ops.conv.pool`` / ``unpool`` on both routes (torch's ``amax`` and
``first_max_mask``, the C kernels ``tt_pool`` / ``tt_unpool``), which must agree, against the
chain (OneStepPoolHarness's batches) and the reference (truetrain/numerics/pool.py).

Maps (B, H, W, C) of B 1 to 3, H and W 2 to 28 (even; 28 and 14: the digits CNN's), C 1 to
16: ReLU outputs (+0 and positives, the CNN's), normal values, signed zeros alone (-0 and +0
in every order), small integers (tied maxima), windows holding ±inf or NaN, subnormals, the
float library's edge-rich values; the backward's gradients from the same kinds (NaN and inf
where the mask is 0, -0). Shared by tests/contracts/test_onestep_pool.py and
scripts/onestep_kinds_fuzz.py.
"""

from __future__ import annotations

import numpy as np

from tests.contracts.float_cases import F32 as FMT32, random_floats
from tests.contracts.onestep_kinds import mismatches, tensor_of
from truetrain.numerics.ieee import bits32
from truetrain.numerics.pool import pool, unpool
from truetrain.training import native
from truetrain.training.ops import conv

SIDES = [2, 4, 6, 8, 14, 28]
CHANNELS = [1, 2, 3, 8, 16]
#: map elements one eth_call reads at most
MAP_ELEMENTS = 4096
MAP_KINDS = ("relu", "normal", "zeros", "integers", "specials", "subnormal", "edge")


def values(rng, n: int) -> np.ndarray:
    """``n`` map values (uint32 bits, NaN canonical), of a kind."""
    kind = MAP_KINDS[int(rng.integers(len(MAP_KINDS)))]
    if kind == "relu":
        x = np.maximum(rng.standard_normal(n), 0.0).astype(np.float32)
    elif kind == "normal":
        x = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 20))).astype(np.float32)
    elif kind == "zeros":
        x = np.where(rng.random(n) < 0.5, np.float32(0.0), np.float32(-0.0)).astype(np.float32)
    elif kind == "integers":
        x = rng.integers(-2, 3, n).astype(np.float32)
    elif kind == "specials":
        x = rng.integers(-2, 3, n).astype(np.float32)
        hit = rng.random(n) < 0.2
        x[hit] = rng.choice([np.inf, -np.inf, np.nan, 0.0, -0.0], int(hit.sum()))
    elif kind == "subnormal":
        x = (rng.integers(-8, 8, n) * np.exp2(-149.0)).astype(np.float32)
    else:
        return bits32(random_floats(rng, n, FMT32).astype(np.uint64).astype(np.uint32).view(np.float32))
    return bits32(x)


def _map(rng, n_elements: int) -> tuple[tuple[int, int, int, int], np.ndarray]:
    """A shape (B, H, W, C) of about ``n_elements`` pooled elements and its values."""
    if not native.ready():
        raise AssertionError(f"the engine's C kernels are not in use: {native._state.get('reason')}")
    while True:  # a map of at most MAP_ELEMENTS (one eth_call's gas)
        h, w = (int(rng.choice(SIDES)) for _ in range(2))
        c = int(rng.choice(CHANNELS))
        if h * w * c <= MAP_ELEMENTS:
            break
    b = int(np.clip(n_elements // max(1, h * w * c // 4), 1, MAP_ELEMENTS // (h * w * c)))
    b = min(b, 3)
    shape = (b, h, w, c)
    return shape, values(rng, b * h * w * c)


def pool_case(rng, n_elements: int, call):
    """Every pooled element and mask element of a map."""
    shape, a = _map(rng, n_elements)
    words = np.array(call("poolBatch", shape, a.astype(">u4").tobytes()), np.uint32)
    out, mask = pool(a, shape)
    want = np.concatenate([out.reshape(-1), mask.reshape(-1)])
    t = tensor_of(a).view(shape)
    engines = [np.concatenate([bits32(x.numpy()).reshape(-1) for x in route])
               for route in (conv.pool(t), native.pool(t))]
    return words, want, engines, {"shape": shape}


def unpool_case(rng, n_elements: int, call):
    """Every element of the input gradient of a map, from its pooling mask and a gradient."""
    shape, a = _map(rng, n_elements // 4)
    b, h, w, c = shape
    _, mask = pool(a, shape)
    g = values(rng, b * h * w * c // 4)
    words = np.array(call("unpoolBatch", shape, g.astype(">u4").tobytes(), mask.astype(">u4").tobytes()), np.uint32)
    gt, mt = tensor_of(g).view(b, h // 2, w // 2, c), tensor_of(mask).view(b, h // 2, w // 2, c, 4)
    engines = [bits32(route(gt, mt).numpy()).reshape(-1) for route in (conv.unpool, native.unpool)]
    return words, unpool(g, mask, shape).reshape(-1), engines, {"shape": shape}


KINDS = {"pool": pool_case, "unpool": unpool_case}


def check(call, kind: str, rng, n: int) -> tuple[int, list[str]]:
    """``(elements, mismatches described)`` of one map (one eth_call through ``call``): the
    chain against the reference and both engine routes."""
    chain, want, engines, info = KINDS[kind](rng, n, call)
    return chain.size, mismatches(kind, chain, want, engines, info)
