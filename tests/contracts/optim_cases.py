"""Generated cases for the one-step optimizer and aggregation elements
(contracts/numerics/OneStepOptim.sol): each a set of attributes (float32 scalars drawn from
edge-rich lists: ±0, subnormals, 1, NaN/inf where the engine takes them) and a batch of
elements (tests/contracts/float_cases.random_floats: ±0, ±inf, NaN, subnormals, uniform bit
patterns, short significands whose products and sums tie, values near the largest
float32), run through the engine (truetrain/training/optim.py ``repro_update``,
truetrain/training/aggregate.py ``aggregate``), one case per element. Shared by
tests/contracts/test_onestep_optim.py and scripts/onestep_kinds_fuzz.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from tests.contracts.float_cases import F32 as FMT32, random_floats
from truetrain.numerics.ieee import bits32
from truetrain.numerics.optim_element import (AdamScalars, OuterScalars, SgdScalars, adam_element, adam_powers,
                                              aggregate_element, sgd_element)
from truetrain.training.aggregate import Contribution, aggregate
from truetrain.training.checkpoint import Checkpoint
from truetrain.training.manifest import build_manifest
from truetrain.training.optim import OptimizerSpec, repro_update

NAN, INF, TINY, MAXSUB = float("nan"), float("inf"), 2.0**-149, 2.0**-126 - 2.0**-149
LRS = [1e-3, 3e-4, 0.1, 1.0, 0.0, -0.0, TINY, 2.0**-126, 6e-5, 1e30, INF, NAN]
DECAYS = [0.0, -0.0, 0.01, 0.1, 1.0, TINY, MAXSUB, 1e-4, 3.0, NAN]
BETA1 = [0.9, 0.0, 0.5, 0.99, 1.0, 0.8, 0.95, TINY]
BETA2 = [0.999, 0.95, 0.0, 1.0, 0.9999, 0.5, 0.98, 1.0 - 2.0**-24]
EPS = [1e-8, 0.0, 1e-30, TINY, 1.0, 1e-6, -0.0, 1e-12]
CLIPS = [1.0, 0.5, 0.25, TINY, 0.0, 1e-3, 0.999, 0.75]


def f32(v: float) -> int:
    return bits32(np.float32(v))


def _pick(rng, values: list[float]) -> float:
    """A value of the list, or a random float32 on a moderate scale a quarter of the time."""
    if rng.random() < 0.25:
        return float(np.float32(rng.random() * 2.0 ** int(rng.integers(-30, 4))))
    return values[int(rng.integers(len(values)))]


def elements(rng, n: int, positive: bool = False) -> np.ndarray:
    """``n`` float32 bit patterns, edge-rich; ``positive``: mostly the sign cleared (a
    second moment)."""
    x = random_floats(rng, n, FMT32).astype(np.uint64).astype(np.uint32)
    if positive:
        x = np.where(rng.random(n) < 0.85, x & np.uint32(0x7FFFFFFF), x)
    return x


def _t(bits: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(bits, dtype=np.uint32).view(np.float32)).clone()


def _power(rng, beta: float) -> float:
    """beta_power before a step: 1 (the first), beta**t by float32 products, or an edge."""
    r = rng.random()
    if r < 0.3:
        return 1.0
    if r < 0.9:
        p = np.float32(1.0)
        with np.errstate(all="ignore"):
            for _ in range(int(rng.integers(1, 200))):
                p = np.float32(p * np.float32(beta))
        return float(p)
    return [0.0, TINY, 0.5, MAXSUB][int(rng.integers(4))]


@dataclass
class Case:
    """One attribute set and its elements: ``inputs`` (name -> uint32 array), ``scalars``
    (the state's 0-dim values: bits), the engine's ``outputs`` (name -> uint32 array)."""

    attrs: object
    inputs: dict[str, np.ndarray]
    scalars: dict[str, int] = field(default_factory=dict)
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    weights: list[int] = field(default_factory=list)


def adam_case(rng, n: int) -> Case:
    kind = "adamw" if rng.random() < 0.75 else "adam"
    lr, wd, b1, b2, eps = (_pick(rng, v) for v in (LRS, DECAYS, BETA1, BETA2, EPS))
    clipped = kind == "adamw" and rng.random() < 0.5
    clip = _pick(rng, CLIPS)
    b1p, b2p = _power(rng, b1), _power(rng, b2)
    inputs = {"p": elements(rng, n), "g": elements(rng, n), "m": elements(rng, n), "v": elements(rng, n, True)}
    spec = OptimizerSpec(kind=kind, lr=lr, weight_decay=wd, betas=(b1, b2), eps=eps,
                         clip_norm=1.0 if clipped else 0.0)
    params, grads = {"w": _t(inputs["p"])}, {"w": _t(inputs["g"])}
    state = {"exp_avg.w": _t(inputs["m"]), "exp_avg_sq.w": _t(inputs["v"]),
             "beta1_power": torch.tensor(b1p, dtype=torch.float32), "beta2_power": torch.tensor(b2p, dtype=torch.float32)}
    if kind == "adamw":
        state["lr_step"] = torch.tensor(0, dtype=torch.int64)  # no warm-up, no decay: lr_at(0) = lr
    with np.errstate(all="ignore"):
        repro_update(spec, params, grads, state, clip=torch.tensor(clip, dtype=torch.float32))
    attrs = AdamScalars(f32(lr), f32(wd), f32(b1), f32(b2), f32(eps), kind == "adamw", clipped)
    return Case(attrs, inputs, {"b1p": f32(b1p), "b2p": f32(b2p), "clip": f32(clip)},
                {"p": bits32(params["w"].numpy()), "m": bits32(state["exp_avg.w"].numpy()),
                 "v": bits32(state["exp_avg_sq.w"].numpy()),
                 "powers": np.array([bits32(state["beta1_power"].numpy()), bits32(state["beta2_power"].numpy())],
                                    np.uint32)})


def sgd_case(rng, n: int) -> Case:
    lr, wd = _pick(rng, LRS), _pick(rng, DECAYS)
    mu = [0.9, 0.0, -0.0, 0.5, 0.99, 1.0, TINY][int(rng.integers(7))] if rng.random() < 0.8 else _pick(rng, [0.9])
    inputs = {"p": elements(rng, n), "g": elements(rng, n), "buf": elements(rng, n)}
    spec = OptimizerSpec(kind="sgd", lr=lr, momentum=mu, weight_decay=wd)
    params, grads = {"w": _t(inputs["p"])}, {"w": _t(inputs["g"])}
    state = {"momentum.w": _t(inputs["buf"])} if mu else {}
    with np.errstate(all="ignore"):
        repro_update(spec, params, grads, state)
    return Case(SgdScalars(f32(lr), f32(wd), f32(mu)), inputs, {},
                {"p": bits32(params["w"].numpy()),
                 "buf": bits32(state["momentum.w"].numpy()) if mu else inputs["buf"]})


def _manifest(outer: dict | None, inputs: int, outputs: int):
    ref = {"cid": "bafk" + "0" * 24, "hash": "0x" + "11" * 32, "samples": 64}
    return build_manifest(name="onestep-aggregate", seed=7, model={"kind": "mlp", "widths": [inputs, outputs]},
                          optimizer={"kind": "sgd", "lr": 0.1}, batch_size=8, steps_per_task=1,
                          checkpoint_interval=1, rounds=2, shards=[ref], test_set=ref, outer=outer)


def _weight(rng) -> int:
    r = rng.random()
    if r < 0.2:
        return 1
    if r < 0.3:
        return 2**29 - 1 - int(rng.integers(0, 3))
    return int(rng.integers(1, 2 ** int(rng.integers(1, 30))))


def aggregate_case(rng, n_in: int = 15, n_out: int = 8) -> Case:
    """One aggregation of 1 to 8 workers' models of a small MLP (``n_out * (n_in + 1)``
    elements), FedAvg or DiLoCo (Nesterov or not, with or without a momentum buffer yet)."""
    workers = int(rng.integers(1, 9))
    outer = None
    if rng.random() < 0.8:
        outer = {"lr": [0.7, 1.0, 0.1, 10.0, TINY, 2.0**-126][int(rng.integers(6))] if rng.random() < 0.7
                 else float(np.float32(rng.random() * 10) or 1.0),
                 "momentum": [0.9, 0.0, 0.5, 0.99, TINY, 1.0 - 2.0**-24][int(rng.integers(6))],
                 "nesterov": bool(rng.random() < 0.7)}
    m = _manifest(outer, n_in, n_out)
    shapes = {"fc.0.weight": (n_out, n_in), "fc.0.bias": (n_out,)}
    n = n_out * (n_in + 1)
    near = elements(rng, n)
    xs = [np.where(rng.random(n) < 0.5, near ^ np.uint32(rng.integers(0, 4)), elements(rng, n)) for _ in range(workers)]
    theta, mom = elements(rng, n), elements(rng, n)
    with_momentum = outer is not None and rng.random() < 0.7

    def split(bits):
        return {"fc.0.weight": _t(bits[:n_out * n_in]).view(*shapes["fc.0.weight"]), "fc.0.bias": _t(bits[n_out * n_in:])}

    weights = [_weight(rng) for _ in range(workers)]
    contribs = [Contribution(i, w, Checkpoint(1, bytes(32), {"model." + k: v for k, v in split(x).items()}))
                for i, (x, w) in enumerate(zip(xs, weights))]
    start = {"model." + k: v for k, v in split(theta).items()}
    if with_momentum:
        start.update({"outer.momentum." + k: v for k, v in split(mom).items()})
    with np.errstate(all="ignore"):
        out = aggregate(m, 0, contribs, Checkpoint(0, bytes(32), start))

    def flat(group):
        g = out.group(group)
        return bits32(torch.cat([g["fc.0.weight"].reshape(-1), g["fc.0.bias"]]).numpy())

    spec = m.outer
    attrs = OuterScalars(outer is not None, f32(spec.lr) if spec else 0, f32(spec.momentum) if spec else 0,
                         bool(spec and spec.nesterov))
    inputs = {"theta": theta, "momentum": mom if with_momentum else np.zeros(n, np.uint32)}
    inputs.update({f"x{i}": x for i, x in enumerate(xs)})
    outputs = {"model": flat("model"), "momentum": flat("outer.momentum") if outer else inputs["momentum"]}
    return Case(attrs, inputs, {}, outputs, weights)


# --- the comparison ---------------------------------------------------------------------

#: one generator per kind; each case's elements go to the harness in one eth_call
KINDS = {"adam": adam_case, "sgd": sgd_case, "aggregate": aggregate_case}


def _packed(*columns) -> bytes:
    return np.stack([np.asarray(c, np.uint32) for c in columns], axis=1).astype(">u4").tobytes()


def _chain(call, kind: str, c: Case) -> list[np.ndarray]:
    """The harness's results for every element of ``c``, one array per output."""
    i, a = c.inputs, c.attrs
    if kind == "adam":
        attrs = (a.lr, a.weight_decay, a.beta1, a.beta2, a.eps, a.decoupled, a.clipped)
        words = call("adamBatch", attrs, c.scalars["b1p"], c.scalars["b2p"], c.scalars["clip"],
                     _packed(i["p"], i["g"], i["m"], i["v"]))
        last = int(words[-1])
        return [np.array([(int(w) >> s) & 0xFFFFFFFF for w in words[:-1]], np.uint32) for s in (64, 32, 0)] + [
            np.array([last >> 32, last & 0xFFFFFFFF], np.uint32)]
    elif kind == "sgd":
        words = call("sgdBatch", (a.lr, a.weight_decay, a.momentum), _packed(i["p"], i["g"], i["buf"]))
        shifts = (32, 0)
    else:
        xs = [i[f"x{k}"] for k in range(len(c.weights))]
        words = call("aggregateBatch", (a.outer, a.lr, a.momentum, a.nesterov), c.weights,
                     _packed(i["theta"], i["momentum"], *xs))
        shifts = (32, 0)
    return [np.array([(int(w) >> s) & 0xFFFFFFFF for w in words], np.uint32) for s in shifts]


def reference(kind: str, c: Case) -> list[np.ndarray]:
    """truetrain/numerics/optim_element.py's results for every element of ``c``."""
    i = c.inputs
    if kind == "adam":
        return list(adam_element(c.attrs, i["p"], i["g"], i["m"], i["v"], c.scalars["b1p"], c.scalars["b2p"],
                                 c.scalars["clip"])) + [np.array(adam_powers(c.attrs, c.scalars["b1p"], c.scalars["b2p"]),
                                                                 np.uint32)]
    if kind == "sgd":
        return list(sgd_element(c.attrs, i["p"], i["g"], i["buf"]))
    xs = [i[f"x{k}"] for k in range(len(c.weights))]
    return list(aggregate_element(c.attrs, xs, c.weights, i["theta"], i["momentum"]))


def check(call, kind: str, rng, n: int) -> tuple[int, list[str]]:
    """``(elements, mismatches described)`` of one generated case of ``kind`` with ``n``
    elements (an aggregation: an MLP of 8 x (n / 8 - 1) weights and 8 biases), through
    the harness (``call(function, *args)``: one eth_call) against the reference and the
    engine."""
    c = aggregate_case(rng, n // 8 - 1, 8) if kind == "aggregate" else KINDS[kind](rng, n)
    names = list(c.outputs)
    chain, ref = _chain(call, kind, c), reference(kind, c)
    bad = []
    for name, got, want in zip(names, chain, ref):
        engine = np.broadcast_to(np.asarray(c.outputs[name], np.uint32), got.shape)
        want = np.broadcast_to(np.asarray(want, np.uint32), got.shape)
        for e in np.nonzero((got != want) | (want != engine))[0][:5]:
            bad.append(f"{kind} {name}[{e}] {c.attrs} {c.scalars}: chain {int(got[e]):#010x} reference "
                       f"{int(want[e]):#010x} engine {int(engine[e]):#010x} inputs "
                       + " ".join(f"{k}={int(v[e]):#010x}" for k, v in c.inputs.items()))
    return len(chain[0]), bad
