// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {OneStepGemm} from "../numerics/OneStepGemm.sol";
import {OneStepLayerNorm} from "../numerics/OneStepLayerNorm.sol";

/// @title OneStepLayerNormHarness
/// @notice Test harness: the one-step LayerNorm element with its Merkle openings (one element
/// a call, as a dispute would), and every element of a batch of rows in one call (each
/// row's statistics once; tests/contracts/test_onestep_layernorm.py,
/// scripts/onestep_kinds_fuzz.py). Rows are packed bytes, 4 big-endian bytes an element.
contract OneStepLayerNormHarness {
    /// @notice `rows` is not whole rows of `n`, or `weight` / `bias` are not `n` elements.
    error OneStepHarnessBatchMalformed(uint256 bytesGiven, uint256 n);

    /// @notice See OneStepLayerNorm.layerNormElement.
    function layerNormElement(
        OneStepGemm.Tensor[3] calldata t,
        uint64 eps,
        uint256 i,
        uint256 j,
        OneStepGemm.Opening[3] calldata o
    ) external pure returns (uint32) {
        return OneStepLayerNorm.layerNormElement(t, eps, i, j, o);
    }

    /// @notice See OneStepLayerNorm.layerNormBackwardElement.
    function layerNormBackwardElement(
        OneStepGemm.Tensor[3] calldata t,
        uint64 eps,
        uint256 i,
        uint256 j,
        OneStepGemm.Opening[3] calldata o
    ) external pure returns (uint32, uint32) {
        return OneStepLayerNorm.layerNormBackwardElement(t, eps, i, j, o);
    }

    /// @notice LayerNorm's backward over every row of `x` and `g` (n elements each, one
    /// gain `weight`): `(dx << 32) | (g · xhat)` each.
    function layerNormBackwardRows(uint64 eps, uint256 n, bytes calldata x, bytes calldata g, bytes calldata weight)
        external
        pure
        returns (uint256[] memory out)
    {
        if (n == 0 || x.length % (4 * n) != 0 || g.length != x.length || weight.length != 4 * n) {
            revert OneStepHarnessBatchMalformed(x.length, n);
        }
        Batch memory b = Batch(eps, n, _offset(weight), 0, _offset(g));
        out = new uint256[](x.length / 4);
        for (uint256 r = 0; r < out.length / n; ++r) {
            _backRow(out, r * n, _offset(x) + 4 * n * r, b);
        }
    }

    function _backRow(uint256[] memory out, uint256 first, uint256 px, Batch memory b) private pure {
        uint256 pg = b.grads + 4 * first;
        OneStepLayerNorm.Back memory s = OneStepLayerNorm.backwardStats(px, pg, b.weight, b.n, b.eps);
        for (uint256 j = 0; j < b.n; ++j) {
            (uint32 dx, uint32 gx) = OneStepLayerNorm.backwardAt(s, px, pg, b.weight, j);
            out[first + j] = (uint256(dx) << 32) | gx;
        }
    }

    /// @dev What every row of a batch shares.
    struct Batch {
        uint64 eps;
        uint256 n;
        uint256 weight;
        uint256 bias;
        uint256 grads;
    }

    /// @notice LayerNorm of every row of `rows` (n elements each).
    function layerNormRows(uint64 eps, uint256 n, bytes calldata rows, bytes calldata weight, bytes calldata bias)
        external
        pure
        returns (uint32[] memory out)
    {
        if (n == 0 || rows.length % (4 * n) != 0 || weight.length != 4 * n || bias.length != 4 * n) {
            revert OneStepHarnessBatchMalformed(rows.length, n);
        }
        Batch memory b = Batch(eps, n, _offset(weight), _offset(bias), 0);
        out = new uint32[](rows.length / 4);
        for (uint256 r = 0; r < out.length / n; ++r) {
            _row(out, r * n, _offset(rows) + 4 * n * r, b);
        }
    }

    function _row(uint32[] memory out, uint256 first, uint256 row, Batch memory b) private pure {
        (uint64 mean, uint64 rstd) = OneStepLayerNorm.rowStats(row, b.n, b.eps);
        for (uint256 j = 0; j < b.n; ++j) {
            out[first + j] = OneStepLayerNorm.normalise(
                OneStepGemm.load(row + 4 * j), mean, rstd, OneStepGemm.load(b.weight + 4 * j),
                OneStepGemm.load(b.bias + 4 * j)
            );
        }
    }

    function _offset(bytes calldata x) private pure returns (uint256 p) {
        assembly ("memory-safe") {
            p := x.offset
        }
    }
}
