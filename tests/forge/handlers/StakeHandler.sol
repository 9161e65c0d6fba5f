// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {TestBase} from "../utils/Test.sol";
import {TrainToken} from "contracts/TrainToken.sol";
import {StakeManager} from "contracts/StakeManager.sol";
import {IStakeManager} from "contracts/interfaces/IStakeManager.sol";

/// @title StakeHandler: the one contract forge's invariant fuzzer calls for the stake suite
/// @notice Drives ACTORS stakers through the staker calls (stake, requestUnstake,
/// withdrawUnstaked, withdraw of credits, direct transfers to the StakeManager, burns) and
/// plays the market itself (lockCollateral, unlockCollateral, slash, penalize, forfeit). Every
/// input is bounded so that the call it makes is valid: the suite runs with fail-on-revert,
/// so a valid call that reverts is a failure. Ghost variables count what the totals must be.
/// Checks that belong to one call (a slash's split, the deduction order, what a withdrawal
/// pays) are made here and the first broken one is kept in `violation`, which an invariant
/// asserts empty (so they hold even with fail-on-revert off).
///
/// The handler needs the market's permission on the StakeManager: the test contract grants
/// it in ONE place, `StakeFixture._grantMarket` (tests/forge/utils/StakeFixture.sol; change it
/// there if the wiring changes).
contract StakeHandler is TestBase {
    uint256 public constant ACTORS = 5;
    /// Largest amount one call mints or stakes (1e9 tokens): far from uint128 overflow.
    uint256 internal constant MAX_AMOUNT = 1e27;

    TrainToken public immutable token;
    StakeManager public immutable stakeManager;

    address[ACTORS] internal _actors;

    /// The block the handler's chain is at; every action rolls to it first, so the fuzzer's
    /// `roll` moves time whether or not forge keeps cheatcode block changes between calls.
    uint256 public currentBlock;

    // ghost totals: what the contracts' counters must equal
    uint256 public ghostMinted;
    uint256 public ghostBurned;
    uint256 public ghostStaked;
    uint256 public ghostCredits;
    /// Tokens sent straight to the StakeManager (owed to nobody).
    uint256 public ghostDonated;

    /// First broken per-call check ("" while all held).
    string public violation;

    constructor(TrainToken token_, StakeManager stakeManager_) {
        token = token_;
        stakeManager = stakeManager_;
        for (uint256 i = 0; i < ACTORS; ++i) {
            _actors[i] = address(uint160(0xA110 + i));
        }
        currentBlock = block.number;
    }

    modifier atCurrentBlock() {
        vm.roll(currentBlock);
        _;
    }

    // ================================================================ views for the test

    function actor(uint256 i) external view returns (address) {
        return _actors[i];
    }

    // ================================================================ time

    /// Advance the chain by 1..3 unbonding delays' worth of blocks at most.
    function roll(uint256 blocks) external {
        currentBlock += bound(blocks, 1, 3 * uint256(stakeManager.unbondingDelayBlocks()));
        vm.roll(currentBlock);
    }

    // ================================================================ token (the test's minter)

    function mint(uint256 actorSeed, uint256 amount) external atCurrentBlock {
        _mint(_actor(actorSeed), bound(amount, 1, MAX_AMOUNT));
    }

    /// An actor burns some of its own tokens (counted in totalBurned).
    function burn(uint256 actorSeed, uint256 amount) external atCurrentBlock {
        address who = _actor(actorSeed);
        uint256 balance = token.balanceOf(who);
        if (balance == 0) return;
        amount = bound(amount, 1, balance);
        vm.prank(who);
        token.burn(amount);
        ghostBurned += amount;
    }

    // ================================================================ staker calls

    /// Stake; mints the shortfall first so that most calls do something.
    function stake(uint256 actorSeed, uint256 amount) external atCurrentBlock {
        address who = _actor(actorSeed);
        amount = bound(amount, 1, MAX_AMOUNT);
        uint256 balance = token.balanceOf(who);
        if (balance < amount) _mint(who, amount - balance);
        vm.startPrank(who);
        token.approve(address(stakeManager), amount);
        stakeManager.stake(amount);
        vm.stopPrank();
        ghostStaked += amount;
    }

    function requestUnstake(uint256 actorSeed, uint256 amount) external atCurrentBlock {
        address who = _actor(actorSeed);
        uint256 free = stakeManager.freeStake(who);
        if (free == 0) return;
        amount = bound(amount, 1, free);
        IStakeManager.StakeInfo memory before = stakeManager.stakeOf(who);
        vm.prank(who);
        stakeManager.requestUnstake(amount);
        IStakeManager.StakeInfo memory after_ = stakeManager.stakeOf(who);
        _check(after_.active == before.active - amount, "requestUnstake: active not reduced by amount");
        _check(after_.unbonding == before.unbonding + amount, "requestUnstake: unbonding not raised by amount");
        _check(
            after_.unbondingReadyAtBlock == currentBlock + stakeManager.unbondingDelayBlocks(),
            "requestUnstake: delay not restarted"
        );
    }

    /// Withdraw unbonding stake: before its block the call must revert; from it, it pays all.
    function withdrawUnstaked(uint256 actorSeed) external atCurrentBlock {
        address who = _actor(actorSeed);
        IStakeManager.StakeInfo memory info = stakeManager.stakeOf(who);
        if (info.unbonding == 0) return;
        if (currentBlock < info.unbondingReadyAtBlock) {
            vm.prank(who);
            try stakeManager.withdrawUnstaked() {
                _check(false, "withdrawUnstaked: paid before the unbonding delay");
            } catch (bytes memory reason) {
                _check(
                    bytes4(reason) == IStakeManager.StakeUnbondingNotReady.selector,
                    "withdrawUnstaked: early call reverted with another error"
                );
            }
            return;
        }
        uint256 balanceBefore = token.balanceOf(who);
        vm.prank(who);
        stakeManager.withdrawUnstaked();
        _check(token.balanceOf(who) == balanceBefore + info.unbonding, "withdrawUnstaked: paid a wrong amount");
        _check(stakeManager.stakeOf(who).unbonding == 0, "withdrawUnstaked: unbonding left");
        ghostStaked -= info.unbonding;
    }

    /// Withdraw credits (slash and penalty proceeds).
    function withdrawCredits(uint256 actorSeed) external atCurrentBlock {
        address who = _actor(actorSeed);
        uint256 owed = stakeManager.credits(who);
        if (owed == 0) return;
        uint256 balanceBefore = token.balanceOf(who);
        vm.prank(who);
        stakeManager.withdraw();
        _check(token.balanceOf(who) == balanceBefore + owed, "withdraw: paid a wrong amount");
        _check(stakeManager.credits(who) == 0, "withdraw: credits left");
        ghostCredits -= owed;
    }

    /// Send tokens straight to the StakeManager (not a stake: nobody may claim them).
    function donate(uint256 actorSeed, uint256 amount) external atCurrentBlock {
        address who = _actor(actorSeed);
        amount = bound(amount, 1, MAX_AMOUNT);
        uint256 balance = token.balanceOf(who);
        if (balance < amount) _mint(who, amount - balance);
        vm.prank(who);
        _check(token.transfer(address(stakeManager), amount), "donate: transfer returned false");
        ghostDonated += amount;
    }

    // ================================================================ market calls (this handler)

    function lock(uint256 actorSeed, uint256 amount) external atCurrentBlock {
        address who = _actor(actorSeed);
        uint256 free = stakeManager.freeStake(who);
        amount = bound(amount, 0, free); // the market may lock zero
        stakeManager.lockCollateral(who, amount);
    }

    function unlock(uint256 actorSeed, uint256 amount) external atCurrentBlock {
        address who = _actor(actorSeed);
        amount = bound(amount, 0, stakeManager.stakeOf(who).locked);
        stakeManager.unlockCollateral(who, amount);
    }

    /// Slash up to 1.5x what the account holds, to a winner and 0..4 referees (actors).
    function slash(uint256 actorSeed, uint256 amount, uint256 winnerSeed, uint256 refereeSeed)
        external
        atCurrentBlock
    {
        address who = _actor(actorSeed);
        IStakeManager.StakeInfo memory before = stakeManager.stakeOf(who);
        amount = bound(amount, 0, _held(before) + _held(before) / 2);
        address winner = _actor(winnerSeed);
        address[] memory referees = new address[](refereeSeed % 5);
        for (uint256 i = 0; i < referees.length; ++i) {
            referees[i] = _actor(uint256(keccak256(abi.encode(refereeSeed, i))));
        }

        uint256 creditsBefore = stakeManager.totalCredits();
        uint256 burnedBefore = token.totalBurned();
        uint256 slashed = stakeManager.slash(who, amount, winner, referees);

        _checkDeduction(who, before, amount, slashed);
        uint256 credited = stakeManager.totalCredits() - creditsBefore;
        uint256 burned = token.totalBurned() - burnedBefore;
        _check(credited + burned == slashed, "slash: credited + burned != slashed");
        _check(burned * 10_000 >= slashed * stakeManager.MIN_BURN_BPS(), "slash: burned less than MIN_BURN_BPS");
        ghostStaked -= slashed;
        ghostCredits += credited;
        ghostBurned += burned;
    }

    /// Penalize up to 1.5x what the account holds, all credited to a beneficiary (an actor).
    function penalize(uint256 actorSeed, uint256 amount, uint256 beneficiarySeed) external atCurrentBlock {
        address who = _actor(actorSeed);
        IStakeManager.StakeInfo memory before = stakeManager.stakeOf(who);
        amount = bound(amount, 0, _held(before) + _held(before) / 2);
        address beneficiary = _actor(beneficiarySeed);
        uint256 owedBefore = stakeManager.credits(beneficiary);
        uint256 taken = stakeManager.penalize(who, amount, beneficiary);
        _checkDeduction(who, before, amount, taken);
        _check(stakeManager.credits(beneficiary) == owedBefore + taken, "penalize: beneficiary not credited all");
        ghostStaked -= taken;
        ghostCredits += taken;
    }

    /// Forfeit (burn) up to 1.5x what the account holds.
    function forfeit(uint256 actorSeed, uint256 amount) external atCurrentBlock {
        address who = _actor(actorSeed);
        IStakeManager.StakeInfo memory before = stakeManager.stakeOf(who);
        amount = bound(amount, 0, _held(before) + _held(before) / 2);
        uint256 burnedBefore = token.totalBurned();
        uint256 burned = stakeManager.forfeit(who, amount);
        _checkDeduction(who, before, amount, burned);
        _check(token.totalBurned() - burnedBefore == burned, "forfeit: burned != taken");
        ghostStaked -= burned;
        ghostBurned += burned;
    }

    // ================================================================ internals

    function _actor(uint256 seed) internal view returns (address) {
        return _actors[seed % ACTORS];
    }

    function _mint(address to, uint256 amount) internal {
        token.mint(to, amount);
        ghostMinted += amount;
    }

    function _held(IStakeManager.StakeInfo memory info) internal pure returns (uint256) {
        return info.active + info.unbonding;
    }

    /// A slash, penalty or forfeit takes min(amount, held): locked first, then free active,
    /// then unbonding (so unbonding cannot dodge it).
    function _checkDeduction(address who, IStakeManager.StakeInfo memory before, uint256 amount, uint256 taken)
        internal
    {
        IStakeManager.StakeInfo memory after_ = stakeManager.stakeOf(who);
        uint256 expected = amount < _held(before) ? amount : _held(before);
        _check(taken == expected, "deduct: took other than min(amount, held)");
        uint256 fromLocked = _min(amount, before.locked);
        uint256 fromFree = _min(amount - fromLocked, before.active - before.locked);
        uint256 fromUnbonding = _min(amount - fromLocked - fromFree, before.unbonding);
        _check(after_.locked == before.locked - fromLocked, "deduct: locked not taken first");
        _check(after_.active == before.active - fromLocked - fromFree, "deduct: free active not taken second");
        _check(after_.unbonding == before.unbonding - fromUnbonding, "deduct: unbonding not taken last");
    }

    function _check(bool ok, string memory what) internal {
        if (!ok && bytes(violation).length == 0) violation = what;
    }

    function _min(uint256 a, uint256 b) internal pure returns (uint256) {
        return a < b ? a : b;
    }
}
