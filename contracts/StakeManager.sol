// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {IStakeManager, IStakeListener} from "./interfaces/IStakeManager.sol";
import {ITrainToken} from "./interfaces/ITrainToken.sol";

/// @title StakeManager
/// @notice Holds stakes, per-task collateral locks, unbonding and slash proceeds. The
/// deployer is DEFAULT_ADMIN only while it wires the stack (MARKET_ROLE to the market
/// contracts, PARAMETER_ROLE to the timelock, the stake listener) and then renounces it: after
/// that no address can move a staker's tokens except the market contracts' slashes and
/// penalties, and the two bounded parameters change only through the timelock's delay.
contract StakeManager is AccessControl, ReentrancyGuard, IStakeManager {
    using SafeERC20 for IERC20;

    /// @inheritdoc IStakeManager
    bytes32 public constant MARKET_ROLE = keccak256("MARKET_ROLE");
    /// @inheritdoc IStakeManager
    bytes32 public constant PARAMETER_ROLE = keccak256("PARAMETER_ROLE");
    /// @inheritdoc IStakeManager
    uint16 public constant MIN_BURN_BPS = 1_000;
    /// @inheritdoc IStakeManager
    uint256 public constant MAX_REFEREES = 16;
    /// @inheritdoc IStakeManager
    uint64 public constant MAX_UNBONDING_DELAY_BLOCKS = 2_000_000;
    uint16 private constant BPS = 10_000;

    /// @inheritdoc IStakeManager
    address public immutable token;
    /// @inheritdoc IStakeManager
    uint16 public slashWinnerBps = 5_000;
    /// @inheritdoc IStakeManager
    uint16 public slashRefereeBps = 2_000;
    /// @inheritdoc IStakeManager
    uint64 public unbondingDelayBlocks;
    /// @inheritdoc IStakeManager
    uint256 public totalStaked;
    /// @inheritdoc IStakeManager
    uint256 public totalCredits;
    /// @inheritdoc IStakeManager
    IStakeListener public listener;

    /// @dev Storage layout of a StakeInfo: `active` and `locked` share one slot, so locking
    /// collateral on a staked account is never a zero-to-nonzero store, and a lock or unlock
    /// touches one slot. `active + unbonding` of an account fits uint128 (checked at stake).
    struct Stake {
        uint128 active;
        uint128 locked;
        uint128 unbonding;
        uint64 unbondingReadyAtBlock;
    }

    mapping(address account => Stake) private _stakes;
    mapping(address account => uint256 amount) private _credits;

    /// @param token_ the TrainToken staked here (its `burn` destroys slash proceeds).
    /// @param unbondingDelayBlocks_ initial unbonding delay, in [1, MAX_UNBONDING_DELAY_BLOCKS].
    constructor(address token_, uint64 unbondingDelayBlocks_) {
        if (token_ == address(0)) revert StakeInvalidToken();
        _validateUnbondingDelay(unbondingDelayBlocks_);
        token = token_;
        unbondingDelayBlocks = unbondingDelayBlocks_;
        _grantRole(DEFAULT_ADMIN_ROLE, msg.sender);
        // PARAMETER_ROLE administers itself: the admin that wires the stack hands it to the
        // timelock, and renouncing DEFAULT_ADMIN does not take it away.
        _setRoleAdmin(PARAMETER_ROLE, PARAMETER_ROLE);
        _grantRole(PARAMETER_ROLE, msg.sender);
    }

    // ---------------------------------------------------------------- staker calls

    /// @inheritdoc IStakeManager
    function stake(uint256 amount) external nonReentrant {
        _stake(amount);
    }

    /// @inheritdoc IStakeManager
    function stakeWithPermit(uint256 amount, uint256 deadline, uint8 v, bytes32 r, bytes32 s) external nonReentrant {
        // A permit seen in the mempool can be submitted by anyone first; that burns its nonce
        // but sets the same allowance, so fall back to the allowance instead of failing.
        try IERC20Permit(token).permit(msg.sender, address(this), amount, deadline, v, r, s) {}
        catch {
            uint256 allowance = IERC20(token).allowance(msg.sender, address(this));
            if (allowance < amount) revert StakePermitFailed(msg.sender, amount, allowance);
        }
        _stake(amount);
    }

    /// @inheritdoc IStakeManager
    function requestUnstake(uint256 amount) external {
        if (amount == 0) revert StakeZeroAmount();
        Stake storage info = _stakes[msg.sender];
        uint256 free = info.active - info.locked;
        // INVARIANT: locked <= active; locked collateral cannot start unbonding.
        if (amount > free) revert StakeInsufficientFree(msg.sender, amount, free);
        uint64 readyAt = uint64(block.number) + unbondingDelayBlocks;
        info.active -= uint128(amount);
        info.unbonding += uint128(amount);
        info.unbondingReadyAtBlock = readyAt;
        emit UnstakeRequested(msg.sender, amount, info.unbonding, readyAt);
        _notify(msg.sender);
    }

    /// @inheritdoc IStakeManager
    function withdrawUnstaked() external nonReentrant {
        Stake storage info = _stakes[msg.sender];
        uint256 amount = info.unbonding;
        if (amount == 0) revert StakeNothingUnbonding(msg.sender);
        // INVARIANT: unbonding stake stays slashable until its delay has passed.
        if (block.number < info.unbondingReadyAtBlock) {
            revert StakeUnbondingNotReady(msg.sender, info.unbondingReadyAtBlock);
        }
        info.unbonding = 0;
        info.unbondingReadyAtBlock = 0;
        totalStaked -= amount;
        emit UnstakeWithdrawn(msg.sender, amount);
        IERC20(token).safeTransfer(msg.sender, amount);
    }

    /// @inheritdoc IStakeManager
    function withdraw() external nonReentrant {
        uint256 amount = _credits[msg.sender];
        if (amount == 0) revert StakeNoCredits(msg.sender);
        _credits[msg.sender] = 0;
        totalCredits -= amount;
        emit CreditsWithdrawn(msg.sender, amount);
        IERC20(token).safeTransfer(msg.sender, amount);
    }

    // ---------------------------------------------------------------- market calls

    /// @inheritdoc IStakeManager
    function lockCollateral(address account, uint256 amount) external onlyRole(MARKET_ROLE) {
        Stake storage info = _stakes[account];
        uint256 free = info.active - info.locked;
        // INVARIANT: locked <= active.
        if (amount > free) revert StakeInsufficientFree(account, amount, free);
        info.locked += uint128(amount);
        emit CollateralLocked(account, amount, info.locked);
    }

    /// @inheritdoc IStakeManager
    function unlockCollateral(address account, uint256 amount) external onlyRole(MARKET_ROLE) {
        Stake storage info = _stakes[account];
        if (amount > info.locked) revert StakeInsufficientLocked(account, amount, info.locked);
        info.locked -= uint128(amount);
        emit CollateralUnlocked(account, amount, info.locked);
    }

    /// @inheritdoc IStakeManager
    function slash(address account, uint256 amount, address winner, address[] calldata referees)
        external
        onlyRole(MARKET_ROLE)
        nonReentrant
        returns (uint256 slashed)
    {
        if (winner == address(0)) revert StakeInvalidRecipient(winner);
        uint256 refereeCount = referees.length;
        if (refereeCount > MAX_REFEREES) revert StakeTooManyReferees(refereeCount, MAX_REFEREES);
        for (uint256 i = 0; i < refereeCount; ++i) {
            if (referees[i] == address(0)) revert StakeInvalidRecipient(address(0));
        }

        slashed = _deduct(account, amount);
        uint256 toWinner = (slashed * slashWinnerBps) / BPS;
        uint256 perReferee = refereeCount == 0 ? 0 : (slashed * slashRefereeBps) / BPS / refereeCount;
        uint256 toReferees = perReferee * refereeCount;
        uint256 burned = slashed - toWinner - toReferees;

        _credit(winner, toWinner);
        for (uint256 i = 0; i < refereeCount; ++i) {
            _credit(referees[i], perReferee);
        }
        emit StakeSlashed(account, winner, slashed, toWinner, toReferees, burned);
        _notify(account);
        if (burned != 0) ITrainToken(token).burn(burned);
    }

    /// @inheritdoc IStakeManager
    function penalize(address account, uint256 amount, address beneficiary)
        external
        onlyRole(MARKET_ROLE)
        returns (uint256 taken)
    {
        if (beneficiary == address(0)) revert StakeInvalidRecipient(beneficiary);
        taken = _deduct(account, amount);
        _credit(beneficiary, taken);
        emit StakePenalized(account, beneficiary, taken);
        _notify(account);
    }

    /// @inheritdoc IStakeManager
    function forfeit(address account, uint256 amount) external onlyRole(MARKET_ROLE) nonReentrant returns (uint256 burned) {
        burned = _deduct(account, amount);
        emit StakeForfeited(account, burned);
        _notify(account);
        if (burned != 0) ITrainToken(token).burn(burned);
    }

    // ---------------------------------------------------------------- admin calls

    /// @inheritdoc IStakeManager
    function setSlashSplit(uint16 winnerBps, uint16 refereeBps) external onlyRole(PARAMETER_ROLE) {
        // INVARIANT: at least MIN_BURN_BPS of every slash is burned, so a loser colluding
        // with the winner (or the referees) always loses tokens.
        if (uint256(winnerBps) + refereeBps > BPS - MIN_BURN_BPS) revert StakeInvalidSplit(winnerBps, refereeBps);
        slashWinnerBps = winnerBps;
        slashRefereeBps = refereeBps;
        emit SlashSplitUpdated(winnerBps, refereeBps);
    }

    /// @inheritdoc IStakeManager
    function setUnbondingDelay(uint64 blocks) external onlyRole(PARAMETER_ROLE) {
        _validateUnbondingDelay(blocks);
        unbondingDelayBlocks = blocks;
        emit UnbondingDelayUpdated(blocks);
    }

    /// @inheritdoc IStakeManager
    function setListener(IStakeListener listener_) external onlyRole(DEFAULT_ADMIN_ROLE) {
        if (address(listener) != address(0)) revert StakeListenerAlreadySet(address(listener));
        listener = listener_;
        emit ListenerSet(address(listener_));
    }

    // ---------------------------------------------------------------- views

    /// @inheritdoc IStakeManager
    function stakeOf(address account) external view returns (StakeInfo memory) {
        Stake storage info = _stakes[account];
        return StakeInfo(info.active, info.locked, info.unbonding, info.unbondingReadyAtBlock);
    }

    /// @inheritdoc IStakeManager
    function freeStake(address account) external view returns (uint256) {
        Stake storage info = _stakes[account];
        return info.active - info.locked;
    }

    /// @inheritdoc IStakeManager
    function credits(address account) external view returns (uint256) {
        return _credits[account];
    }

    // ---------------------------------------------------------------- internals

    function _stake(uint256 amount) private {
        if (amount == 0) revert StakeZeroAmount();
        Stake storage info = _stakes[msg.sender];
        // INVARIANT: an account's active + unbonding stake fits uint128 (its packed slot).
        if (uint256(info.active) + info.unbonding + amount > type(uint128).max) revert StakeAmountTooLarge(amount);
        info.active += uint128(amount);
        totalStaked += amount;
        emit Staked(msg.sender, amount, info.active);
        _notify(msg.sender);
        // The token is ours (no transfer fee, no callback), so crediting before the pull
        // cannot overstate the balance; a failed pull reverts the whole call.
        IERC20(token).safeTransferFrom(msg.sender, address(this), amount);
    }

    /// @dev Take up to `amount` from locked, then free active, then unbonding stake.
    function _deduct(address account, uint256 amount) private returns (uint256 taken) {
        Stake storage info = _stakes[account];
        uint256 fromLocked = _min(amount, info.locked);
        uint256 fromFree = _min(amount - fromLocked, info.active - info.locked);
        uint256 fromUnbonding = _min(amount - fromLocked - fromFree, info.unbonding);
        taken = fromLocked + fromFree + fromUnbonding;
        info.locked -= uint128(fromLocked);
        info.active -= uint128(fromLocked + fromFree);
        info.unbonding -= uint128(fromUnbonding);
        totalStaked -= taken;
        emit StakeDeducted(account, fromLocked, fromFree, fromUnbonding);
    }

    /// @dev Tell the pool that `account`'s free stake moved, so its draw weight follows it.
    function _notify(address account) private {
        IStakeListener l = listener;
        if (address(l) != address(0)) l.stakeChanged(account);
    }

    function _credit(address account, uint256 amount) private {
        if (amount == 0) return;
        uint256 balance = _credits[account] + amount;
        _credits[account] = balance;
        totalCredits += amount;
        emit Credited(account, amount, balance);
    }

    function _validateUnbondingDelay(uint64 blocks) private pure {
        if (blocks == 0 || blocks > MAX_UNBONDING_DELAY_BLOCKS) revert StakeInvalidUnbondingDelay(blocks);
    }

    function _min(uint256 a, uint256 b) private pure returns (uint256) {
        return a < b ? a : b;
    }
}
