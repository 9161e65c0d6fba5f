// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {StepEntry} from "../interfaces/IStepGame.sol";
import {OneStepGemm} from "./OneStepGemm.sol";

/// @title StepKinds
/// @notice What the one-step kind contracts (IOneStepKind) share: the checks of an entry's
/// inputs and openings, views of a dynamic calldata array as the fixed arrays the verifier
/// libraries take (the same calldata, no copy), an element's (row, column).
library StepKinds {
    /// @notice The kind needs `needed` inputs (descriptors, the empty one counted) and
    /// openings; `inputs` and `openings` were given.
    error StepKindArity(uint256 needed, uint256 inputs, uint256 openings);
    /// @notice No contract of this game computes `kind`.
    error StepKindUnknown(bytes32 kind);
    /// @notice The kind reads `needed` attribute words; the entry has `given`.
    error StepKindAttributes(uint256 needed, uint256 given);

    /// @notice Revert StepKindArity unless there are at least `n` descriptors and openings.
    function need(OneStepGemm.Tensor[] calldata t, OneStepGemm.Opening[] calldata o, uint256 n) internal pure {
        if (t.length < n || o.length < n) revert StepKindArity(n, t.length, o.length);
    }

    /// @notice The entry's attributes, reverting StepKindAttributes unless there are at least `n`.
    function attrs(StepEntry.Entry calldata e, uint256 n) internal pure returns (uint256[] calldata a) {
        a = e.attributes;
        if (a.length < n) revert StepKindAttributes(n, a.length);
    }

    /// @notice A list attribute at word `at` (its length, then its items): the items, and the
    /// word after them; reverts StepKindAttributes where the words run out.
    function list(uint256[] calldata a, uint256 at) internal pure returns (uint256[] calldata items, uint256 next) {
        if (at >= a.length) revert StepKindAttributes(at + 1, a.length);
        uint256 n = a[at];
        if (n >= a.length - at) revert StepKindAttributes(n <= a.length ? at + 1 + n : type(uint256).max, a.length);
        next = at + 1 + n;
        items = a[at + 1:next];
    }

    /// @notice The first two descriptors as a `Tensor[2]` (static structs lie inline: the
    /// fixed array's encoding starts where the dynamic one's elements do).
    function two(OneStepGemm.Tensor[] calldata t) internal pure returns (OneStepGemm.Tensor[2] calldata r) {
        assembly ("memory-safe") {
            r := t.offset
        }
    }

    /// @notice The first three descriptors as a `Tensor[3]`.
    function three(OneStepGemm.Tensor[] calldata t) internal pure returns (OneStepGemm.Tensor[3] calldata r) {
        assembly ("memory-safe") {
            r := t.offset
        }
    }

    /// @notice The first two openings as an `Opening[2]` (a fixed array of dynamic structs is
    /// its heads, offsets from its start, as a dynamic array's after its length word).
    function two(OneStepGemm.Opening[] calldata o) internal pure returns (OneStepGemm.Opening[2] calldata r) {
        assembly ("memory-safe") {
            r := o.offset
        }
    }

    /// @notice The first seven descriptors as a `Tensor[7]`.
    function seven(OneStepGemm.Tensor[] calldata t) internal pure returns (OneStepGemm.Tensor[7] calldata r) {
        assembly ("memory-safe") {
            r := t.offset
        }
    }

    /// @notice The first four openings as an `Opening[4]`.
    function four(OneStepGemm.Opening[] calldata o) internal pure returns (OneStepGemm.Opening[4] calldata r) {
        assembly ("memory-safe") {
            r := o.offset
        }
    }

    /// @notice The first seven openings as an `Opening[7]`.
    function seven(OneStepGemm.Opening[] calldata o) internal pure returns (OneStepGemm.Opening[7] calldata r) {
        assembly ("memory-safe") {
            r := o.offset
        }
    }

    /// @notice The first three openings as an `Opening[3]`.
    function three(OneStepGemm.Opening[] calldata o) internal pure returns (OneStepGemm.Opening[3] calldata r) {
        assembly ("memory-safe") {
            r := o.offset
        }
    }

    /// @notice `(index / cols, index % cols)` with `cols` the output's last dimension.
    function rowCol(StepEntry.Entry calldata e, uint256 index) internal pure returns (uint256, uint256) {
        uint256 n = e.shape.length;
        uint256 cols = n == 0 ? 1 : e.shape[n - 1];
        return (index / cols, index % cols);
    }
}
