// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IStakeListener} from "./IStakeManager.sol";

/// @title IWorkerPool: who may be drawn for a task, and with what weight
/// @notice Workers and verifiers join the pool with `joinPool()`. Each member sits in a
/// sortition sum tree (one for workers, one for verifiers) with weight
/// `freeStake × reputation`, and weight 0 (out of the tree) while it is at its concurrency
/// limit, stale (no heartbeat within `livenessWindow` blocks), out of stake or without the
/// role. The StakeManager reports every stake, unstake, slash, penalty and forfeit
/// (`stakeChanged`), the dispute game its referees' locks, and the pool refreshes a member
/// when a task of it ends; anyone may `refresh(account)`.
///
/// A draw (`assign`, market only) is made *without replacement*: up to `MAX_DRAW_ATTEMPTS`
/// candidates are drawn from the tree, each with a fresh random derived from the caller's
/// seed and with the intervals of the candidates drawn before it left out, and the first one
/// that is eligible for the job *right now* (role, device class ≥, memory ≥, network figures
/// meeting the job's terms, free stake ≥ collateral, heartbeat within the liveness window,
/// under `maxConcurrent`, not the excluded account) is taken. An excluded or ineligible
/// member is taken out of the draw, never retried: whether a member is eligible changes only
/// whether *it* is taken, never whom the draw reaches next. Stale candidates the draw passed
/// over leave the tree when it assigns. Network terms (`minFetchKiBps`, `maxRpcRttMs`;
/// 0 = none): when either is set, a candidate counts only with figures declared in the
/// registry that were measured within the liveness window (not older than `livenessWindow`
/// blocks) and, if it ever timed out, measured at least `livenessWindow` blocks after its last
/// timeout (the cool-down); then fetch ≥ the minimum and round-trip ≤ the maximum. A member
/// that never declared figures never meets network terms. A worker candidate whose tree
/// weight is above its weight now (a lock since its last refresh) is kept only with
/// probability now / tree (rejection sampling), so worker draws follow the stake free to lose
/// at that moment; one rejected is taken out of the draw like an ineligible one (so a member
/// decides by its own stake only whether it is taken, never whom the draw reaches next), and
/// when no candidate is kept the first one rejected is taken.
/// Region boost: a candidate outside the job's preferred region (0 = no preference) is taken
/// at once only with probability `1 / regionBoost`; otherwise sampling goes on, and the first
/// eligible non-preferred candidate is used if no preferred one turns up within the attempts.
/// The chosen member's collateral is locked in the StakeManager and its active-task count
/// goes up; `release` undoes both when the task ends for that member. Committees are drawn by
/// `drawCommittee`, without replacement.
///
/// Verifier draws (audits, referees) are settled from a future block hash (FutureRandomness)
/// and must see weights fixed before that hash existed: the market and the dispute game
/// `holdDraws(ticket)` when they request one, and from the block after the epoch's first held
/// ticket to the end of that epoch no verifier weight changes (a change is announced by
/// `VerifierWeightDeferred` and made by the next `refresh` after the hold). Verifier draws use
/// the tree weights as held, with no rejection step: a verifier whose stake moved after the
/// hold is drawn by its held weight and seated only if it is still eligible.
///
/// Offers (worker draws) are settled from a future block hash too (JobMarket's offer
/// tickets): the market calls `holdOffers(ticket)` and the worker tree is held the same way
/// (`WorkerWeightDeferred`, made by the next `refresh` after the hold), also for the
/// market's own moves (a member reaching its concurrency limit during a hold stays in the
/// tree, ineligible until released; one released during a hold comes back by its refresh). Worker draws keep the rejection step above, so
/// a draw follows the lesser of the held weight and the weight now.
interface IWorkerPool is IStakeListener {
    /// @notice What a task needs from the member drawn for it.
    /// @param deviceClass minimum device class (numeric compare)
    /// @param memoryMiB minimum device memory
    /// @param preferredRegion region code to boost (0 = none)
    /// @param collateral stake that must be free and is locked on assignment
    /// @param exclude an account that may not be drawn (the task's worker for an audit)
    /// @param minFetchKiBps least declared shard-fetch throughput, KiB/s (0 = none)
    /// @param maxRpcRttMs most declared RPC round-trip, ms (0 = none)
    struct Requirements {
        uint8 deviceClass;
        uint32 memoryMiB;
        uint16 preferredRegion;
        uint256 collateral;
        address exclude;
        uint32 minFetchKiBps;
        uint32 maxRpcRttMs;
    }

    /// @notice A pool member. `active` counts tasks it is assigned to (offered, running or
    /// auditing) and never exceeds its `maxConcurrent` (a declared 0 counts as 1). `roles`
    /// caches the registry roles (ROLE_WORKER | ROLE_VERIFIER bits) read at `joinPool` and
    /// `refresh`; eligibility at draw time always reads the registry itself. Bit 128 of
    /// `roles` (VERIFIER_DEFERRED) marks a verifier weight change deferred by a hold, bit 64
    /// (WORKER_DEFERRED) a worker weight change; the member's next refresh after the hold
    /// makes it.
    struct Member {
        bool joined;
        uint16 active;
        uint8 roles;
    }

    /// @notice The caller holds neither the worker nor the verifier role.
    error PoolRoleMissing(address account);
    /// @notice The caller is already in the pool.
    error PoolAlreadyJoined(address account);
    /// @notice The caller is not in the pool.
    error PoolNotJoined(address account);
    /// @notice `release` or `freeSlot` for a member without active tasks (a market bookkeeping bug).
    error PoolNoActiveTask(address account);
    /// @notice Constructor parameters out of range (zero liveness window or boost).
    error PoolInvalidConfig(uint64 livenessWindow, uint32 regionBoost);

    /// @notice `account` joined the pool.
    event PoolJoined(address indexed account);
    /// @notice `account` left the pool (its running tasks go on).
    event PoolLeft(address indexed account);
    /// @notice `account`'s weight in the worker (`verifier == false`) or verifier tree is
    /// now `weight` (0 = out of the tree).
    event WeightUpdated(address indexed account, bool indexed verifier, uint256 weight);
    /// @notice Verifier draws of `epoch` were requested from ticket `ticket` on: from the block
    /// after it to the epoch's last block, verifier weights stay as they are.
    event DrawsHeld(uint256 indexed epoch, uint64 ticket);
    /// @notice `account`'s verifier weight should now be `weight`, but the verifier tree is
    /// held for a pending draw: a `refresh(account)` after the hold sets it. Announced when
    /// the member is marked; later changes before that refresh are not announced again.
    event VerifierWeightDeferred(address indexed account, uint256 weight);
    /// @notice Offers of `epoch` were requested from ticket `ticket` on: from the block after
    /// it to the epoch's last block, worker weights stay as they are.
    event OffersHeld(uint256 indexed epoch, uint64 ticket);
    /// @notice `account`'s worker weight should now be `weight`, but the worker tree is held
    /// for pending offers: a `refresh(account)` after the hold sets it. Announced when the
    /// member is marked; later changes before that refresh are not announced again.
    event WorkerWeightDeferred(address indexed account, uint256 weight);
    /// @notice `account` was drawn (as a worker, or as an auditor when `verifier`), its
    /// collateral locked; `active` is its new active-task count.
    event MemberAssigned(address indexed account, bool indexed verifier, uint256 collateral, uint16 active);
    /// @notice One of `account`'s tasks ended; `unlocked` collateral was released.
    event MemberReleased(address indexed account, uint256 unlocked, uint16 active);

    /// @notice Join the pool: the caller enters the worker tree if it holds ROLE_WORKER and
    /// the verifier tree if it holds ROLE_VERIFIER. Reverts `PoolRoleMissing`,
    /// `PoolAlreadyJoined`.
    function joinPool() external;

    /// @notice Leave both trees; tasks already assigned go on. Reverts `PoolNotJoined`.
    function leavePool() external;

    /// @notice Recompute `account`'s weights from the registry and the StakeManager
    /// (permissionless; a stale or unstaked member drops out of the trees).
    function refresh(address account) external;

    /// @notice DRAW_ROLE only (the market and the dispute game). A verifier draw was requested
    /// from `ticket`: hold the verifier weights from the block after it to the end of its
    /// epoch (the earliest ticket of an epoch counts). Emits `DrawsHeld` when it moves the hold.
    function holdDraws(uint64 ticket) external;

    /// @notice Whether verifier weights are held in this block (changes are deferred).
    function verifiersHeld() external view returns (bool);

    /// @notice DRAW_ROLE only (the market). Offers were requested from `ticket`: hold the
    /// worker weights as `holdDraws` holds the verifier weights. Emits `OffersHeld` when it
    /// moves the hold.
    function holdOffers(uint64 ticket) external;

    /// @notice Whether worker weights are held in this block (changes are deferred).
    function workersHeld() external view returns (bool);

    /// @notice MARKET_ROLE only. Draw a member eligible for `req` from the worker tree
    /// (`verifier == false`) or the verifier tree, lock `req.collateral` of its stake and
    /// count the task. Returns address(0) (and changes nothing) if no eligible member was
    /// found within `MAX_DRAW_ATTEMPTS`.
    function assign(bytes32 seed, Requirements calldata req, bool verifier) external returns (address member);

    /// @notice MARKET_ROLE only. One task of `account` ended: unlock `unlock` tokens of its
    /// collateral (what is left after any penalty or slash), decrement its active count and
    /// refresh its weights. Reverts `PoolNoActiveTask`.
    function release(address account, uint256 unlock) external;

    /// @notice MARKET_ROLE only. `count` tasks of `account` ended at once (a market settling a
    /// batch): unlock `unlock` tokens in all, decrement its active count by `count` and
    /// refresh its weights once; one `MemberReleased`. Reverts `PoolNoActiveTask` when
    /// `count` is 0 or above its active count.
    function releaseMany(address account, uint256 count, uint256 unlock) external;

    /// @notice MARKET_ROLE only. `account`'s compute for a task is over (its worker
    /// revealed): decrement its active count, keeping its collateral locked (the task still
    /// stands for its window; `unlock` ends it). Its weights are recomputed only when its worker
    /// weight is 0 (at its limit it left the trees; below it, `assign` left its weight as it
    /// was). One `MemberReleased` (unlocked 0). Reverts `PoolNoActiveTask`.
    function freeSlot(address account) external;

    /// @notice MARKET_ROLE only. A task of `account` that holds no pool slot any more (the
    /// market frees a worker's slot when it reveals: its compute is over, and it may take
    /// new work while its result stands for its challenge window) ended: unlock `unlock`
    /// tokens of its collateral and refresh its weights. Counts no task.
    function unlock(address account, uint256 unlock) external;

    /// @notice The member `assign` would draw for `seed` and `req` in this block, without
    /// assigning it (no collateral locked, no task counted): the dispute game draws its
    /// referees this way. address(0) if none was found within `MAX_DRAW_ATTEMPTS`.
    function sample(bytes32 seed, Requirements calldata req, bool verifier) external view returns (address member);

    /// @notice Up to `size` distinct verifiers eligible for `req` (never `req.exclude` nor
    /// `alsoExclude`), drawn by weight *without replacement* from `seed`: each draw skips the
    /// tree intervals of the members drawn before it, so when at most `size` verifiers are
    /// eligible they are all seated. At most size × COMMITTEE_DRAWS_PER_SEAT draws.
    function drawCommittee(bytes32 seed, uint256 size, Requirements calldata req, address alsoExclude)
        external
        view
        returns (address[] memory seated);

    /// @notice Draws per seat `drawCommittee` makes at most.
    function COMMITTEE_DRAWS_PER_SEAT() external view returns (uint256);

    /// @notice Whether `account` could be drawn for `req` in this block.
    function isEligible(address account, Requirements calldata req, bool verifier) external view returns (bool);

    /// @notice `account`'s pool membership.
    function memberOf(address account) external view returns (Member memory);

    /// @notice `account`'s current weight in the worker or verifier tree.
    function weightOf(address account, bool verifier) external view returns (uint256);

    /// @notice Sum of the weights in the worker or verifier tree.
    function totalWeight(bool verifier) external view returns (uint256);

    /// @notice Blocks a heartbeat stays valid for eligibility.
    function livenessWindow() external view returns (uint64);

    /// @notice Region boost factor (1 = no boost).
    function regionBoost() external view returns (uint32);

    /// @notice Candidates sampled per draw before giving up.
    function MAX_DRAW_ATTEMPTS() external view returns (uint256);

    /// @notice The role the market holds to call `assign` and `release`.
    function MARKET_ROLE() external view returns (bytes32);

    /// @notice The role the market and the dispute game hold to call `holdDraws`.
    function DRAW_ROLE() external view returns (bytes32);
}
