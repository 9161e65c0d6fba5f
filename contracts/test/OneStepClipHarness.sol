// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Float64} from "../numerics/Float64.sol";
import {OneStepClip} from "../numerics/OneStepClip.sol";
import {OneStepGemm} from "../numerics/OneStepGemm.sol";

/// @title OneStepClipHarness
/// @notice Test harness: the one-step clip-factor elements with their Merkle openings (one
/// element a call, as a dispute would), and whole computations over sets of ranges in one
/// call (tests/contracts/test_onestep_clip.py, scripts/onestep_kinds_fuzz.py). Values are
/// packed bytes, 4 big-endian bytes an element.
contract OneStepClipHarness {
    /// @notice `values` is not the ranges' lengths, or the sets do not cover the ranges.
    error OneStepHarnessBatchMalformed(uint256 bytesGiven, uint256 ranges);

    /// @notice See OneStepClip.maxPartialElement.
    function maxPartialElement(OneStepGemm.Tensor calldata g, uint256 start, uint256 n, OneStepGemm.Opening calldata o)
        external
        pure
        returns (uint32)
    {
        return OneStepClip.maxPartialElement(g, start, n, o);
    }

    /// @notice See OneStepClip.sumPartialElement.
    function sumPartialElement(
        OneStepGemm.Tensor[2] calldata t,
        uint256 start,
        uint256 n,
        uint256 count,
        OneStepGemm.Opening[2] calldata o
    ) external pure returns (uint64) {
        return OneStepClip.sumPartialElement(t, start, n, count, o);
    }

    /// @notice See OneStepClip.clipElement.
    function clipElement(OneStepGemm.Tensor[2] calldata t, uint256 count, uint64 clipNorm, OneStepGemm.Opening[2] calldata o)
        external
        pure
        returns (uint64, uint32)
    {
        return OneStepClip.clipElement(t, count, clipNorm, o);
    }

    /// @notice The clip computation of several sets of ranges: range `r` is the next
    /// `lengths[r]` values of `values`, set `k` the next `sets[k]` ranges (its count their
    /// values) with clip norm `clipNorms[k]`. Returns every range's maximum, then every
    /// range's sum (on its set's grid), then each set's norm and factor.
    function clipSets(bytes calldata values, uint256[] calldata lengths, uint256[] calldata sets, uint64[] calldata clipNorms)
        external
        pure
        returns (uint256[] memory out)
    {
        uint256 nr = lengths.length;
        out = new uint256[](2 * nr + 2 * sets.length);
        uint256[] memory at = new uint256[](nr + 1);
        at[0] = _offset(values);
        for (uint256 r = 0; r < nr; ++r) {
            at[r + 1] = at[r] + 4 * lengths[r];
            out[r] = OneStepClip.canonical(OneStepClip.maxMagnitude(at[r], lengths[r]));
        }
        if (at[nr] != _offset(values) + values.length || sets.length != clipNorms.length) {
            revert OneStepHarnessBatchMalformed(values.length, nr);
        }
        uint256 first;
        for (uint256 k = 0; k < sets.length; ++k) {
            uint256 last = first + sets[k];
            if (sets[k] == 0 || last > nr) revert OneStepHarnessBatchMalformed(values.length, nr);
            _set(Set(first, last, (at[last] - at[first]) / 4, clipNorms[k]), at, lengths, out, 2 * (nr + k));
            first = last;
        }
        if (first != nr) revert OneStepHarnessBatchMalformed(values.length, nr);
    }

    /// @dev The ranges [first, last) of one set, its count and clip norm.
    struct Set {
        uint256 first;
        uint256 last;
        uint256 count;
        uint64 clipNorm;
    }

    /// @dev One set's sums (into `out[nr + r]`), norm and factor (at `out[at2]`, `out[at2 + 1]`).
    function _set(Set memory s, uint256[] memory at, uint256[] calldata lengths, uint256[] memory out, uint256 at2)
        private
        pure
    {
        uint256 nr = lengths.length;
        uint256 amax;
        for (uint256 r = s.first; r < s.last; ++r) {
            if (out[r] > amax) amax = out[r];
        }
        uint64 total;
        for (uint256 r = s.first; r < s.last; ++r) {
            uint64 part = OneStepClip.partialSum(at[r], lengths[r], amax, s.count);
            out[nr + r] = part;
            total = Float64.add(total, part);
        }
        uint64 norm = OneStepClip.normOf(total, amax, s.count);
        out[at2] = norm;
        out[at2 + 1] = OneStepClip.factorOf(norm, s.clipNorm);
    }

    function _offset(bytes calldata x) private pure returns (uint256 p) {
        assembly ("memory-safe") {
            p := x.offset
        }
    }
}
