// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IOneStepKind, StepEntry} from "../interfaces/IStepGame.sol";
import {OneStepClip} from "./OneStepClip.sol";
import {OneStepGemm} from "./OneStepGemm.sol";
import {OneStepOptim} from "./OneStepOptim.sol";
import {StepKinds} from "./StepKinds.sol";
import {TensorMerkle} from "./TensorMerkle.sol";

/// @title StepKindsOptim
/// @notice The step game's one-steps of the Adam(W) update, the aggregation's (FedAvg, DiLoCo's
/// outer step) and the clip factor's three applications (docs/onestep.md). Inputs and
/// attributes (floats as float32 bits, `_f64` float64 bits, a list as its length then its items):
///
/// * `adam`: p, g, m, v, beta1_power, beta2_power (0-dim), the clip factor (0-dim, only when
///   clipped), the step's rate (0-dim float32, a batch tensor); lr (0: the rate is the input),
///   weight_decay, beta1, beta2, eps, decoupled, clipped; outputs p, m, v. Openings: the
///   element of p, g, m, v, then the 0-dim tensors at 0.
/// * `adam_powers`: beta1_power, beta2_power; beta1, beta2; outputs the new two. Openings: both at 0.
/// * `fedavg`: the contributions in task order; weights (a list). Openings: the element of each.
/// * `diloco`: theta, its outer momentum (left out in the first round: +0), the contributions;
///   lr, momentum, nesterov, weights (a list); outputs the model and the momentum. Openings:
///   the element of each input.
/// * `clip_max`: the gradients in the parameters' order; width. Element r is range r of
///   `ranges(sizes, width)`; its opening the range.
/// * `clip_sum`: the gradients, then the ranges' maxima; width, count. Openings: the range,
///   every maximum. Float64.
/// * `clip_factor`: the maxima, the sums (float64); count, clip_norm_f64; output the factor
///   (0-dim). Openings: both whole.
/// * `increment`: a 0-dim int64 (AdamW's schedule position `lr_step`), two words high first as
///   a checkpoint commits it; output it plus one (mod 2^64, both words). Opening: the two words.
contract StepKindsOptim is IOneStepKind {
    using StepKinds for OneStepGemm.Tensor[];
    using StepKinds for OneStepGemm.Opening[];

    bytes32 internal constant ADAM = keccak256("adam");
    bytes32 internal constant ADAM_POWERS = keccak256("adam_powers");
    bytes32 internal constant FEDAVG = keccak256("fedavg");
    bytes32 internal constant DILOCO = keccak256("diloco");
    bytes32 internal constant CLIP_MAX = keccak256("clip_max");
    bytes32 internal constant CLIP_SUM = keccak256("clip_sum");
    bytes32 internal constant CLIP_FACTOR = keccak256("clip_factor");
    bytes32 internal constant INCREMENT = keccak256("increment");

    /// @inheritdoc IOneStepKind
    function element(
        StepEntry.Entry calldata e,
        OneStepGemm.Tensor[] calldata t,
        uint256 index,
        OneStepGemm.Opening[] calldata o
    ) external pure returns (uint256) {
        bytes32 kind = e.kind;
        if (kind == ADAM) {
            OneStepOptim.Adam memory s = _adam(StepKinds.attrs(e, 7));
            // the rate is the last input: after the clip factor when clipped
            uint256 rate = s.clipped ? 7 : 6;
            StepKinds.need(t, o, rate + 1);
            s.lr = OneStepGemm.openAt(t[rate], 0, o[rate]);
            (uint32 p, uint32 m, uint32 v) = OneStepOptim.adamElement(s, t.seven(), index, o.seven());
            return e.output == 0 ? p : e.output == 1 ? m : v;
        }
        if (kind == ADAM_POWERS) {
            uint256[] calldata a = StepKinds.attrs(e, 2);
            StepKinds.need(t, o, 2);
            OneStepOptim.Adam memory s;
            (s.beta1, s.beta2) = (uint32(a[0]), uint32(a[1]));
            (uint32 b1, uint32 b2) = OneStepOptim.powers(s, OneStepGemm.openAt(t[0], 0, o[0]), OneStepGemm.openAt(t[1], 0, o[1]));
            return e.output == 0 ? b1 : b2;
        }
        if (kind == FEDAVG || kind == DILOCO) {
            bool outer = kind == DILOCO;
            StepKinds.need(t, o, 1);
            (uint32 model, uint32 buf) = _aggregate(outer, StepKinds.attrs(e, outer ? 4 : 1), t, index, o);
            return e.output == 0 ? model : buf;
        }
        if (kind == CLIP_MAX || kind == CLIP_SUM) return _clipPartial(e, t, index, o);
        if (kind == CLIP_FACTOR) {
            uint256[] calldata a = StepKinds.attrs(e, 2);
            StepKinds.need(t, o, 2);
            (, uint32 factor) = OneStepClip.clipElement(t.two(), a[0], uint64(a[1]), o.two());
            return factor;
        }
        if (kind == INCREMENT) {
            StepKinds.need(t, o, 1);
            uint256 p = TensorMerkle.open(t[0].root, t[0].rows * t[0].cols, 0, 2, o[0].chunks, o[0].proof);
            return uint64((uint256(OneStepGemm.load(p)) << 32 | OneStepGemm.load(p + 4)) + 1);
        }
        revert StepKinds.StepKindUnknown(kind);
    }

    /// @dev `(model, momentum)` of FedAvg (the contributions from input 0) or DiLoCo (theta,
    /// the momentum where the inputs are two more than the weights, then the contributions).
    function _aggregate(bool outer, uint256[] calldata a, OneStepGemm.Tensor[] calldata t, uint256 index, OneStepGemm.Opening[] calldata o)
        private
        pure
        returns (uint32, uint32)
    {
        OneStepOptim.Outer memory s;
        if (outer) s = OneStepOptim.Outer(true, uint32(a[0]), uint32(a[1]), a[2] != 0);
        (uint256[] calldata w,) = StepKinds.list(a, outer ? 3 : 0);
        uint256 first = _first(outer, t.length - 1, w.length, o.length);
        uint256 start = outer ? _start(t, first, index, o) : 0;
        OneStepOptim.checkWeights(w, t.length - 1);
        uint32[] memory xs = OneStepOptim.contributions(t, first, w.length, index, o);
        return OneStepOptim.aggregate(s, xs, w, uint32(start >> 32), uint32(start));
    }

    /// @dev The first contribution's input: 0 for FedAvg, 1 or 2 (with the momentum) for
    /// DiLoCo; OneStepWeightsInvalid where the inputs or openings do not fit the weights.
    function _first(bool outer, uint256 inputs, uint256 n, uint256 openings) private pure returns (uint256 first) {
        first = inputs > n ? inputs - n : 0;
        if (n == 0 || inputs < n || openings < inputs || (outer ? first == 0 || first > 2 : first != 0)) {
            revert OneStepOptim.OneStepWeightsInvalid(inputs, n);
        }
    }

    /// @dev `theta << 32 | momentum` at `index` (the momentum +0 when not an input).
    function _start(OneStepGemm.Tensor[] calldata t, uint256 first, uint256 index, OneStepGemm.Opening[] calldata o)
        private
        pure
        returns (uint256 start)
    {
        OneStepGemm.sameShape(t[first], t[0], 0);
        start = uint256(OneStepGemm.openAt(t[0], index, o[0])) << 32;
        if (first == 2) {
            OneStepGemm.sameShape(t[first], t[1], 1);
            start |= OneStepGemm.openAt(t[1], index, o[1]);
        }
    }

    /// @dev A range of a gradient: its tensor (input), first element, count.
    struct Range {
        uint256 k;
        uint256 start;
        uint256 n;
    }

    /// @dev clip_max (float32) or clip_sum (float64) of range `index` of the gradients
    /// (clip_sum: `t[0..P)`, the maxima `t[P]`).
    function _clipPartial(
        StepEntry.Entry calldata e,
        OneStepGemm.Tensor[] calldata t,
        uint256 index,
        OneStepGemm.Opening[] calldata o
    ) private pure returns (uint256) {
        bool sum = e.kind == CLIP_SUM;
        uint256[] calldata a = StepKinds.attrs(e, sum ? 2 : 1);
        StepKinds.need(t, o, sum ? 2 : 1);
        uint256 grads = t.length - (sum ? 2 : 1);
        Range memory r = _range(t, grads, a[0], index);
        if (!sum) return OneStepClip.maxPartialElement(t[r.k], r.start, r.n, o[0]);
        return OneStepClip.sumPartialOf(t[r.k], t[grads], r.start, r.n, a[1], o.two());
    }

    /// @dev Range `r` of the first `grads` tensors cut into ranges of `width` values (the
    /// reference's `ranges`).
    function _range(OneStepGemm.Tensor[] calldata t, uint256 grads, uint256 width, uint256 r)
        private
        pure
        returns (Range memory)
    {
        if (width == 0) revert OneStepGemm.OneStepShapeInvalid(r, width);
        for (uint256 k = 0; k < grads; ++k) {
            uint256 size = t[k].rows * t[k].cols;
            uint256 count = (size + width - 1) / width;
            if (r < count) {
                uint256 start = r * width;
                return Range(k, start, size - start < width ? size - start : width);
            }
            r -= count;
        }
        revert OneStepGemm.OneStepShapeInvalid(r, width);
    }

    /// @dev The attributes (lr, weight decay, beta1, beta2, eps: float32 bits; decoupled,
    /// clipped: 0 or 1), one word each, as Adam's calldata struct (a value out of its type's
    /// range reverts where it is read).
    function _adam(uint256[] calldata a) private pure returns (OneStepOptim.Adam calldata s) {
        assembly ("memory-safe") {
            s := a.offset
        }
    }
}
