// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Float32} from "./Float32.sol";
import {Float64} from "./Float64.sol";
import {OneStepGemm} from "./OneStepGemm.sol";

/// @title OneStepOptim
/// @notice The one-step verifier of the updates: one element of the new parameter (and of
/// the new optimizer state) after an Adam(W) or SGD step (truetrain/training/optim.py
/// `repro_update`), and one element of the next global model after an aggregation (FedAvg's
/// mean, DiLoCo's outer step: truetrain/training/aggregate.py), from the old elements opened
/// against their roots and the program's attributes; the same IEEE operations in the same
/// order as the engine, so the same bits (the reference is
/// truetrain/numerics/optim_element.py). A hyperparameter that is ±0 skips its term, as the
/// engine's `if wd:` does (NaN does not).
library OneStepOptim {
    using OneStepGemm for OneStepGemm.Tensor;

    uint32 internal constant ONE = 0x3F800000;

    /// @notice Adam(W)'s attributes (float32 bits): `lr` at this step, `weightDecay`,
    /// `beta1`, `beta2`, `eps`; `decoupled` (AdamW), `clipped` (the gradient times the clip
    /// factor).
    struct Adam {
        uint32 lr;
        uint32 weightDecay;
        uint32 beta1;
        uint32 beta2;
        uint32 eps;
        bool decoupled;
        bool clipped;
    }

    /// @notice One element's Adam inputs: the parameter, its gradient, the moments, and the
    /// state's 0-dim values before the step (running beta products, the clip factor).
    struct AdamIn {
        uint32 p;
        uint32 g;
        uint32 m;
        uint32 v;
        uint32 beta1Power;
        uint32 beta2Power;
        uint32 clip;
    }

    /// @notice SGD's attributes (float32 bits).
    struct Sgd {
        uint32 lr;
        uint32 weightDecay;
        uint32 momentum;
    }

    /// @notice The aggregation's attributes: `outer` (DiLoCo; otherwise FedAvg's mean), the
    /// outer `lr` and `momentum` (float32 bits), `nesterov`.
    struct Outer {
        bool outer;
        uint32 lr;
        uint32 momentum;
        bool nesterov;
    }

    /// @notice The aggregation needs one weight in [1, 2^29) per contribution.
    error OneStepWeightsInvalid(uint256 contributions, uint256 weights);

    function _nonzero(uint32 x) private pure returns (bool) {
        return x & 0x7FFFFFFF != 0;
    }

    /// @notice `(p, m, v)` after one Adam(W) update, as `repro_update`: clip; the beta
    /// products; `step_size = (1 - b1p).reciprocal() * lr` (torch's `lr / tensor`);
    /// `bc2 = sqrt32(1 - b2p)`; AdamW `p -= p * (lr * wd)` where `lr * wd` is not ±0, else
    /// (Adam, or AdamW with `lr * wd` ±0) `g += p * wd` where `wd` is not ±0;
    /// `m = m * b1 + g * (1 - b1)`; `v = v * b2 + (g * g) * (1 - b2)`;
    /// `p -= (m / (sqrt32(v) / bc2 + eps)) * step_size`.
    function adam(Adam memory s, AdamIn memory x) internal pure returns (uint32 p, uint32 m, uint32 v) {
        uint32 g = s.clipped ? Float32.mul(x.g, x.clip) : x.g;
        (uint32 stepSize, uint32 bc2) = _corrections(s, x);
        p = x.p;
        uint32 decay = s.decoupled ? Float32.mul(s.lr, s.weightDecay) : 0;
        if (_nonzero(decay)) {
            p = Float32.sub(p, Float32.mul(p, decay));
        } else if (_nonzero(s.weightDecay)) {
            g = Float32.add(g, Float32.mul(p, s.weightDecay));
        }
        m = Float32.add(Float32.mul(x.m, s.beta1), Float32.mul(g, Float32.sub(ONE, s.beta1)));
        v = Float32.add(Float32.mul(x.v, s.beta2), Float32.mul(Float32.mul(g, g), Float32.sub(ONE, s.beta2)));
        uint32 denom = Float32.add(Float32.div(Float32.sqrt(v), bc2), s.eps);
        p = Float32.sub(p, Float32.mul(Float32.div(m, denom), stepSize));
    }

    /// @dev The bias corrections: `step_size = (1 - b1p).reciprocal() · lr`, `sqrt32(1 - b2p)`.
    function _corrections(Adam memory s, AdamIn memory x) private pure returns (uint32 stepSize, uint32 bc2) {
        (uint32 b1p, uint32 b2p) = powers(s, x.beta1Power, x.beta2Power);
        stepSize = Float32.mul(Float32.div(ONE, Float32.sub(ONE, b1p)), s.lr);
        bc2 = Float32.sqrt(Float32.sub(ONE, b2p));
    }

    /// @notice The state's running products after the step (the application's 0-dim
    /// outputs `beta1_power`, `beta2_power`): `beta1Power · b1`, `beta2Power · b2`.
    function powers(Adam memory s, uint32 beta1Power, uint32 beta2Power) internal pure returns (uint32, uint32) {
        return (Float32.mul(beta1Power, s.beta1), Float32.mul(beta2Power, s.beta2));
    }

    /// @notice `(p, buf)` after one SGD update: `g += p * wd`; with momentum
    /// `buf = buf * mu + g` and `g = buf`; `p -= g * lr`.
    function sgd(Sgd memory s, uint32 p, uint32 g, uint32 buf) internal pure returns (uint32, uint32) {
        if (_nonzero(s.weightDecay)) g = Float32.add(g, Float32.mul(p, s.weightDecay));
        if (_nonzero(s.momentum)) {
            buf = Float32.add(Float32.mul(buf, s.momentum), g);
            g = buf;
        }
        return (Float32.sub(p, Float32.mul(g, s.lr)), buf);
    }

    /// @notice float64 `Σ x_i · w_i` (from +0, in task order; each product exact) `/ Σ w_i`.
    function mean(uint32[] memory xs, uint256[] memory weights) internal pure returns (uint64 acc) {
        uint256 total;
        for (uint256 t = 0; t < xs.length; ++t) {
            acc = Float64.add(acc, Float64.mul(Float32.toFloat64(xs[t]), Float64.fromInt(int256(weights[t]))));
            total += weights[t];
        }
        acc = Float64.div(acc, Float64.fromInt(int256(total)));
    }

    /// @notice `(model, momentum)` after the aggregation: FedAvg `float32(mean)` (momentum as
    /// given); DiLoCo `delta = float32(theta - mean)` (a float64 subtraction, then rounded),
    /// `v = momentum * mu + delta`, `g = delta + v * mu` (Nesterov) or `v`, `theta - g * lr`.
    function aggregate(Outer memory s, uint32[] memory xs, uint256[] memory weights, uint32 theta, uint32 momentum)
        internal
        pure
        returns (uint32, uint32)
    {
        uint64 avg = mean(xs, weights);
        if (!s.outer) return (Float64.toFloat32(avg), momentum);
        uint32 delta = Float64.toFloat32(Float64.sub(Float32.toFloat64(theta), avg));
        uint32 v = Float32.add(Float32.mul(momentum, s.momentum), delta);
        uint32 g = s.nesterov ? Float32.add(delta, Float32.mul(v, s.momentum)) : v;
        return (Float32.sub(theta, Float32.mul(g, s.lr)), v);
    }

    // --- the one-steps: inputs opened against their roots ---------------------------------

    /// @notice `(p, m, v)` of element `index`: `t` = the parameter, its gradient, the two
    /// moments (one shape), then the 0-dim beta1_power, beta2_power and clip factor (opened
    /// at 0; the clip factor only when `s.clipped`), each opened by `o`.
    function adamElement(
        Adam memory s,
        OneStepGemm.Tensor[7] calldata t,
        uint256 index,
        OneStepGemm.Opening[7] calldata o
    ) internal pure returns (uint32, uint32, uint32) {
        for (uint256 k = 1; k < 4; ++k) {
            OneStepGemm.sameShape(t[0], t[k], k);
        }
        AdamIn memory x = AdamIn(
            t[0].openAt(index, o[0]), t[1].openAt(index, o[1]), t[2].openAt(index, o[2]), t[3].openAt(index, o[3]),
            t[4].openAt(0, o[4]), t[5].openAt(0, o[5]), s.clipped ? t[6].openAt(0, o[6]) : ONE
        );
        return adam(s, x);
    }

    /// @notice The new `(beta1_power, beta2_power)`: `t` = the old ones (0-dim), opened.
    function adamPowersElement(Adam calldata s, OneStepGemm.Tensor[2] calldata t, OneStepGemm.Opening[2] calldata o)
        internal
        pure
        returns (uint32, uint32)
    {
        return powers(s, t[0].openAt(0, o[0]), t[1].openAt(0, o[1]));
    }

    /// @notice `(p, buf)` of element `index`: `t` = the parameter, its gradient, the momentum
    /// buffer (opened only with momentum).
    function sgdElement(Sgd calldata s, OneStepGemm.Tensor[3] calldata t, uint256 index, OneStepGemm.Opening[3] calldata o)
        internal
        pure
        returns (uint32, uint32)
    {
        OneStepGemm.sameShape(t[0], t[1], 1);
        uint32 buf;
        if (_nonzero(s.momentum)) {
            OneStepGemm.sameShape(t[0], t[2], 2);
            buf = t[2].openAt(index, o[2]);
        }
        return sgd(s, t[0].openAt(index, o[0]), t[1].openAt(index, o[1]), buf);
    }

    /// @notice `(model, momentum)` of element `index` of the aggregation: `t[0]` the round's
    /// global model (theta), `t[1]` its outer momentum (rows 0: none yet, +0), `t[2..]` the
    /// contributions in task order with their `weights` (samples); theta and momentum are
    /// opened only for DiLoCo.
    function aggregateElement(
        Outer memory s,
        uint256[] calldata weights,
        OneStepGemm.Tensor[] calldata t,
        uint256 index,
        OneStepGemm.Opening[] calldata o
    ) internal pure returns (uint32, uint32) {
        uint256 n = weights.length;
        if (n == 0 || t.length != n + 2 || o.length != n + 2) revert OneStepWeightsInvalid(t.length, n);
        checkWeights(weights, t.length);
        uint32[] memory xs = contributions(t, 2, n, index, o);
        uint32 theta;
        uint32 momentum;
        if (s.outer) {
            OneStepGemm.sameShape(t[2], t[0], 0);
            theta = t[0].openAt(index, o[0]);
            if (t[1].rows != 0) {
                OneStepGemm.sameShape(t[2], t[1], 1);
                momentum = t[1].openAt(index, o[1]);
            }
        }
        return aggregate(s, xs, weights, theta, momentum);
    }

    /// @notice Revert OneStepWeightsInvalid(`tensors`, n) unless each of the n weights is in [1, 2^29).
    function checkWeights(uint256[] calldata weights, uint256 tensors) internal pure {
        uint256 n = weights.length;
        for (uint256 k = 0; k < n; ++k) {
            if (weights[k] == 0 || weights[k] >= 1 << 29) revert OneStepWeightsInvalid(tensors, n);
        }
    }

    /// @notice Element `index` of each of the `n` contributions `t[from + k]` (one shape; else
    /// OneStepOperandsMismatch(from + k)), opened by `o[from + k]`.
    function contributions(
        OneStepGemm.Tensor[] calldata t,
        uint256 from,
        uint256 n,
        uint256 index,
        OneStepGemm.Opening[] calldata o
    ) internal pure returns (uint32[] memory xs) {
        xs = new uint32[](n);
        for (uint256 k = 0; k < n; ++k) {
            OneStepGemm.sameShape(t[from], t[from + k], from + k);
            xs[k] = t[from + k].openAt(index, o[from + k]);
        }
    }
}
