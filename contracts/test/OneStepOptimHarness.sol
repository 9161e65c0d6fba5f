// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {OneStepGemm} from "../numerics/OneStepGemm.sol";
import {OneStepOptim} from "../numerics/OneStepOptim.sol";

/// @title OneStepOptimHarness
/// @notice Test harness: the one-step update and aggregation elements with their Merkle
/// openings (one element a call, as a dispute would), and the arithmetic alone over a batch
/// of elements in one call (the bit-for-bit comparison of
/// tests/contracts/test_onestep_optim.py and scripts/onestep_kinds_fuzz.py). A batch is
/// packed bytes, 4 big-endian bytes an element; each case's results come back in one word,
/// the first result highest.
contract OneStepOptimHarness {
    /// @notice `elems` is not a whole number of `width`-element cases.
    error OneStepHarnessBatchMalformed(uint256 bytesGiven, uint256 width);

    /// @notice See OneStepOptim.adamElement.
    function adamElement(
        OneStepOptim.Adam calldata s,
        OneStepGemm.Tensor[7] calldata t,
        uint256 index,
        OneStepGemm.Opening[7] calldata o
    ) external pure returns (uint32, uint32, uint32) {
        return OneStepOptim.adamElement(s, t, index, o);
    }

    /// @notice See OneStepOptim.adamPowersElement.
    function adamPowersElement(
        OneStepOptim.Adam calldata s,
        OneStepGemm.Tensor[2] calldata t,
        OneStepGemm.Opening[2] calldata o
    ) external pure returns (uint32, uint32) {
        return OneStepOptim.adamPowersElement(s, t, o);
    }

    /// @notice See OneStepOptim.sgdElement.
    function sgdElement(
        OneStepOptim.Sgd calldata s,
        OneStepGemm.Tensor[3] calldata t,
        uint256 index,
        OneStepGemm.Opening[3] calldata o
    ) external pure returns (uint32, uint32) {
        return OneStepOptim.sgdElement(s, t, index, o);
    }

    /// @notice See OneStepOptim.aggregateElement.
    function aggregateElement(
        OneStepOptim.Outer calldata s,
        uint256[] calldata weights,
        OneStepGemm.Tensor[] calldata t,
        uint256 index,
        OneStepGemm.Opening[] calldata o
    ) external pure returns (uint32, uint32) {
        return OneStepOptim.aggregateElement(s, weights, t, index, o);
    }

    /// @notice Adam(W) over cases of (p, g, m, v): `(p << 64) | (m << 32) | v` each, and
    /// the new beta powers `(b1p << 32) | b2p` as one more word at the end.
    function adamBatch(OneStepOptim.Adam calldata s, uint32 b1p, uint32 b2p, uint32 clip, bytes calldata elems)
        external
        pure
        returns (uint256[] memory out)
    {
        out = new uint256[](_cases(elems, 4) + 1);
        OneStepOptim.Adam memory sm = s;
        (uint32 p1, uint32 p2) = OneStepOptim.powers(sm, b1p, b2p);
        out[out.length - 1] = (uint256(p1) << 32) | p2;
        for (uint256 c = 0; c + 1 < out.length; ++c) {
            uint256 q = 16 * c;
            OneStepOptim.AdamIn memory x =
                OneStepOptim.AdamIn(_word(elems, q), _word(elems, q + 4), _word(elems, q + 8), _word(elems, q + 12), b1p, b2p, clip);
            (uint32 p, uint32 m, uint32 v) = OneStepOptim.adam(sm, x);
            out[c] = (uint256(p) << 64) | (uint256(m) << 32) | v;
        }
    }

    /// @notice SGD over cases of (p, g, buf): `(p << 32) | buf` each.
    function sgdBatch(OneStepOptim.Sgd calldata s, bytes calldata elems) external pure returns (uint256[] memory out) {
        out = new uint256[](_cases(elems, 3));
        OneStepOptim.Sgd memory sm = s;
        for (uint256 c = 0; c < out.length; ++c) {
            uint256 q = 12 * c;
            (uint32 p, uint32 buf) = OneStepOptim.sgd(sm, _word(elems, q), _word(elems, q + 4), _word(elems, q + 8));
            out[c] = (uint256(p) << 32) | buf;
        }
    }

    /// @notice The aggregation over cases of (theta, momentum, x_1 .. x_n), n = the weights:
    /// `(model << 32) | momentum` each.
    function aggregateBatch(OneStepOptim.Outer calldata s, uint256[] calldata weights, bytes calldata elems)
        external
        pure
        returns (uint256[] memory out)
    {
        out = new uint256[](_cases(elems, weights.length + 2));
        OneStepOptim.Outer memory sm = s;
        uint256[] memory w = weights;
        uint32[] memory xs = new uint32[](w.length);
        for (uint256 c = 0; c < out.length; ++c) {
            out[c] = _aggregateCase(sm, w, xs, elems, 4 * (w.length + 2) * c);
        }
    }

    function _aggregateCase(
        OneStepOptim.Outer memory s,
        uint256[] memory w,
        uint32[] memory xs,
        bytes calldata elems,
        uint256 q
    ) private pure returns (uint256) {
        for (uint256 k = 0; k < xs.length; ++k) {
            xs[k] = _word(elems, q + 8 + 4 * k);
        }
        (uint32 model, uint32 v) = OneStepOptim.aggregate(s, xs, w, _word(elems, q), _word(elems, q + 4));
        return (uint256(model) << 32) | v;
    }

    function _cases(bytes calldata elems, uint256 width) private pure returns (uint256) {
        if (width == 0 || elems.length % (4 * width) != 0) revert OneStepHarnessBatchMalformed(elems.length, width);
        return elems.length / (4 * width);
    }

    function _word(bytes calldata elems, uint256 at) private pure returns (uint32 x) {
        assembly ("memory-safe") {
            x := shr(224, calldataload(add(elems.offset, at)))
        }
    }
}
