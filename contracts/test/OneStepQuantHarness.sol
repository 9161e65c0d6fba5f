// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Float32} from "../numerics/Float32.sol";
import {OneStepGemm} from "../numerics/OneStepGemm.sol";
import {OneStepQuant} from "../numerics/OneStepQuant.sol";

/// @title OneStepQuantHarness
/// @notice Test harness: the one-step row scale, weight-gradient and batched-product
/// elements with their Merkle openings (one element a call, as a dispute would), and the
/// same over a batch in one call (tests/contracts/test_onestep_quant.py,
/// scripts/onestep_kinds_fuzz.py). Rows and columns are packed bytes, 4 big-endian bytes an
/// element.
contract OneStepQuantHarness {
    /// @notice A batch is not whole rows (or columns) of `n`, or its operands do not pair.
    error OneStepHarnessBatchMalformed(uint256 bytesA, uint256 bytesB, uint256 n);

    /// @notice See OneStepQuant.rowScaleElement.
    function rowScaleElement(OneStepGemm.Tensor calldata x, uint256 limbs, uint256 r, OneStepGemm.Opening calldata o)
        external
        pure
        returns (uint32)
    {
        return OneStepQuant.rowScaleElement(x, limbs, r, o);
    }

    /// @notice See OneStepQuant.weightGradElement.
    function weightGradElement(
        OneStepGemm.Tensor[3] calldata t,
        uint256 limbs,
        uint256 o,
        uint256 i,
        OneStepGemm.Opening[3] calldata op
    ) external pure returns (uint32) {
        return OneStepQuant.weightGradElement(t, limbs, o, i, op);
    }

    /// @notice See OneStepQuant.bmmElement.
    function bmmElement(
        OneStepGemm.Tensor calldata a,
        OneStepGemm.Tensor calldata bt,
        OneStepQuant.Bmm calldata attrs,
        uint256 n,
        uint256 m,
        uint256 p,
        OneStepGemm.Opening[2] calldata o
    ) external pure returns (uint32) {
        return OneStepQuant.bmmElement(a, bt, attrs, n, m, p, o);
    }

    /// @notice The scale of every row in `rows` (`k` elements each).
    function rowScales(uint256 limbs, uint256 k, bytes calldata rows) external pure returns (uint32[] memory out) {
        if (k == 0 || rows.length % (4 * k) != 0) revert OneStepHarnessBatchMalformed(rows.length, 0, k);
        uint256 bits = OneStepGemm.operandBits(limbs);
        out = new uint32[](rows.length / (4 * k));
        for (uint256 r = 0; r < out.length; ++r) {
            out[r] = OneStepQuant.rowScale(_offset(rows) + 4 * k * r, k, bits);
        }
    }

    /// @notice Every `dW[o][i]` (at `o · in + i`) of the columns of a (`colsA`, `m` elements
    /// each), of g (`colsG`) and a's `m` row scales: each column's integers once, then the pairs.
    function weightGrads(uint256 limbs, uint256 m, bytes calldata colsA, bytes calldata colsG, bytes calldata scales)
        external
        pure
        returns (uint32[] memory out)
    {
        if (m == 0 || colsA.length % (4 * m) != 0 || colsG.length % (4 * m) != 0 || scales.length != 4 * m) {
            revert OneStepHarnessBatchMalformed(colsA.length, colsG.length, m);
        }
        uint256 nin = colsA.length / (4 * m);
        int256[][] memory qa = new int256[][](nin);
        uint256 bits = OneStepGemm.operandBits(limbs);
        for (uint256 i = 0; i < nin; ++i) {
            qa[i] = OneStepQuant.inputIntegers(_offset(colsA) + 4 * m * i, 4, _offset(scales), m, bits);
        }
        out = new uint32[](nin * (colsG.length / (4 * m)));
        _pairs(qa, _offset(colsG), _offset(scales), m, bits, out);
    }

    function _pairs(int256[][] memory qa, uint256 pg, uint256 ps, uint256 m, uint256 bits, uint32[] memory out)
        private
        pure
    {
        uint256 nin = qa.length;
        for (uint256 o = 0; o < out.length / nin; ++o) {
            (int256[] memory qg, int256 exp) = OneStepQuant.gradientIntegers(pg + 4 * m * o, 4, ps, m, bits);
            for (uint256 i = 0; i < nin; ++i) {
                out[o * nin + i] = OneStepQuant.finish(qa[i], qg, exp);
            }
        }
    }

    /// @notice For each pair c, the product of row c of `rowsA` and of `rowsB` (`k` elements
    /// each) times `scale`.
    function bmms(uint256 limbs, uint256 k, uint32 scale, bytes calldata rowsA, bytes calldata rowsB)
        external
        pure
        returns (uint32[] memory out)
    {
        if (k == 0 || rowsA.length % (4 * k) != 0 || rowsB.length != rowsA.length) {
            revert OneStepHarnessBatchMalformed(rowsA.length, rowsB.length, k);
        }
        uint256 bits = OneStepGemm.operandBits(limbs);
        out = new uint32[](rowsA.length / (4 * k));
        for (uint256 c = 0; c < out.length; ++c) {
            uint256 at = 4 * k * c;
            out[c] = Float32.mul(OneStepGemm.dot(_offset(rowsA) + at, _offset(rowsB) + at, k, bits), scale);
        }
    }

    function _offset(bytes calldata x) private pure returns (uint256 p) {
        assembly ("memory-safe") {
            p := x.offset
        }
    }
}
