// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @title FutureRandomness: draws settled from a block hash that did not exist at the request
/// @notice The one randomness module of the market (JobMarket's audit draws, DisputeGame's
/// referee draws). A request made in block N gets a *ticket* block T > N; the draw is
/// `keccak256(abi.encode(blockhash(T), salt))`, which nobody can compute at block N, so the
/// party whose action made the request cannot read the draw and revert or wait.
///
/// The randomness is only half of a draw: the pool weights it is applied to must be fixed
/// before the hash is known too, or a party would move its stake by a few wei once the hash
/// is public and steer the draw. So blocks come in epochs of `EPOCH` blocks: every ticket lies
/// in the *drawing part* of an epoch (from offset `OPEN` on) and can be settled from block
/// T + 1 to the epoch's last block, and no verifier weight changes between a ticket and the
/// end of its epoch (WorkerPool.holdDraws): a draw sees the weights as they stood before its
/// hash existed. The first `OPEN` blocks of every epoch hold no ticket, so weight changes
/// deferred by a hold are applied then. A ticket leaves at least `MIN_SETTLE` blocks to
/// settle in; a request too late in an epoch gets the next epoch's first drawing block.
///
/// The shape is Chainlink VRF's request/fulfil: `ticket()` is the request, `draw()` the
/// fulfilment; a VRF-backed variant replaces these functions and nothing else.
library FutureRandomness {
    /// @notice Blocks between the request and the earliest block whose hash settles it.
    uint64 internal constant DELAY = 2;
    /// @notice Blocks in an epoch (every ticket is settled inside its own epoch).
    uint64 internal constant EPOCH = 32;
    /// @notice The first blocks of an epoch, where no ticket lies (weights move freely).
    uint64 internal constant OPEN = 4;
    /// @notice The fewest blocks a ticket leaves to settle its draw in.
    uint64 internal constant MIN_SETTLE = 12;

    /// @notice The draw of `ticket` cannot be read yet (or any more): settle between
    /// `ticket + 1` and the last block of the ticket's epoch.
    error RandomnessUnavailable(uint64 ticket);

    /// @notice The ticket of a request made now: DELAY blocks on, moved to the epoch's first
    /// drawing block if that is earlier in the epoch, or to the next epoch's if fewer than
    /// MIN_SETTLE blocks would be left to settle in.
    function ticket() internal view returns (uint64 t) {
        t = uint64(block.number) + DELAY;
        uint64 start = t - t % EPOCH;
        if (t < start + OPEN) t = start + OPEN;
        else if (t + MIN_SETTLE > start + EPOCH - 1) t = start + EPOCH + OPEN;
    }

    /// @notice The epoch block `b` lies in.
    function epochOf(uint256 b) internal pure returns (uint256) {
        return b / EPOCH;
    }

    /// @notice The last block in which ticket `t`'s draw can be settled (its epoch's last).
    function lastBlock(uint64 t) internal pure returns (uint64) {
        return t - t % EPOCH + EPOCH - 1;
    }

    /// @notice Whether the ticket's draw can no longer be settled (the window lapsed).
    function lapsed(uint64 t) internal view returns (bool) {
        return block.number > lastBlock(t);
    }

    /// @notice The random of `ticket` for `salt`; reverts `RandomnessUnavailable` before
    /// block ticket + 1 and after the ticket's epoch.
    function draw(uint64 t, bytes32 salt) internal view returns (bytes32) {
        if (block.number <= t || lapsed(t)) revert RandomnessUnavailable(t);
        return keccak256(abi.encode(blockhash(t), salt));
    }
}
