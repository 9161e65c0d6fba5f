// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Float64} from "../numerics/Float64.sol";
import {OneStepGemm} from "../numerics/OneStepGemm.sol";
import {OneStepSoftmax} from "../numerics/OneStepSoftmax.sol";

/// @title OneStepSoftmaxHarness
/// @notice Test harness: the one-step causal softmax elements with their Merkle openings (one
/// element a call, as a dispute would), and every row sum and element of a batch of rows in
/// one call (tests/contracts/test_onestep_softmax.py, scripts/onestep_kinds_fuzz.py). Rows
/// are packed bytes, 4 big-endian bytes an element.
contract OneStepSoftmaxHarness {
    using Float64 for uint64;

    /// @notice `rows` is not whole rows of `t` (or `grads` not as long).
    error OneStepHarnessBatchMalformed(uint256 bytesGiven, uint256 t);

    /// @notice See OneStepSoftmax.rowSumElement.
    function rowSumElement(OneStepGemm.Tensor calldata s, uint256 r, OneStepGemm.Opening calldata o)
        external
        pure
        returns (uint64)
    {
        return OneStepSoftmax.rowSumElement(s, r, o);
    }

    /// @notice See OneStepSoftmax.softmaxElement.
    function softmaxElement(OneStepGemm.Tensor[2] calldata t, uint256 r, uint256 j, OneStepGemm.Opening[2] calldata o)
        external
        pure
        returns (uint32)
    {
        return OneStepSoftmax.softmaxElement(t, r, j, o);
    }

    /// @notice See OneStepSoftmax.softmaxBackwardElement.
    function softmaxBackwardElement(
        OneStepGemm.Tensor[2] calldata t,
        uint32 scale,
        uint256 r,
        uint256 j,
        OneStepGemm.Opening[2] calldata o
    ) external pure returns (uint32) {
        return OneStepSoftmax.softmaxBackwardElement(t, scale, r, j, o);
    }

    /// @notice Each row's sum and then its elements from that sum; row `r` of `rows` is
    /// position `(first + r) mod t` of its sequence.
    function softmaxRows(uint256 t, uint256 first, bytes calldata rows)
        external
        pure
        returns (uint64[] memory sums, uint32[] memory out)
    {
        if (t == 0 || rows.length % (4 * t) != 0) revert OneStepHarnessBatchMalformed(rows.length, t);
        sums = new uint64[](rows.length / (4 * t));
        out = new uint32[](rows.length / 4);
        for (uint256 r = 0; r < sums.length; ++r) {
            uint256 p = _offset(rows) + 4 * t * r;
            uint256 i = (first + r) % t;
            sums[r] = OneStepSoftmax.rowSum(p, t, i);
            uint64 m = OneStepSoftmax.rowMax(p, i);
            for (uint256 j = 0; j < t; ++j) {
                out[r * t + j] = OneStepSoftmax.expAt(p, i, j, m).div(sums[r]).toFloat32();
            }
        }
    }

    /// @notice The backward of every row of `p` and `dp` (t elements each).
    function softmaxBackwardRows(uint256 t, uint32 scale, bytes calldata p, bytes calldata dp)
        external
        pure
        returns (uint32[] memory out)
    {
        if (t == 0 || p.length % (4 * t) != 0 || dp.length != p.length) {
            revert OneStepHarnessBatchMalformed(p.length, t);
        }
        out = new uint32[](p.length / 4);
        for (uint256 r = 0; r < out.length / t; ++r) {
            uint256 pp = _offset(p) + 4 * t * r;
            uint256 pd = _offset(dp) + 4 * t * r;
            uint64 total = OneStepSoftmax.backwardTotal(pp, pd, t);
            for (uint256 j = 0; j < t; ++j) {
                out[r * t + j] = OneStepSoftmax.backwardAt(pp, pd, j, total, scale);
            }
        }
    }

    function _offset(bytes calldata x) private pure returns (uint256 p) {
        assembly ("memory-safe") {
            p := x.offset
        }
    }
}
