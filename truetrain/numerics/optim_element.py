"""One element of the optimizers' updates and of DiLoCo's aggregation, on float32 bit
patterns: the semantics the engine (truetrain/training/optim.py ``repro_update``,
truetrain/training/aggregate.py) and the one-step verifier
(contracts/numerics/OneStepOptim.sol) both compute. Every operation is one IEEE rounding,
in the engine's order; the scalars are the program's attributes (float32 bits, the
hyperparameters already rounded to float32 as the engine rounds them). A hyperparameter
that is ±0 skips its term (the engine's ``if wd:``), NaN does not.

Arguments are ints or uint32 arrays (elementwise, the scalars broadcast); results likewise.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ieee import (ONE32, add32, add64, div32, div64, int_to64, mul32, mul64, nonzero, sqrt32, sub32, sub64,
                   to32, to64)


@dataclass(frozen=True)
class AdamScalars:
    """Adam's attributes (float32 bits): ``lr`` at this step, ``weight_decay``, the betas,
    ``eps``; ``decoupled`` (AdamW: ``p -= p * (lr * wd)``; Adam: ``g += p * wd``, and AdamW too
    where ``float32(lr * wd)`` is ±0, as the engine's ``elif wd`` does);
    ``clipped`` (AdamW with a clip norm: the gradient times the step's clip factor)."""

    lr: int
    weight_decay: int
    beta1: int
    beta2: int
    eps: int
    decoupled: bool = True
    clipped: bool = False


def adam_element(s: AdamScalars, p, g, m, v, beta1_power: int, beta2_power: int, clip: int = ONE32):
    """``(p, m, v)`` after one Adam(W) update of element ``p`` with gradient ``g`` and moments
    ``m``, ``v``; ``beta*_power``: the state's running products before the step; ``clip``:
    the clip factor (used when ``s.clipped``)."""
    if s.clipped:
        g = mul32(g, clip)
    b1p, b2p = adam_powers(s, beta1_power, beta2_power)
    # lr / (1 - b1p) with a tensor divisor is torch's __rtruediv__: (1 - b1p).reciprocal() * lr
    step_size = mul32(div32(ONE32, sub32(ONE32, b1p)), s.lr)
    bc2_sqrt = sqrt32(sub32(ONE32, b2p))
    decay = mul32(s.lr, s.weight_decay) if s.decoupled else 0  # float32(lr * wd): the float64 product is exact
    if nonzero(decay):
        p = sub32(p, mul32(p, decay))
    elif nonzero(s.weight_decay):  # Adam; and AdamW where lr * wd rounds to ±0 (the engine's elif)
        g = add32(g, mul32(p, s.weight_decay))
    m = add32(mul32(m, s.beta1), mul32(g, sub32(ONE32, s.beta1)))
    v = add32(mul32(v, s.beta2), mul32(mul32(g, g), sub32(ONE32, s.beta2)))
    denom = add32(div32(sqrt32(v), bc2_sqrt), s.eps)
    return sub32(p, mul32(div32(m, denom), step_size)), m, v


def adam_powers(s: AdamScalars, beta1_power: int, beta2_power: int) -> tuple[int, int]:
    """The state's running products after the step: ``beta1_power * b1``, ``beta2_power * b2``."""
    return mul32(beta1_power, s.beta1), mul32(beta2_power, s.beta2)


@dataclass(frozen=True)
class SgdScalars:
    """SGD's attributes (float32 bits): ``lr``, ``weight_decay``, ``momentum``."""

    lr: int
    weight_decay: int
    momentum: int


def sgd_element(s: SgdScalars, p, g, buf=0):
    """``(p, buf)`` after one SGD update (``buf``: the momentum buffer, unchanged without
    momentum): ``g += p * wd``; ``buf = buf * mu + g``; ``p -= buf * lr``."""
    if nonzero(s.weight_decay):
        g = add32(g, mul32(p, s.weight_decay))
    if nonzero(s.momentum):
        buf = add32(mul32(buf, s.momentum), g)
        g = buf
    return sub32(p, mul32(g, s.lr)), buf


@dataclass(frozen=True)
class OuterScalars:
    """The aggregation's attributes: ``outer`` (DiLoCo; without it FedAvg's mean), the
    outer ``lr`` and ``momentum`` (float32 bits), ``nesterov``."""

    outer: bool
    lr: int = 0
    momentum: int = 0
    nesterov: bool = False


def mean_element(xs: list, weights: list[int]):
    """float64 bits of the weighted mean: ``Σ x_i * w_i`` in float64 in task order (each
    product exact), from +0, divided by ``Σ w_i``."""
    acc = 0
    for x, w in zip(xs, weights):
        acc = add64(acc, mul64(to64(x), int_to64(w)))
    return div64(acc, int_to64(sum(weights)))


def aggregate_element(s: OuterScalars, xs: list, weights: list[int], theta=0, momentum=0):
    """``(model, momentum)`` of one element after aggregation: FedAvg ``float32(mean)``
    (momentum returned as given); DiLoCo ``delta = float32(theta - mean)`` (float64
    subtraction, then rounded), ``v = momentum * mu + delta``, ``g = delta + v * mu``
    (Nesterov) or ``v``, ``theta - g * lr``. ``momentum``: +0 before the first round."""
    mean = mean_element(xs, weights)
    if not s.outer:
        return to32(mean), momentum
    delta = to32(sub64(to64(theta), mean))
    v = add32(mul32(momentum, s.momentum), delta)
    g = add32(delta, mul32(v, s.momentum)) if s.nesterov else v
    return sub32(theta, mul32(g, s.lr)), v
