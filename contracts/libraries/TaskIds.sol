// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @title TaskIds: a task's id is a pure function of (jobId, round, index)
/// @notice Packed bits: `jobId << 64 | round << 32 | index`. Index `shards` of a round is
/// that round's aggregation task. Ids are unique per (job, round, index) and decode back.
library TaskIds {
    /// @notice The id of task `index` of `round` of job `jobId`.
    function encode(uint256 jobId, uint32 round, uint32 index) internal pure returns (uint256) {
        return (jobId << 64) | (uint256(round) << 32) | uint256(index);
    }

    /// @notice The (jobId, round, index) a task id was built from.
    function decode(uint256 taskId) internal pure returns (uint256 jobId, uint32 round, uint32 index) {
        jobId = taskId >> 64;
        round = uint32(taskId >> 32);
        index = uint32(taskId);
    }

    /// @notice The job a task belongs to.
    function jobOf(uint256 taskId) internal pure returns (uint256) {
        return taskId >> 64;
    }
}
