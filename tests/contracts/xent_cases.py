"""Generated cases for the one-step cross-entropy (contracts/numerics/OneStepXent.sol): logits
and labels run through the engine's ``softmax_xent`` (truetrain/training/repro_ops.py, eager)
and its C kernel (``native.softmax_xent``), which must agree, then ``xent_loss``, against the
chain and the reference (truetrain/numerics/xent.py). The partial sums (not an engine output
of their own) are checked against the reference and, summed, against the engine's
``sumexp``.

Classes 1, 2, 3, 10 (the digits MLP), 64, 100 and 256 (the LM's vocabulary), blocks of 128
(the LM's split), 64, 7 or the whole row: normal logits on scales 2^-4 to 2^12 (spreads whose
exps fall below -708 and are clamped), small integers (tied maxima), constant rows,
subnormal and near-largest logits, rows holding ±inf or NaN, the float library's edge-rich
values; labels anywhere, the maximum's among them; the mean over the batch, 1,024 rows or 3.
Shared by tests/contracts/test_onestep_xent.py and scripts/onestep_kinds_fuzz.py.
"""

from __future__ import annotations

import numpy as np
import torch

from tests.contracts.float_cases import F32 as FMT32, random_floats
from tests.contracts.onestep_kinds import mismatches
from truetrain.numerics.ieee import bits32, bits64
from truetrain.numerics.xent import partial_sums, row_sums, xent_grad, xent_loss
from truetrain.training import native
from truetrain.training.repro_ops import softmax_xent, xent_loss as engine_loss

CLASSES = [1, 2, 3, 10, 64, 100, 256]
SHORT = [1, 2, 3, 5, 10, 16]  # the partial-sum and loss kinds: many rows a call
LOGIT_KINDS = ("normal", "spread", "integers", "constant", "subnormal", "large", "specials", "edge")
#: exp64s one eth_call may run (each row's twice: its partial sums, then its gradient)
EXPS_A_CALL = 600


def logits(rng, rows: int, c: int) -> np.ndarray:
    """Rows (rows, c) of logits, each of a kind."""
    out = np.empty((rows, c), np.float32)
    for r in range(rows):
        kind = LOGIT_KINDS[int(rng.integers(len(LOGIT_KINDS)))]
        if kind == "normal":
            out[r] = rng.standard_normal(c) * np.exp2(rng.integers(-4, 8))
        elif kind == "spread":
            out[r] = rng.standard_normal(c) * np.exp2(rng.integers(8, 13))
        elif kind == "integers":
            out[r] = rng.integers(-3, 4, c)
        elif kind == "constant":
            out[r] = np.float32(rng.standard_normal() * 100)
        elif kind == "subnormal":
            out[r] = rng.integers(-100, 100, c) * 2.0**-149
        elif kind == "large":
            out[r] = rng.choice([-1.0, 1.0], c) * (1 + rng.random(c)) * 2.0**127
        elif kind == "specials":
            out[r] = rng.standard_normal(c) * 4
            out[r, rng.integers(c)] = rng.choice([np.inf, -np.inf, np.nan])
        else:
            out[r] = random_floats(rng, c, FMT32).astype(np.uint64).astype(np.uint32).view(np.float32)
    return out


def _case(rng, classes, call):
    if not native.ready():
        raise AssertionError(f"the engine's C kernels are not in use: {native._state.get('reason')}")
    c = classes[int(rng.integers(len(classes)))]
    rows = max(1, EXPS_A_CALL // (2 * c))
    width = int(rng.choice([c, 128, 64, 7]))
    total = int(rng.choice([rows, 1024, 3]))
    x = logits(rng, rows, c)
    y = rng.integers(0, c, rows)
    if rng.random() < 0.3:
        y = x.argmax(axis=1)  # the maximum's class: target 0
    xb = bits32(x)
    words = call("xentRows", c, width, total, xb.astype(">u4").tobytes(), y.astype(">u4").tobytes())
    blocks = (c + width - 1) // width
    chain = {"partials": np.array(words[:rows * blocks], np.uint64).reshape(rows, blocks),
             "grad": np.array(words[rows * blocks:rows * (blocks + c)], np.uint32).reshape(rows, c),
             "loss": np.array(words[rows * (blocks + c):], np.uint64)}
    partials = partial_sums(xb, width)
    want = {"partials": partials, "grad": xent_grad(xb, y, partials, total), "loss": xent_loss(xb, y, partials)}
    engines = []
    for route in (softmax_xent, native.softmax_xent):
        grad, sumexp, target = route(torch.from_numpy(x), torch.from_numpy(y), total)
        engines.append({"sums": bits64(sumexp.numpy()), "grad": bits32(grad.numpy()),
                        "loss": bits64(engine_loss(sumexp, target).numpy())})
    return chain, want, engines, {"c": c, "width": width, "total": total}


def partial_sum_case(rng, n_elements: int, call):
    """The partial sums against the reference; their row sums against the engine's ``sumexp``."""
    chain, want, engines, info = _case(rng, SHORT + [256], call)
    c = info["c"]
    info["count"] = chain["partials"].size
    return (np.concatenate([chain["partials"].reshape(-1), row_sums(chain["partials"], c)]),
            np.concatenate([want["partials"].reshape(-1), row_sums(want["partials"], c)]),
            [np.concatenate([want["partials"].reshape(-1), e["sums"]]) for e in engines], info)


def grad_case(rng, n_elements: int, call):
    chain, want, engines, info = _case(rng, CLASSES, call)
    return chain["grad"], want["grad"], [e["grad"] for e in engines], info


def loss_case(rng, n_elements: int, call):
    chain, want, engines, info = _case(rng, SHORT + [256], call)
    return chain["loss"], want["loss"], [e["loss"] for e in engines], info


KINDS = {"xent_partial_sum": partial_sum_case, "xent_grad": grad_case, "xent_loss": loss_case}


def check(call, kind: str, rng, n: int) -> tuple[int, list[str]]:
    """``(elements, mismatches described)`` of one case (one eth_call through
    ``call(function, *args)``): the chain against the reference and both engine routes."""
    chain, want, engines, info = KINDS[kind](rng, n, call)
    return info.pop("count", np.asarray(chain).size), mismatches(kind, chain, want, engines, info)
