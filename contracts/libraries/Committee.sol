// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @title Committee: referee votes, their commitments and the verdict
/// @notice Votes: 1 = the worker's hash, 2 = the challenger's hash, 3 = neither. The worker
/// wins iff a strict majority of the revealed votes is for its hash; otherwise the worker's
/// claim is rejected (a challenger need only show the worker wrong).
library Committee {
    uint8 internal constant VOTE_WORKER = 1;
    uint8 internal constant VOTE_CHALLENGER = 2;
    uint8 internal constant VOTE_NEITHER = 3;

    /// @notice The commitment a referee posts: keccak256(abi.encode(gameId, vote, salt, referee)).
    function commitment(uint256 gameId, uint8 vote, bytes32 salt, address referee) internal pure returns (bytes32) {
        return keccak256(abi.encode(gameId, vote, salt, referee));
    }

    /// @notice Whether `vote` is one of the three valid votes.
    function valid(uint8 vote) internal pure returns (bool) {
        return vote >= VOTE_WORKER && vote <= VOTE_NEITHER;
    }

    /// @notice The verdict over `revealed` (> 0) revealed votes of which `forWorker` are for the worker.
    function workerWins(uint256 forWorker, uint256 revealed) internal pure returns (bool) {
        return 2 * forWorker > revealed;
    }

    /// @notice Whether a revealed `vote` sided with the outcome.
    function withOutcome(uint8 vote, bool workerWon) internal pure returns (bool) {
        return workerWon ? vote == VOTE_WORKER : (vote == VOTE_CHALLENGER || vote == VOTE_NEITHER);
    }

    /// @notice The committee size to seat when `found` distinct referees were drawn: the
    /// largest odd number ≤ found (0 when none), so a vote cannot tie.
    function oddSize(uint256 found) internal pure returns (uint256) {
        return found == 0 ? 0 : (found % 2 == 1 ? found : found - 1);
    }
}
