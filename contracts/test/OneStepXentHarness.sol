// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {OneStepElementwise} from "../numerics/OneStepElementwise.sol";
import {OneStepGemm} from "../numerics/OneStepGemm.sol";
import {OneStepSoftmax} from "../numerics/OneStepSoftmax.sol";
import {OneStepXent} from "../numerics/OneStepXent.sol";

/// @title OneStepXentHarness
/// @notice Test harness: the one-step cross-entropy elements with their Merkle openings (one
/// element a call, as a dispute would), and every partial sum, gradient element and loss of
/// a batch of rows in one call (tests/contracts/test_onestep_xent.py,
/// scripts/onestep_kinds_fuzz.py). Rows are packed bytes, 4 big-endian bytes an element;
/// labels one 4-byte word each.
contract OneStepXentHarness {
    /// @notice `logits` is not whole rows of `c`, or `labels` not one a row.
    error OneStepHarnessBatchMalformed(uint256 bytesGiven, uint256 c);

    /// @notice See OneStepXent.partialSumElement.
    function partialSumElement(
        OneStepGemm.Tensor calldata x,
        uint256 width,
        uint256 r,
        uint256 b,
        OneStepGemm.Opening calldata o
    ) external pure returns (uint64) {
        return OneStepXent.partialSumElement(x, width, r, b, o);
    }

    /// @notice See OneStepXent.gradElement.
    function gradElement(
        OneStepGemm.Tensor[3] calldata t,
        uint256 totalRows,
        uint256 r,
        uint256 j,
        OneStepGemm.Opening[3] calldata o
    ) external pure returns (uint32) {
        return OneStepXent.gradElement(t, totalRows, r, j, o);
    }

    /// @notice See OneStepXent.lossElement.
    function lossElement(OneStepGemm.Tensor[3] calldata t, uint256 r, OneStepGemm.Opening[3] calldata o)
        external
        pure
        returns (uint64)
    {
        return OneStepXent.lossElement(t, r, o);
    }

    /// @notice Every row's partial sums (blocks of `width`), then its gradient elements and
    /// loss from them, in one array: the `rows · blocks` partial sums, the `rows · c`
    /// gradient elements, the `rows` losses.
    function xentRows(uint256 c, uint256 width, uint256 totalRows, bytes calldata logits, bytes calldata labels)
        external
        pure
        returns (uint256[] memory out)
    {
        uint256 rows = c == 0 ? 0 : logits.length / (4 * c);
        if (rows == 0 || width == 0 || logits.length != 4 * c * rows || labels.length != 4 * rows) {
            revert OneStepHarnessBatchMalformed(logits.length, c);
        }
        Batch memory a = Batch(c, width, totalRows, (c + width - 1) / width, rows);
        out = new uint256[](rows * (a.blocks + c + 1));
        for (uint256 r = 0; r < rows; ++r) {
            uint256 y = OneStepGemm.load(_offset(labels) + 4 * r);
            if (y >= c) revert OneStepElementwise.OneStepIndexOutOfRange(y, c);
            _row(a, r, _offset(logits) + 4 * c * r, y, out);
        }
    }

    /// @dev What every row of a batch shares.
    struct Batch {
        uint256 c;
        uint256 width;
        uint256 totalRows;
        uint256 blocks;
        uint256 rows;
    }

    /// @dev Row `r`'s partial sums, gradient elements and loss, written into `out`.
    function _row(Batch memory a, uint256 r, uint256 p, uint256 y, uint256[] memory out) private pure {
        uint64 m = OneStepSoftmax.rowMax(p, a.c - 1);
        uint64[] memory parts = new uint64[](a.blocks);
        for (uint256 b = 0; b < a.blocks; ++b) {
            uint256 hi = (b + 1) * a.width < a.c ? (b + 1) * a.width : a.c;
            parts[b] = OneStepXent.partialSum(p, a.c, b * a.width, hi, m);
            out[r * a.blocks + b] = parts[b];
        }
        uint64 s = OneStepXent.rowSum(parts, a.c);
        for (uint256 j = 0; j < a.c; ++j) {
            out[a.rows * a.blocks + r * a.c + j] = OneStepXent.gradAt(p, j, m, s, y, a.totalRows);
        }
        out[a.rows * (a.blocks + a.c) + r] = OneStepXent.lossAt(p, m, s, y);
    }

    function _offset(bytes calldata x) private pure returns (uint256 p) {
        assembly ("memory-safe") {
            p := x.offset
        }
    }
}
