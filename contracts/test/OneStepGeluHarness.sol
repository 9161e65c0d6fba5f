// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {OneStepGelu} from "../numerics/OneStepGelu.sol";
import {OneStepGemm} from "../numerics/OneStepGemm.sol";

/// @title OneStepGeluHarness
/// @notice Test harness: the one-step GELU elements with their Merkle openings (one element
/// a call, as a dispute would), the same arithmetic over a batch in one call, `erf64` alone
/// and the erf table (tests/contracts/test_onestep_gelu.py, scripts/onestep_kinds_fuzz.py).
/// Batches are packed bytes, 4 big-endian bytes an element.
contract OneStepGeluHarness {
    /// @notice See OneStepGelu.geluElement.
    function geluElement(OneStepGemm.Tensor calldata x, uint256 index, OneStepGemm.Opening calldata o)
        external
        pure
        returns (uint32)
    {
        return OneStepGelu.geluElement(x, index, o);
    }

    /// @notice See OneStepGelu.geluBackwardElement.
    function geluBackwardElement(OneStepGemm.Tensor[2] calldata t, uint256 index, OneStepGemm.Opening[2] calldata o)
        external
        pure
        returns (uint32)
    {
        return OneStepGelu.geluBackwardElement(t, index, o);
    }

    /// @notice GELU over `x`.
    function geluBatch(bytes calldata x) external pure returns (uint32[] memory out) {
        out = new uint32[](x.length / 4);
        for (uint256 c = 0; c < out.length; ++c) {
            out[c] = OneStepGelu.gelu(_word(x, 4 * c));
        }
    }

    /// @notice GELU's input gradient over cases of (x, g).
    function geluBackwardBatch(bytes calldata pairs) external pure returns (uint32[] memory out) {
        out = new uint32[](pairs.length / 8);
        for (uint256 c = 0; c < out.length; ++c) {
            out[c] = OneStepGelu.geluBackward(_word(pairs, 8 * c), _word(pairs, 8 * c + 4));
        }
    }

    /// @notice The engine's erf64 over float64 bit patterns.
    function erf64Batch(uint64[] calldata u) external pure returns (uint64[] memory out) {
        out = new uint64[](u.length);
        for (uint256 c = 0; c < out.length; ++c) {
            out[c] = OneStepGelu.erf64(u[c]);
        }
    }

    /// @notice The erf table as the library holds it.
    function erfTable() external pure returns (bytes memory) {
        return OneStepGelu.ERF_TABLE;
    }

    function _word(bytes calldata elems, uint256 at) private pure returns (uint32 x) {
        assembly ("memory-safe") {
            x := shr(224, calldataload(add(elems.offset, at)))
        }
    }
}
