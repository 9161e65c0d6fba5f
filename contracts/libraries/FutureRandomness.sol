// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @title FutureRandomness: draws settled from a block hash that did not exist at the request
/// @notice The one randomness module of the market (JobMarket's audit draws, DisputeGame's
/// referee draws). A request made in block N gets the *ticket* N + DELAY; the draw is
/// `keccak256(abi.encode(blockhash(ticket), salt))`, which nobody can compute at block N, so
/// the party whose action made the request cannot read the draw and revert or wait. The
/// draw can be settled by a later call (anyone: a keeper, a party) from block ticket + 1 on,
/// for as long as the EVM keeps the hash: until block ticket + WINDOW. Each caller decides
/// what a lapsed ticket means (it always resolves against whoever had to settle it).
///
/// The shape is Chainlink VRF's request/fulfil: `ticket()` is the request, `draw()` the
/// fulfilment; a VRF-backed variant replaces these three functions and nothing else.
library FutureRandomness {
    /// @notice Blocks between the request and the block whose hash settles it.
    uint64 internal constant DELAY = 2;
    /// @notice Blocks the EVM keeps a block hash readable (`blockhash` returns 0 after).
    uint64 internal constant WINDOW = 256;

    /// @notice The draw of `ticket` cannot be read yet (or any more): settle between
    /// `ticket + 1` and `ticket + WINDOW`.
    error RandomnessUnavailable(uint64 ticket);

    /// @notice The ticket of a request made now.
    function ticket() internal view returns (uint64) {
        return uint64(block.number) + DELAY;
    }

    /// @notice Whether the ticket's hash can no longer be read (the settle window lapsed).
    function lapsed(uint64 t) internal view returns (bool) {
        return block.number > uint256(t) + WINDOW;
    }

    /// @notice The random of `ticket` for `salt`; reverts `RandomnessUnavailable` before
    /// block ticket + 1 and after the window.
    function draw(uint64 t, bytes32 salt) internal view returns (bytes32) {
        bytes32 h = blockhash(t);
        if (h == 0) revert RandomnessUnavailable(t);
        return keccak256(abi.encode(h, salt));
    }
}
