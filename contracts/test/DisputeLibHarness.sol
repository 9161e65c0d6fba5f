// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Bisection} from "../libraries/Bisection.sol";
import {Committee} from "../libraries/Committee.sol";

/// @title DisputeLibHarness
/// @notice Test harness: exposes Bisection's and Committee's functions so tests can call them on chain.
contract DisputeLibHarness {
    function depth(uint256 leaves) external pure returns (uint256) {
        return Bisection.depth(leaves);
    }

    function midpoint(uint16 lo, uint16 hi) external pure returns (uint16) {
        return Bisection.midpoint(lo, hi);
    }

    function isOpen(uint16 lo, uint16 hi) external pure returns (bool) {
        return Bisection.open(lo, hi);
    }

    function narrow(uint16 lo, uint16 hi, uint16 at, bool agree) external pure returns (uint16, uint16) {
        return Bisection.narrow(lo, hi, at, agree);
    }

    function commitment(uint256 gameId, uint8 vote, bytes32 salt, address referee) external pure returns (bytes32) {
        return Committee.commitment(gameId, vote, salt, referee);
    }

    function valid(uint8 vote) external pure returns (bool) {
        return Committee.valid(vote);
    }

    function workerWins(uint256 forWorker, uint256 revealed) external pure returns (bool) {
        return Committee.workerWins(forWorker, revealed);
    }

    function withOutcome(uint8 vote, bool workerWon) external pure returns (bool) {
        return Committee.withOutcome(vote, workerWon);
    }

    function oddSize(uint256 found) external pure returns (uint256) {
        return Committee.oddSize(found);
    }
}
