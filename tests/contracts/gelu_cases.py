"""Generated cases for the one-step GELU elements (contracts/numerics/OneStepGelu.sol): GELU
and its input gradient run through the engine's eager float64 ops
(truetrain/training/ops/elementwise.py) and its C kernels (``native_chains.gelu_slope`` /
``times_slope``), which must agree, and the table route ``erf64`` alone on float64 inputs
(truetrain/training/repro_special.py), against the chain and the reference
(truetrain/numerics/special.py). Inputs: the float library's edge-rich floats, normal
values on GELU's working scales, the erf grid's exact ties ((2k + 1) / 32, round half to
even), 6 and its neighbours. Shared by tests/contracts/test_onestep_gelu.py and
scripts/onestep_kinds_fuzz.py.
"""

from __future__ import annotations

import numpy as np
import torch

from tests.contracts.float_cases import F32 as FMT32, F64 as FMT64, random_floats
from truetrain.numerics import special
from truetrain.numerics.ieee import bits32, bits64
from truetrain.training import native, native_chains
from truetrain.training.ops.elementwise import gelu_backward, gelu_forward
from truetrain.training.repro_special import erf64


def _t(bits) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(bits, np.uint32).view(np.float32)).clone()


def inputs32(rng, n: int) -> np.ndarray:
    """float32 bits: half edge-rich, half normal on scales 2^-8 .. 2^3 (and exact grid
    values times sqrt 2), NaNs canonical."""
    edge = random_floats(rng, n - n // 2, FMT32).astype(np.uint64).astype(np.uint32)
    x = rng.standard_normal(n // 2) * np.exp2(rng.integers(-8, 4, n // 2))
    x[::4] = np.float32(rng.integers(-200, 200, len(x[::4])) / 32 * np.sqrt(2))
    return bits32(np.concatenate([edge.view(np.float32), x.astype(np.float32)]))


def inputs64(rng, n: int) -> np.ndarray:
    """float64 bits for erf64: edge-rich, the grid's ties (2k + 1) / 32, its points k / 16,
    6 and its neighbours, and normal values."""
    edge = random_floats(rng, n // 4, FMT64).astype(np.uint64)
    k = rng.integers(0, 200, n // 4)
    ties = (np.where(rng.random(len(k)) < 0.5, (2 * k + 1) / 32, k / 16) * rng.choice([-1.0, 1.0], len(k)))
    near6 = np.array([6.0, np.nextafter(6.0, 0), np.nextafter(6.0, 7), 5.96875, 6.03125, -6.0, 0.0, -0.0])
    normal = rng.standard_normal(n - 2 * (n // 4) - len(near6)) * 3
    return np.concatenate([edge, np.concatenate([ties, near6, normal]).view(np.uint64)])


def _c_kernels() -> None:
    """The C route is part of the engine: it must be here (built, loaded, self-tested)."""
    if not native.ready():
        raise AssertionError(f"the engine's C kernels are not in use: {native._state.get('reason')}")


def gelu_case(rng, n: int, call):
    _c_kernels()
    x = inputs32(rng, n)
    y, _slope = native_chains.gelu_slope(_t(x))
    engine = [bits32(gelu_forward(_t(x)).numpy()), bits32(y.numpy())]
    chain = np.array(call("geluBatch", x.astype(">u4").tobytes()), np.uint32)
    return chain, special.gelu(x), engine, {"x": x}


def gelu_backward_case(rng, n: int, call):
    _c_kernels()
    x, g = inputs32(rng, n), inputs32(rng, n)
    rng.shuffle(g)
    _y, slope = native_chains.gelu_slope(_t(x))
    engine = [bits32(gelu_backward(_t(x), _t(g)).numpy()), bits32(native_chains.times_slope(_t(g), slope).numpy())]
    chain = np.array(call("geluBackwardBatch", np.stack([x, g], 1).astype(">u4").tobytes()), np.uint32)
    return chain, special.gelu_backward(x, g), engine, {"x": x, "g": g}


def erf_case(rng, n: int, call):
    u = inputs64(rng, n)
    engine = [bits64(erf64(torch.from_numpy(u.view(np.float64).copy())).numpy())]
    chain = np.array(call("erf64Batch", [int(v) for v in u]), np.uint64)
    return chain, special.erf64(u), engine, {"u": u}


KINDS = {"gelu": gelu_case, "gelu_backward": gelu_backward_case, "erf64": erf_case}


def check(call, kind: str, rng, n: int) -> tuple[int, list[str]]:
    """``(elements, mismatches described)`` of one case of ``kind`` (``n`` elements, one
    eth_call through ``call(function, *args)``): the chain against the reference and every
    engine route."""
    chain, want, engines, inputs = KINDS[kind](rng, n, call)
    want = np.asarray(want, chain.dtype)
    wrong = chain != want
    for e in engines:
        wrong |= want != np.asarray(e, chain.dtype)
    return len(chain), [f"{kind} [{i}]: chain {int(chain[i]):#x} reference {int(want[i]):#x} engine "
                        + "/".join(f"{int(e[i]):#x}" for e in engines) + " "
                        + " ".join(f"{k}={int(v[i]):#x}" for k, v in inputs.items())
                        for i in np.nonzero(wrong)[0][:5]]
