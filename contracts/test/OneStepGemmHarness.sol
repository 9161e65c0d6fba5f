// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Float32} from "../numerics/Float32.sol";
import {OneStepGemm} from "../numerics/OneStepGemm.sol";
import {TensorMerkle} from "../numerics/TensorMerkle.sol";

/// @title OneStepGemmHarness
/// @notice Test harness: the one-step linear element with its Merkle openings (`linearElement`,
/// one element a call, as a dispute would), and the arithmetic alone over a batch of cases
/// in one call (`elements`: the bit-for-bit comparison of tests/contracts/test_onestep_gemm.py
/// and scripts/onestep_fuzz.py).
contract OneStepGemmHarness {
    /// @notice `rowsA` / `rowsB` / `bias` do not hold `n` cases of `k` elements.
    error OneStepHarnessBatchMalformed(uint256 bytesA, uint256 bytesB, uint256 cases, uint256 k);

    /// @notice See OneStepGemm.linearElement.
    function linearElement(
        OneStepGemm.Tensor calldata a,
        OneStepGemm.Tensor calldata bt,
        OneStepGemm.Tensor calldata bias,
        uint256 limbs,
        uint256 i,
        uint256 j,
        OneStepGemm.Opening calldata rowA,
        OneStepGemm.Opening calldata rowB,
        OneStepGemm.Opening calldata biasJ
    ) external pure returns (uint32) {
        return OneStepGemm.linearElement(a, bt, bias, limbs, i, j, rowA, rowB, biasJ);
    }

    /// @notice Elements [start, start + count) of a tensor of `numel` elements, opened.
    function openRange(
        bytes32 root,
        uint256 numel,
        uint256 start,
        uint256 count,
        bytes calldata chunks,
        bytes32[] calldata proof
    ) external pure returns (uint32[] memory out) {
        uint256 p = TensorMerkle.open(root, numel, start, count, chunks, proof);
        out = new uint32[](count);
        for (uint256 t = 0; t < count; ++t) {
            out[t] = OneStepGemm.load(p + 4 * t);
        }
    }

    /// @notice One element for each case c: the dot of row c of `rowsA` and row c of `rowsB`
    /// (`k` float32 elements each, 4 bytes big-endian), plus `bias[c]`'s low 32 bits when
    /// its bit 32 is set.
    function elements(uint256 limbs, uint256 k, bytes calldata rowsA, bytes calldata rowsB, uint256[] calldata bias)
        external
        pure
        returns (uint32[] memory out)
    {
        uint256 n = bias.length;
        if (k == 0 || rowsA.length != n * k * 4 || rowsB.length != n * k * 4) {
            revert OneStepHarnessBatchMalformed(rowsA.length, rowsB.length, n, k);
        }
        return _batch(_offset(rowsA), _offset(rowsB), k, limbs, bias);
    }

    function _offset(bytes calldata b) private pure returns (uint256 p) {
        assembly ("memory-safe") {
            p := b.offset
        }
    }

    function _batch(uint256 pa, uint256 pb, uint256 k, uint256 limbs, uint256[] calldata bias)
        private
        pure
        returns (uint32[] memory out)
    {
        uint256 bits = OneStepGemm.operandBits(limbs);
        out = new uint32[](bias.length);
        for (uint256 c = 0; c < bias.length; ++c) {
            uint32 y = OneStepGemm.dot(pa + c * k * 4, pb + c * k * 4, k, bits);
            if (bias[c] >> 32 & 1 == 1) y = Float32.add(y, uint32(bias[c]));
            out[c] = y;
        }
    }
}
