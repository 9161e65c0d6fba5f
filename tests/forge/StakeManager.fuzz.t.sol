// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {StakeFixture} from "./utils/StakeFixture.sol";
import {IStakeManager} from "contracts/interfaces/IStakeManager.sol";

/// @title StakeManager fuzz tests (forge): single-call properties over random inputs
/// @notice Each `testFuzz_*` runs `[fuzz] runs` times (256 by default, 10,000 with
/// FOUNDRY_PROFILE=deep). Deployment and market permission: utils/StakeFixture.sol.
contract StakeManagerFuzz is StakeFixture {
    address internal constant STAKER = address(0xA11CE);
    address internal constant WINNER = address(0xB0B);

    function setUp() public {
        _deployStack();
        _grantMarket(address(this)); // this test plays the market
    }

    function _stake(uint256 amount) internal {
        token.mint(STAKER, amount);
        vm.startPrank(STAKER);
        token.approve(address(stakeManager), amount);
        stakeManager.stake(amount);
        vm.stopPrank();
    }

    /// S6: a slash takes min(amount, held), and winner + referees + burn == slashed, with at
    /// least MIN_BURN_BPS burned, for any amount and any number of referees up to the maximum.
    function testFuzz_slash_splitsExactly(uint256 staked, uint256 amount, uint256 refereeCount) public {
        staked = bound(staked, 1, 1e30);
        amount = bound(amount, 0, 2e30);
        refereeCount = bound(refereeCount, 0, stakeManager.MAX_REFEREES());
        _stake(staked);
        address[] memory referees = new address[](refereeCount);
        for (uint256 i = 0; i < refereeCount; ++i) {
            referees[i] = address(uint160(0xEEF0 + i));
        }
        uint256 burnedBefore = token.totalBurned();

        uint256 slashed = stakeManager.slash(STAKER, amount, WINNER, referees);

        assertEq(slashed, amount < staked ? amount : staked, "slashed != min(amount, held)");
        uint256 burned = token.totalBurned() - burnedBefore;
        assertEq(stakeManager.totalCredits() + burned, slashed, "credits + burned != slashed");
        assertGe(burned * 10_000, slashed * stakeManager.MIN_BURN_BPS(), "burned < MIN_BURN_BPS of slashed");
        assertEq(
            token.balanceOf(address(stakeManager)),
            stakeManager.totalStaked() + stakeManager.totalCredits(),
            "balance != staked + credits"
        );
    }

    /// S2/S4: the locked part of a stake cannot start unbonding.
    function testFuzz_requestUnstake_moreThanFree_reverts(uint256 staked, uint256 locked, uint256 extra) public {
        staked = bound(staked, 1, 1e30);
        locked = bound(locked, 0, staked);
        extra = bound(extra, 1, 1e30);
        _stake(staked);
        stakeManager.lockCollateral(STAKER, locked);
        uint256 free = staked - locked;

        vm.expectRevert(
            abi.encodeWithSelector(IStakeManager.StakeInsufficientFree.selector, STAKER, free + extra, free)
        );
        vm.prank(STAKER);
        stakeManager.requestUnstake(free + extra);
    }
}
