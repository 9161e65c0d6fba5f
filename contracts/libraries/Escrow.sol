// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @title Escrow: the market's money arithmetic
/// @notice Every round has `shards` training tasks and one aggregation task; each task
/// costs `reward + auditFee`. Amounts are uint256 (shards, rounds ≤ 2^32 and fees ≤ 2^96
/// cannot overflow).
library Escrow {
    uint256 internal constant BPS = 10_000;

    /// @notice Tasks in a job: (shards + 1) × rounds.
    function taskCount(uint32 shards, uint32 rounds) internal pure returns (uint256) {
        return (uint256(shards) + 1) * rounds;
    }

    /// @notice What one task costs the submitter.
    function taskCost(uint96 reward, uint96 auditFee) internal pure returns (uint256) {
        return uint256(reward) + auditFee;
    }

    /// @notice escrow = (shards + 1) × rounds × (reward + auditFee).
    function jobEscrow(uint32 shards, uint32 rounds, uint96 reward, uint96 auditFee) internal pure returns (uint256) {
        return taskCount(shards, rounds) * taskCost(reward, auditFee);
    }

    /// @notice Tasks already given an id (drawn at least once): tasks are materialized in
    /// order, round by round, so this is round × (shards + 1) + nextIndex.
    function materialized(uint32 shards, uint32 round, uint32 nextIndex) internal pure returns (uint256) {
        return uint256(round) * (uint256(shards) + 1) + nextIndex;
    }

    /// @notice `bps` basis points of `amount`, rounded up: a penalty of a nonzero share of
    /// a nonzero collateral is never 0 (ignoring an offer is never free).
    function share(uint256 amount, uint256 bps) internal pure returns (uint256) {
        return (amount * bps + BPS - 1) / BPS;
    }
}
