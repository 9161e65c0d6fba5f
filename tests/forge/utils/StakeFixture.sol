// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Test} from "./Test.sol";
import {TrainToken} from "contracts/TrainToken.sol";
import {StakeManager} from "contracts/StakeManager.sol";

/// @title StakeFixture: how the forge suites deploy TrainToken + StakeManager and wire the market
/// @notice The ONE place that knows the constructors and how a market gets its permission on
/// the StakeManager; when the contracts' wiring changes, change it here.
abstract contract StakeFixture is Test {
    uint64 internal constant UNBONDING_DELAY_BLOCKS = 20;

    TrainToken internal token;
    StakeManager internal stakeManager;

    /// Deploy a devnet token (this test contract owns it: it can mint) and a StakeManager.
    function _deployStack() internal {
        token = new TrainToken(true, new address[](0), new uint256[](0));
        stakeManager = new StakeManager(address(token), UNBONDING_DELAY_BLOCKS);
    }

    /// Give `market` the market's permission on the StakeManager (lock, unlock, slash,
    /// penalize, forfeit). Today: OpenZeppelin AccessControl, MARKET_ROLE granted by
    /// DEFAULT_ADMIN (this contract, the deployer). If the wiring becomes a one-time setter,
    /// call it here instead.
    function _grantMarket(address market) internal {
        stakeManager.grantRole(stakeManager.MARKET_ROLE(), market);
    }
}
