// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {StakeFixture} from "./utils/StakeFixture.sol";
import {StakeHandler} from "./handlers/StakeHandler.sol";
import {IStakeManager} from "contracts/interfaces/IStakeManager.sol";

/// @title StakeManager invariants (forge): TrainToken conservation and StakeManager solvency
/// @notice The fuzzer calls only StakeHandler (every one of its actions); after each call the
/// `_assert*` functions below must hold. Properties T1, S1, S2, S3 of contracts/PROPERTIES.md,
/// plus the per-call checks the handler makes (S4, S5, S6, S7). One invariant checks them all,
/// so one campaign of `runs` x `depth` calls tests every property (as five invariants with a
/// fixed seed they drew the same call sequences five times over).
/// Run: `forge test --match-path tests/forge/StakeManager.invariants.t.sol` (make forge-test).
/// forge-config: default.invariant.fail-on-revert = true
contract StakeManagerInvariants is StakeFixture {
    StakeHandler internal handler;

    function setUp() public {
        vm.roll(1_000);
        _deployStack();
        handler = new StakeHandler(token, stakeManager);
        token.transferOwnership(address(handler)); // the handler mints (ghost-counted)
        _grantMarket(address(handler));

        targetContract(address(handler));
        bytes4[] memory selectors = new bytes4[](14);
        selectors[0] = StakeHandler.roll.selector;
        selectors[1] = StakeHandler.mint.selector;
        selectors[2] = StakeHandler.burn.selector;
        selectors[3] = StakeHandler.stake.selector;
        selectors[4] = StakeHandler.requestUnstake.selector;
        selectors[5] = StakeHandler.withdrawUnstaked.selector;
        selectors[6] = StakeHandler.withdrawCredits.selector;
        selectors[7] = StakeHandler.donate.selector;
        selectors[8] = StakeHandler.lock.selector;
        selectors[9] = StakeHandler.unlock.selector;
        selectors[10] = StakeHandler.slash.selector;
        selectors[11] = StakeHandler.penalize.selector;
        selectors[12] = StakeHandler.forfeit.selector;
        selectors[13] = StakeHandler.stake.selector; // staking twice as likely: keeps stakes around
        targetSelector(FuzzSelector({addr: address(handler), selectors: selectors}));
    }

    // ================================================================ invariants

    /// Every property below, after every call.
    function invariant_everyPropertyHolds() public view {
        _assertPerCallChecksHeld();
        _assertTokenConservation();
        _assertStakeManagerSolvent();
        _assertLockedWithinActive();
        _assertTotalsEqualSums();
    }

    /// T1: Σ balances of every holder + totalBurned == totalMinted, and Σ balances == totalSupply.
    function _assertTokenConservation() internal view {
        uint256 sum = token.balanceOf(address(stakeManager)) + token.balanceOf(address(handler))
            + token.balanceOf(address(this)) + token.balanceOf(address(token));
        for (uint256 i = 0; i < handler.ACTORS(); ++i) {
            sum += token.balanceOf(handler.actor(i));
        }
        assertEq(sum, token.totalSupply(), "T1: sum of balances != totalSupply");
        assertEq(sum + token.totalBurned(), token.totalMinted(), "T1: balances + burned != minted");
        assertEq(token.totalMinted(), handler.ghostMinted(), "T1: totalMinted != minted by the handler");
        assertEq(token.totalBurned(), handler.ghostBurned(), "T1: totalBurned != burned by actors and slashes");
    }

    /// S1: the StakeManager holds at least what it owes (exactly that plus direct transfers).
    function _assertStakeManagerSolvent() internal view {
        uint256 owed = stakeManager.totalStaked() + stakeManager.totalCredits();
        uint256 balance = token.balanceOf(address(stakeManager));
        assertGe(balance, owed, "S1: balance < totalStaked + totalCredits");
        assertEq(balance, owed + handler.ghostDonated(), "S1: balance != owed + tokens sent straight to it");
    }

    /// S2: locked <= active for every account.
    function _assertLockedWithinActive() internal view {
        for (uint256 i = 0; i < handler.ACTORS(); ++i) {
            IStakeManager.StakeInfo memory info = stakeManager.stakeOf(handler.actor(i));
            assertLe(info.locked, info.active, "S2: locked > active");
        }
    }

    /// S3: totalStaked == Σ (active + unbonding), totalCredits == Σ credits (over every account
    /// that can hold either: the actors), and both equal the handler's ghost totals.
    function _assertTotalsEqualSums() internal view {
        uint256 staked;
        uint256 owed;
        for (uint256 i = 0; i < handler.ACTORS(); ++i) {
            address who = handler.actor(i);
            IStakeManager.StakeInfo memory info = stakeManager.stakeOf(who);
            staked += info.active + info.unbonding;
            owed += stakeManager.credits(who);
        }
        assertEq(stakeManager.totalStaked(), staked, "S3: totalStaked != sum of active + unbonding");
        assertEq(stakeManager.totalCredits(), owed, "S3: totalCredits != sum of credits");
        assertEq(stakeManager.totalStaked(), handler.ghostStaked(), "S3: totalStaked != ghost");
        assertEq(stakeManager.totalCredits(), handler.ghostCredits(), "S3: totalCredits != ghost");
    }

    /// S4-S7: the handler's per-call checks (early withdrawal reverts, deduction order, slash
    /// split with at least MIN_BURN_BPS burned, withdrawals pay exactly what is owed).
    function _assertPerCallChecksHeld() internal view {
        assertEq(bytes(handler.violation()).length, 0, string.concat("per-call check: ", handler.violation()));
    }
}
