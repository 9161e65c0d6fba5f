// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Float32} from "../numerics/Float32.sol";
import {OneStepElementwise} from "../numerics/OneStepElementwise.sol";
import {OneStepGemm} from "../numerics/OneStepGemm.sol";

/// @title OneStepElementwiseHarness
/// @notice Test harness: the one-step elementwise and data-movement elements with their
/// Merkle openings (one element a call, as a dispute would), and the same arithmetic and
/// index maps over a batch in one call (the bit-for-bit comparison of
/// tests/contracts/test_onestep_elementwise.py and scripts/onestep_kinds_fuzz.py).
/// Batches are packed bytes, 4 big-endian bytes an element.
contract OneStepElementwiseHarness {
    /// @notice `elems` is not a whole number of `width`-element cases.
    error OneStepHarnessBatchMalformed(uint256 bytesGiven, uint256 width);

    /// @notice See OneStepElementwise.reluElement.
    function reluElement(OneStepGemm.Tensor calldata h, uint256 index, OneStepGemm.Opening calldata o)
        external
        pure
        returns (uint32, uint32)
    {
        return OneStepElementwise.reluElement(h, index, o);
    }

    /// @notice See OneStepElementwise.applyMaskElement.
    function applyMaskElement(OneStepGemm.Tensor[2] calldata t, uint256 index, OneStepGemm.Opening[2] calldata o)
        external
        pure
        returns (uint32)
    {
        return OneStepElementwise.applyMaskElement(t, index, o);
    }

    /// @notice See OneStepElementwise.addElement.
    function addElement(OneStepGemm.Tensor[2] calldata t, uint256 index, OneStepGemm.Opening[2] calldata o)
        external
        pure
        returns (uint32)
    {
        return OneStepElementwise.addElement(t, index, o);
    }

    /// @notice See OneStepElementwise.permuteElement.
    function permuteElement(
        OneStepGemm.Tensor calldata x,
        uint256[] calldata shape,
        uint256[] calldata perm,
        uint256 index,
        OneStepGemm.Opening calldata o
    ) external pure returns (uint32) {
        return OneStepElementwise.permuteElement(x, shape, perm, index, o);
    }

    /// @notice See OneStepElementwise.embeddingElement.
    function embeddingElement(
        OneStepGemm.Tensor calldata ids,
        OneStepGemm.Tensor calldata table,
        uint256 r,
        uint256 c,
        OneStepGemm.Opening[2] calldata o
    ) external pure returns (uint32) {
        return OneStepElementwise.embeddingElement(ids, table, r, c, o);
    }

    /// @notice See OneStepElementwise.dropoutElement.
    function dropoutElement(
        OneStepElementwise.Dropout calldata d,
        OneStepGemm.Tensor calldata x,
        uint256 index,
        OneStepGemm.Opening calldata o
    ) external pure returns (uint32) {
        return OneStepElementwise.dropoutElement(d, x, index, o);
    }

    /// @notice ReLU over `h`: `(y << 32) | mask` each.
    function reluBatch(bytes calldata h) external pure returns (uint256[] memory out) {
        out = new uint256[](_cases(h, 1));
        for (uint256 c = 0; c < out.length; ++c) {
            (uint32 y, uint32 mask) = OneStepElementwise.relu(_word(h, 4 * c));
            out[c] = (uint256(y) << 32) | mask;
        }
    }

    /// @notice `g · mask + 0` over cases of (g, mask).
    function applyMaskBatch(bytes calldata pairs) external pure returns (uint32[] memory out) {
        out = new uint32[](_cases(pairs, 2));
        for (uint256 c = 0; c < out.length; ++c) {
            out[c] = OneStepElementwise.applyMask(_word(pairs, 8 * c), _word(pairs, 8 * c + 4));
        }
    }

    /// @notice `a + b` with `b` repeated over `a`.
    function addBatch(bytes calldata a, bytes calldata b) external pure returns (uint32[] memory out) {
        uint256 nb = _cases(b, 1);
        out = new uint32[](_cases(a, 1));
        if (nb == 0 || out.length % nb != 0) revert OneStepHarnessBatchMalformed(b.length, out.length);
        for (uint256 c = 0; c < out.length; ++c) {
            out[c] = Float32.add(_word(a, 4 * c), _word(b, 4 * (c % nb)));
        }
    }

    /// @notice Output elements `indices` of `x.permute(perm)`, `x` (of `shape`) given whole.
    function permuteBatch(uint256[] calldata shape, uint256[] calldata perm, bytes calldata x, uint256[] calldata indices)
        external
        pure
        returns (uint32[] memory out)
    {
        out = new uint32[](indices.length);
        for (uint256 c = 0; c < out.length; ++c) {
            out[c] = _word(x, 4 * OneStepElementwise.permuteSource(shape, perm, indices[c]));
        }
    }

    /// @notice `table[ids[r]][c]` for each `(r << 128) | c` of `picks`; `ids` and `table`
    /// (rows, cols) given whole.
    function embeddingBatch(bytes calldata ids, bytes calldata table, uint256 rows, uint256 cols, uint256[] calldata picks)
        external
        pure
        returns (uint32[] memory out)
    {
        out = new uint32[](picks.length);
        for (uint256 c = 0; c < out.length; ++c) {
            uint256 id = _word(ids, 4 * (picks[c] >> 128));
            out[c] = _word(table, 4 * OneStepElementwise.embeddingSource(id, rows, cols, uint128(picks[c])));
        }
    }

    /// @notice `x · mask` over `x`, element `i` at batch counter `d.first + i`.
    function dropoutBatch(OneStepElementwise.Dropout calldata d, bytes calldata x)
        external
        pure
        returns (uint32[] memory out)
    {
        out = new uint32[](_cases(x, 1));
        OneStepElementwise.Mask memory m = OneStepElementwise.prepare(d);
        for (uint256 c = 0; c < out.length; ++c) {
            out[c] = Float32.mul(_word(x, 4 * c), OneStepElementwise.dropoutMask(m, d.first + c));
        }
    }

    function _cases(bytes calldata elems, uint256 width) private pure returns (uint256) {
        if (elems.length % (4 * width) != 0) revert OneStepHarnessBatchMalformed(elems.length, width);
        return elems.length / (4 * width);
    }

    function _word(bytes calldata elems, uint256 at) private pure returns (uint32 x) {
        assembly ("memory-safe") {
            x := shr(224, calldataload(add(elems.offset, at)))
        }
    }
}
