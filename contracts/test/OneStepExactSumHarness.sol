// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {OneStepExactSum} from "../numerics/OneStepExactSum.sol";
import {OneStepGemm} from "../numerics/OneStepGemm.sol";

/// @title OneStepExactSumHarness
/// @notice Test harness: the one-step exact-sum elements with their Merkle openings (one
/// element a call, as a dispute would), and the same sums over a batch of columns in one
/// call (tests/contracts/test_onestep_exact_sum.py, scripts/onestep_kinds_fuzz.py). Batches
/// are packed bytes, 4 big-endian bytes an element.
contract OneStepExactSumHarness {
    /// @notice `cols` is not whole columns of `n`, or `ids` not `n` ids.
    error OneStepHarnessBatchMalformed(uint256 bytesGiven, uint256 n);

    /// @notice See OneStepExactSum.columnSumElement.
    function columnSumElement(OneStepGemm.Tensor calldata vt, uint256 j, OneStepGemm.Opening calldata o)
        external
        pure
        returns (uint32)
    {
        return OneStepExactSum.columnSumElement(vt, j, o);
    }

    /// @notice See OneStepExactSum.scatterElement.
    function scatterElement(
        OneStepGemm.Tensor[2] calldata t,
        uint256 num,
        uint256 row,
        uint256 j,
        OneStepGemm.Opening[2] calldata o
    ) external pure returns (uint32) {
        return OneStepExactSum.scatterElement(t, num, row, j, o);
    }

    /// @notice The exact sum of every column in `cols` (n values each, one after another).
    function columnSums(uint256 n, bytes calldata cols) external pure returns (uint32[] memory out) {
        if (n == 0 || cols.length % (4 * n) != 0) revert OneStepHarnessBatchMalformed(cols.length, n);
        out = new uint32[](cols.length / (4 * n));
        for (uint256 j = 0; j < out.length; ++j) {
            out[j] = OneStepExactSum.exactSum(_offset(cols) + 4 * n * j, 0, n, 0);
        }
    }

    /// @notice The scatter of the columns in `cols` (n values each) by `ids` into a table of
    /// `num` rows: element `[row][j]` at `row · columns + j`.
    function scatterSums(uint256 n, uint256 num, bytes calldata cols, bytes calldata ids)
        external
        pure
        returns (uint32[] memory out)
    {
        if (n == 0 || cols.length % (4 * n) != 0 || ids.length != 4 * n) {
            revert OneStepHarnessBatchMalformed(cols.length, n);
        }
        uint256 d = cols.length / (4 * n);
        OneStepExactSum.checkIds(_offset(ids), n, num);
        out = new uint32[](num * d);
        for (uint256 k = 0; k < out.length; ++k) {
            out[k] = OneStepExactSum.exactSum(_offset(cols) + 4 * n * (k % d), _offset(ids), n, k / d);
        }
    }

    function _offset(bytes calldata x) private pure returns (uint256 p) {
        assembly ("memory-safe") {
            p := x.offset
        }
    }
}
