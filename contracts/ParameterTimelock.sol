// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {TimelockController} from "@openzeppelin/contracts/governance/TimelockController.sol";

/// @title ParameterTimelock
/// @notice The only holder of StakeManager's PARAMETER_ROLE: a parameter change (slash split,
/// unbonding delay) is scheduled by a proposer and executable by anyone once `minDelay`
/// seconds have passed, so stakers see it coming and can leave first. It has no admin: only a
/// delayed operation of its own can change its delay or its proposers. It holds no role that
/// moves stakes (see contracts/PROPERTIES.md, "Admin powers"). Devnets deploy it with delay 0.
contract ParameterTimelock is TimelockController {
    /// @param minDelay seconds between scheduling and executing a change
    /// @param proposers who may schedule (and cancel) changes
    constructor(uint256 minDelay, address[] memory proposers)
        TimelockController(minDelay, proposers, _anyone(), address(0))
    {}

    function _anyone() private pure returns (address[] memory executors) {
        executors = new address[](1); // address(0): anyone may execute a ready operation
    }
}
