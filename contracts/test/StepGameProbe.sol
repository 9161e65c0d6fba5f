// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IStepGameReceiver} from "../interfaces/IStepGame.sol";

/// @title StepGameProbe
/// @notice Test receiver of StepGame's verdicts: records each game's winner and loser, or
/// refuses them while `refusing` is set.
contract StepGameProbe is IStepGameReceiver {
    mapping(uint256 id => address) public winnerOf;
    mapping(uint256 id => address) public loserOf;
    bool public refusing;

    /// @notice The probe refuses verdicts (reverts `ProbeRefused`).
    error ProbeRefused(uint256 gameId);

    /// @notice Refuse verdicts from now on (true) or take them (false).
    function setRefusing(bool refuse) external {
        refusing = refuse;
    }

    /// @inheritdoc IStepGameReceiver
    function stepGameResolved(uint256 gameId, address winner, address loser) external {
        if (refusing) revert ProbeRefused(gameId);
        winnerOf[gameId] = winner;
        loserOf[gameId] = loser;
    }
}
