// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IStepGameReceiver} from "../interfaces/IStepGame.sol";

/// @title StepGameProbe
/// @notice Test receiver of StepGame's verdicts: records each game's winner and loser.
contract StepGameProbe is IStepGameReceiver {
    mapping(uint256 id => address) public winnerOf;
    mapping(uint256 id => address) public loserOf;

    /// @inheritdoc IStepGameReceiver
    function stepGameResolved(uint256 gameId, address winner, address loser) external {
        winnerOf[gameId] = winner;
        loserOf[gameId] = loser;
    }
}
