// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {OneStepElementwise} from "../numerics/OneStepElementwise.sol";
import {OneStepGemm} from "../numerics/OneStepGemm.sol";
import {OneStepPool} from "../numerics/OneStepPool.sol";

/// @title OneStepPoolHarness
/// @notice Test harness: the one-step pooling elements with their Merkle openings (one
/// element a call, as a dispute would), and every element of a map in one call
/// (tests/contracts/test_onestep_pool.py, scripts/onestep_kinds_fuzz.py). Maps are packed
/// bytes, 4 big-endian bytes an element.
contract OneStepPoolHarness {
    /// @notice The bytes do not hold the map (or the pooled map and its mask).
    error OneStepHarnessBatchMalformed(uint256 bytesGiven, uint256 elements);

    /// @notice See OneStepPool.poolElement.
    function poolElement(
        OneStepGemm.Tensor calldata a,
        OneStepPool.Map calldata s,
        uint256 index,
        OneStepGemm.Opening[4] calldata o
    ) external pure returns (uint32, uint32[4] memory) {
        return OneStepPool.poolElement(a, s, index, o);
    }

    /// @notice See OneStepPool.unpoolElement.
    function unpoolElement(
        OneStepGemm.Tensor[2] calldata t,
        OneStepPool.Map calldata s,
        uint256 index,
        OneStepGemm.Opening[2] calldata o
    ) external pure returns (uint32) {
        return OneStepPool.unpoolElement(t, s, index, o);
    }

    /// @notice Every pooled element of the map `a` of shape `s`, then every mask element.
    function poolBatch(OneStepPool.Map calldata s, bytes calldata a) external pure returns (uint32[] memory out) {
        uint256 n = s.b * s.h * s.w * s.c;
        if (n == 0 || s.h % 2 != 0 || s.w % 2 != 0 || a.length != 4 * n) revert OneStepHarnessBatchMalformed(a.length, n);
        uint256 pooled = n / 4;
        out = new uint32[](5 * pooled);
        uint32[4] memory v;
        for (uint256 i = 0; i < pooled; ++i) {
            uint256 first = OneStepPool.windowStart(s, i);
            for (uint256 t = 0; t < 4; ++t) {
                v[t] = OneStepGemm.load(_offset(a) + 4 * (first + ((t >> 1) * s.w + (t & 1)) * s.c));
            }
            (uint32 y, uint32[4] memory mask) = OneStepPool.pool(v);
            out[i] = y;
            for (uint256 t = 0; t < 4; ++t) {
                out[pooled + 4 * i + t] = mask[t];
            }
        }
    }

    /// @notice Every element of the input gradient of a map of shape `s` from the pooled
    /// gradient `g` (n / 4 elements: `n` bytes) and the mask `mask`.
    function unpoolBatch(OneStepPool.Map calldata s, bytes calldata g, bytes calldata mask)
        external
        pure
        returns (uint32[] memory out)
    {
        uint256 n = s.b * s.h * s.w * s.c;
        if (n == 0 || s.h % 2 != 0 || s.w % 2 != 0 || g.length != n || mask.length != 4 * n) {
            revert OneStepHarnessBatchMalformed(g.length, n);
        }
        out = new uint32[](n);
        for (uint256 i = 0; i < n; ++i) {
            (uint256 src, uint256 k) = OneStepPool.unpoolSource(s, i);
            out[i] = OneStepElementwise.applyMask(
                OneStepGemm.load(_offset(g) + 4 * src), OneStepGemm.load(_offset(mask) + 4 * (4 * src + k))
            );
        }
    }

    function _offset(bytes calldata x) private pure returns (uint256 p) {
        assembly ("memory-safe") {
            p := x.offset
        }
    }
}
