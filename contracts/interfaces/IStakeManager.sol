// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @title IStakeManager: workers' and verifiers' stakes, collateral and slashing
/// @notice An account stakes tokens (`active`). The market locks part of the active stake
/// as collateral per task (`locked <= active`); only the free part (`active - locked`) can
/// be unstaked. Unstaking moves tokens to `unbonding`, withdrawable after
/// `unbondingDelayBlocks`, so a worker cannot run from a pending slash: a slash takes from
/// locked collateral first, then free active stake, then unbonding stake.
///
/// A slash splits what it took: `slashWinnerBps` to the winner, `slashRefereeBps` shared
/// equally among the referees (the rounding dust and, with no referees, the whole referee
/// share is burned) and the rest burned through `TrainToken.burn`. A penalty (timeouts)
/// takes the same way and credits all of it to one beneficiary. Proceeds are credited, never
/// pushed: recipients pull them with `withdraw()`.
///
/// Market callers (MARKET_ROLE) must not take more from `locked` with `slash`/`penalize`
/// than they locked for the task in question, and must unlock only the remainder of that
/// task's collateral; otherwise a later `unlockCollateral` for another task reverts with
/// `StakeInsufficientLocked`. The market functions accept zero amounts (a job may have no
/// collateral); the user functions (`stake`, `requestUnstake`) reject them.
///
/// Powers: MARKET_ROLE (the pool, the market and the dispute game, granted once at
/// deployment) locks, unlocks, slashes, penalises and forfeits; DEFAULT_ADMIN wires the
/// stack and is renounced by the deployment; PARAMETER_ROLE (the timelock) sets the slash
/// split (at least MIN_BURN_BPS burned) and the unbonding delay, within bounds. Stake,
/// unstake, slash, penalty and forfeit are reported to the `listener` (the WorkerPool), so
/// its draw weights follow the stake free to lose; locks and unlocks are not (the pool
/// refreshes on its own assignments and releases, and corrects a weight that a lock left too
/// high at every draw).
///
/// Conservation: this contract's token balance ≥ `totalStaked() + totalCredits()` after
/// every transaction (equal unless someone sent tokens straight here; those are never owed).
interface IStakeManager {
    /// @notice One account's stake. `active` includes `locked`; `unbonding` becomes
    /// withdrawable at block `unbondingReadyAtBlock`.
    struct StakeInfo {
        uint256 active;
        uint256 locked;
        uint256 unbonding;
        uint64 unbondingReadyAtBlock;
    }

    /// @notice A user function was called with amount zero.
    error StakeZeroAmount();
    /// @notice `account`'s free stake (active - locked) is `available`, less than `requested`.
    error StakeInsufficientFree(address account, uint256 requested, uint256 available);
    /// @notice `account`'s locked collateral is `locked`, less than the `requested` unlock.
    error StakeInsufficientLocked(address account, uint256 requested, uint256 locked);
    /// @notice `account` has nothing unbonding.
    error StakeNothingUnbonding(address account);
    /// @notice `account`'s unbonding stake is withdrawable only from block `readyAtBlock`.
    error StakeUnbondingNotReady(address account, uint64 readyAtBlock);
    /// @notice `account` has no credits to withdraw.
    error StakeNoCredits(address account);
    /// @notice A slash named `count` referees, more than `max` (MAX_REFEREES).
    error StakeTooManyReferees(uint256 count, uint256 max);
    /// @notice A slash or penalty named the zero address as a recipient.
    error StakeInvalidRecipient(address recipient);
    /// @notice The split's winner and referee shares together exceed 10_000 bps.
    error StakeInvalidSplit(uint16 winnerBps, uint16 refereeBps);
    /// @notice The unbonding delay must be in [1, MAX_UNBONDING_DELAY_BLOCKS].
    error StakeInvalidUnbondingDelay(uint64 blocks);
    /// @notice `stakeWithPermit`: the permit failed and the allowance (`allowance`) does
    /// not cover `amount` either.
    error StakePermitFailed(address account, uint256 amount, uint256 allowance);
    /// @notice Staking `amount` would take the account's active + unbonding stake past 2^128 - 1.
    error StakeAmountTooLarge(uint256 amount);
    /// @notice The token address given at deployment is zero.
    error StakeInvalidToken();
    /// @notice The listener is set once, at wiring.
    error StakeListenerAlreadySet(address listener);

    /// @notice `account` staked `amount`; `active` is its new active stake.
    event Staked(address indexed account, uint256 amount, uint256 active);
    /// @notice `account` moved `amount` from free active stake to unbonding; `unbonding` is
    /// the new unbonding total, withdrawable from block `readyAtBlock`.
    event UnstakeRequested(address indexed account, uint256 amount, uint256 unbonding, uint64 readyAtBlock);
    /// @notice `account` withdrew `amount` of unbonded stake.
    event UnstakeWithdrawn(address indexed account, uint256 amount);
    /// @notice The market locked `amount` of `account`'s stake; `locked` is the new total.
    event CollateralLocked(address indexed account, uint256 amount, uint256 locked);
    /// @notice The market unlocked `amount` of `account`'s stake; `locked` is the new total.
    event CollateralUnlocked(address indexed account, uint256 amount, uint256 locked);
    /// @notice A slash or penalty took `fromLocked` (out of locked, hence also out of
    /// active), `fromFree` (out of free active) and `fromUnbonding` from `account`.
    event StakeDeducted(address indexed account, uint256 fromLocked, uint256 fromFree, uint256 fromUnbonding);
    /// @notice `account` was slashed `slashed` (≤ the amount asked); `toWinner` was credited
    /// to `winner`, `toReferees` shared among the referees, `burned` burned.
    event StakeSlashed(
        address indexed account, address indexed winner, uint256 slashed, uint256 toWinner, uint256 toReferees, uint256 burned
    );
    /// @notice `account` was penalized `taken`, all credited to `beneficiary`.
    event StakePenalized(address indexed account, address indexed beneficiary, uint256 taken);
    /// @notice `account` was credited `amount`; `credits` is its new withdrawable total.
    event Credited(address indexed account, uint256 amount, uint256 credits);
    /// @notice `account` withdrew `amount` of credits.
    event CreditsWithdrawn(address indexed account, uint256 amount);
    /// @notice The admin set the slash split.
    event SlashSplitUpdated(uint16 winnerBps, uint16 refereeBps);
    /// @notice The admin set the unbonding delay (applies to later requests).
    event UnbondingDelayUpdated(uint64 blocks);
    /// @notice `amount` of `account`'s stake was taken and burned (a referee's penalty, a
    /// timeout's penalty the submitter could have caused, a declined offer).
    event StakeForfeited(address indexed account, uint256 amount);
    /// @notice Stake changes are reported to `listener` from now on.
    event ListenerSet(address indexed listener);

    /// @notice Stake `amount` of the caller's tokens (pulled with `transferFrom`; approve first).
    function stake(uint256 amount) external;

    /// @notice Stake `amount` using an EIP-2612 permit for this contract as spender. If the
    /// permit fails (for example someone submitted it first) but the allowance already covers
    /// `amount`, the stake still goes through; otherwise reverts `StakePermitFailed`.
    function stakeWithPermit(uint256 amount, uint256 deadline, uint8 v, bytes32 r, bytes32 s) external;

    /// @notice Move `amount` of the caller's free stake (active - locked) to unbonding.
    /// The ready block becomes `block.number + unbondingDelayBlocks`; a second request adds
    /// to the unbonding amount and restarts the delay for all of it.
    function requestUnstake(uint256 amount) external;

    /// @notice Withdraw all of the caller's unbonding stake once its ready block is reached.
    function withdrawUnstaked() external;

    /// @notice Withdraw all of the caller's credits (slash proceeds, penalties).
    function withdraw() external;

    /// @notice `account`'s stake.
    function stakeOf(address account) external view returns (StakeInfo memory);

    /// @notice `account`'s free stake: active - locked.
    function freeStake(address account) external view returns (uint256);

    /// @notice `account`'s withdrawable credits.
    function credits(address account) external view returns (uint256);

    /// @notice Sum of active + unbonding stake over all accounts.
    function totalStaked() external view returns (uint256);

    /// @notice Sum of all accounts' credits.
    function totalCredits() external view returns (uint256);

    /// @notice MARKET_ROLE only: lock `amount` of `account`'s free stake as collateral.
    function lockCollateral(address account, uint256 amount) external;

    /// @notice MARKET_ROLE only: release `amount` of `account`'s locked collateral.
    function unlockCollateral(address account, uint256 amount) external;

    /// @notice MARKET_ROLE only: take up to `amount` from `account` (locked first, then free
    /// active, then unbonding) and split it: winner / referees (≤ MAX_REFEREES, equal shares)
    /// / burn. Returns what was taken (less than `amount` if the account holds less).
    function slash(address account, uint256 amount, address winner, address[] calldata referees)
        external
        returns (uint256 slashed);

    /// @notice MARKET_ROLE only: take up to `amount` from `account` (locked first, then free
    /// active, then unbonding) and credit all of it to `beneficiary`. Returns what was taken.
    function penalize(address account, uint256 amount, address beneficiary) external returns (uint256 taken);

    /// @notice MARKET_ROLE only: take up to `amount` from `account` (locked first, then free
    /// active, then unbonding) and burn it: no party gains from it. Returns what was burned.
    function forfeit(address account, uint256 amount) external returns (uint256 burned);

    /// @notice PARAMETER_ROLE only (the timelock): set the slash split;
    /// `winnerBps + refereeBps <= 10_000 - MIN_BURN_BPS`, the rest is burned.
    function setSlashSplit(uint16 winnerBps, uint16 refereeBps) external;

    /// @notice PARAMETER_ROLE only (the timelock): set the unbonding delay, in [1, MAX_UNBONDING_DELAY_BLOCKS].
    function setUnbondingDelay(uint64 blocks) external;

    /// @notice DEFAULT_ADMIN_ROLE only, once (at wiring): report stake changes to `listener`.
    function setListener(IStakeListener listener) external;

    /// @notice Who is told of stake changes (the WorkerPool; 0 before wiring).
    function listener() external view returns (IStakeListener);

    /// @notice The role of the timelock that may set the two parameters.
    function PARAMETER_ROLE() external view returns (bytes32);

    /// @notice Least share of a slash that is burned, in basis points.
    function MIN_BURN_BPS() external view returns (uint16);

    /// @notice The AccessControl role of the market contracts.
    function MARKET_ROLE() external view returns (bytes32);

    /// @notice Most referees one slash can credit.
    function MAX_REFEREES() external view returns (uint256);

    /// @notice Longest unbonding delay the admin may set, in blocks.
    function MAX_UNBONDING_DELAY_BLOCKS() external view returns (uint64);

    /// @notice The staked token.
    function token() external view returns (address);

    /// @notice The winner's share of a slash, in basis points.
    function slashWinnerBps() external view returns (uint16);

    /// @notice The referees' share of a slash, in basis points.
    function slashRefereeBps() external view returns (uint16);

    /// @notice Blocks between an unstake request and its withdrawal.
    function unbondingDelayBlocks() external view returns (uint64);
}

/// @title IStakeListener: told when an account's free stake may have changed
interface IStakeListener {
    /// @notice `account`'s stake changed: recompute what depends on it.
    function stakeChanged(address account) external;
}
