// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @title Bisection: the interval arithmetic of the dispute game
/// @notice Positions: 0 = the task's inputs, p ≥ 1 = checkpoint leaf p − 1, `leaves` = the
/// result. An interval (lo, hi) means "agreed at lo, disputed at hi"; it starts at
/// (0, leaves) and halves at its midpoint until hi − lo = 1.
library Bisection {
    /// @notice Merkle proof depth of a tree over `leaves` leaves: ceil(log2(leaves)) (0 for 1).
    function depth(uint256 leaves) internal pure returns (uint256 d) {
        while ((uint256(1) << d) < leaves) ++d;
    }

    /// @notice Halvings from (0, leaves) to an interval of length 1 in the worst case:
    /// ceil(log2(leaves)), the same as `depth`.
    function moves(uint256 leaves) internal pure returns (uint256) {
        return depth(leaves);
    }

    /// @notice The midpoint of (lo, hi); meaningful while hi − lo ≥ 2.
    function midpoint(uint16 lo, uint16 hi) internal pure returns (uint16) {
        return lo + (hi - lo) / 2;
    }

    /// @notice Whether (lo, hi) still has a midpoint to claim.
    function open(uint16 lo, uint16 hi) internal pure returns (bool) {
        return hi - lo >= 2;
    }

    /// @notice The interval after both parties claimed at `at`: agreement moves lo up,
    /// disagreement moves hi down.
    function narrow(uint16 lo, uint16 hi, uint16 at, bool agree) internal pure returns (uint16, uint16) {
        return agree ? (at, hi) : (lo, at);
    }
}
