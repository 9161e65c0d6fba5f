// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {GameActions} from "./GameActions.sol";
import {MarketHandlerBase} from "./MarketHandlerBase.sol";
import {TrainToken} from "contracts/TrainToken.sol";
import {IdentityRegistry} from "contracts/IdentityRegistry.sol";
import {StakeManager} from "contracts/StakeManager.sol";
import {WorkerPool} from "contracts/WorkerPool.sol";
import {JobMarket} from "contracts/JobMarket.sol";
import {DisputeGame} from "contracts/DisputeGame.sol";
import {IStakeManager} from "contracts/interfaces/IStakeManager.sol";
import {IIdentityRegistry, ROLE_WORKER, ROLE_VERIFIER} from "contracts/interfaces/IIdentityRegistry.sol";

/// @title MarketHandler: the one contract forge's invariant fuzzer calls for the market suite
/// @notice The clock, staking, identities, pool membership, withdrawals and donations; the job,
/// task and dispute actions are inherited (TaskActions, GameActions; state and helpers in
/// MarketHandlerBase). The housekeeping actions (heartbeat, refresh, stake, unstake, donate,
/// leave / join) act one call in four, so that the depth goes to the market. The suite gives it the token's ownership (it mints, counted) and
/// calls `init` once: every actor but W3 and V2 registers (workers and verifiers join the
/// pool) and every staker stakes INITIAL_STAKE.
contract MarketHandler is GameActions {
    constructor(
        TrainToken token_,
        IdentityRegistry registry_,
        StakeManager stakeManager_,
        WorkerPool pool_,
        JobMarket market_,
        DisputeGame game_
    ) MarketHandlerBase(token_, registry_, stakeManager_, pool_, market_, game_) {}

    /// Set the actors up (the suite calls it once, after handing over the token).
    function init() external {
        for (uint256 i = 0; i < ACTORS; ++i) {
            if (_roles[i] != 0 && !_lateJoiner(i)) _register(i);
        }
        for (uint256 i = 2; i < ACTORS; ++i) {
            _stake(_actors[i], INITIAL_STAKE);
        }
    }

    // ================================================================ time and keepers

    /// Advance 1-5 blocks (phases are 5-60 blocks long).
    function roll(uint256 blocks) external {
        currentBlock += bound(blocks, 1, 5);
        vm.roll(currentBlock);
    }

    /// Advance 6-40 blocks, or (one call in eight) 200-300: past clocks, windows, job
    /// expiries and the lapse of a draw's ticket (its epoch's end, ≤ 28 blocks on).
    function rollFar(uint256 blocks) external {
        currentBlock += blocks % 8 != 0 ? bound(blocks >> 3, 6, 40) : bound(blocks >> 3, 200, 300);
        vm.roll(currentBlock);
    }

    /// A registered member heartbeats. A member that was stale may have been refreshed to
    /// weight 0 meanwhile: its weight lags until its next refresh.
    function heartbeat(uint256 seed) external step {
        seed = _oneIn4(seed);
        address who = _pickActor(seed, _registeredMember);
        if (registry.lastSeenBlock(who) + pool.livenessWindow() < block.number) mayLag[who] = true;
        vm.prank(who);
        registry.heartbeat();
    }

    /// A registered member declares network figures (a heartbeat too): 0.5-4 MiB/s fetch,
    /// 20-420 ms round-trip, measured this block or up to 255 blocks back. Jobs with network
    /// terms (one in four, TaskActions._jobParams) draw only members whose figures meet them.
    function declareNetwork(uint256 seed, uint256 figures) external step {
        seed = _oneIn4(seed);
        address who = _pickActor(seed, _registeredMember);
        if (registry.lastSeenBlock(who) + pool.livenessWindow() < block.number) mayLag[who] = true; // as heartbeat
        uint256 back = (figures >> 64) % 256;
        uint64 at = uint64(block.number > back ? block.number - back : block.number);
        vm.prank(who);
        registry.declareNetwork(
            IIdentityRegistry.NetworkFigures(uint32(512 + figures % 3_584), uint32(20 + (figures >> 32) % 400), at)
        );
    }

    /// Anyone refreshes an actor's pool weights: afterwards they are exactly the model's.
    function refresh(uint256 seed) external step {
        seed = _oneIn4(seed);
        address who = _actors[seed % ACTORS];
        vm.prank(KEEPER);
        pool.refresh(who);
        _refreshed(who, "refresh");
    }

    // ================================================================ staking

    function stake(uint256 seed, uint256 amount) external step {
        seed = _oneIn4(seed);
        address who = _staker(seed);
        _stake(who, bound(amount, 1 ether, 500 ether));
        _refreshed(who, "stake");
    }

    function requestUnstake(uint256 seed, uint256 amount) external step {
        seed = _oneIn4(seed);
        address who = _pickActor(seed, _withFreeStake);
        amount = bound(amount, 1, stakeManager.freeStake(who));
        vm.prank(who);
        stakeManager.requestUnstake(amount);
        _refreshed(who, "requestUnstake");
    }

    function withdrawUnstaked(uint256 seed) external step {
        address who = _pickActor(seed, _unbonded);
        vm.prank(who);
        stakeManager.withdrawUnstaked();
    }

    /// Withdraw StakeManager credits (slash and penalty proceeds).
    function withdrawStakeCredits(uint256 seed) external step {
        address who = _pickActor(seed, _withStakeCredits);
        vm.prank(who);
        stakeManager.withdraw();
    }

    /// Withdraw JobMarket credits (rewards, audit fees, refunds).
    function withdrawMarketCredits(uint256 seed) external step {
        address who = _pickActor(seed, _withMarketCredits);
        vm.prank(who);
        market.withdraw();
    }

    /// Send tokens straight to the StakeManager, the market or the game (owed to nobody).
    function donate(uint256 seed, uint256 amount, uint256 target) external step {
        seed = _oneIn4(seed);
        address who = _actors[seed % ACTORS];
        address to = target % 3 == 0 ? address(stakeManager) : target % 3 == 1 ? address(market) : address(game);
        amount = bound(amount, 1, 100 ether);
        _fund(who, amount);
        vm.prank(who);
        _check(token.transfer(to, amount), "donate: transfer returned false");
        ghostDonated[to] += amount;
    }

    // ================================================================ identities and the pool

    /// A late joiner (W3, V2) registers and joins the pool.
    function register(uint256 seed) external step {
        uint256 i = seed % 2 == 0 ? 5 : 8;
        if (registry.isRegistered(_actors[i])) i = i == 5 ? 8 : 5;
        if (registry.isRegistered(_actors[i])) _skip();
        _register(i);
        _refreshed(_actors[i], "register");
    }

    /// W1 drops or takes back its verifier role, V1 takes or drops a worker role (both have a
    /// valid worker capability). The pool keeps the roles it cached until the member's next
    /// join or refresh; draws read the registry's.
    function setRoles(uint256 seed) external step {
        seed = _oneIn4(seed);
        (uint256 i, uint8 other) = seed % 2 == 0 ? (uint256(3), ROLE_VERIFIER) : (uint256(7), ROLE_WORKER);
        address who = _actors[i];
        if (!registry.isRegistered(who)) _skip();
        if (registry.lastSeenBlock(who) + pool.livenessWindow() < block.number) mayLag[who] = true; // as heartbeat
        uint8 roles = registry.identityOf(who).roles ^ other;
        vm.prank(who);
        registry.setRoles(roles);
    }

    /// A registered worker or verifier leaves the pool, or joins it again.
    function togglePool(uint256 seed) external step {
        seed = _oneIn4(seed);
        address who = _pickActor(seed, _registeredMember);
        bool joined = pool.memberOf(who).joined;
        vm.prank(who);
        if (joined) pool.leavePool();
        else pool.joinPool();
        _refreshed(who, "togglePool");
    }

    // ================================================================ internals

    /// Go on (with the seed's other bits) one call in four, else discard: the actions that
    /// always have something to do would otherwise eat a third of every run's depth.
    function _oneIn4(uint256 seed) internal pure returns (uint256) {
        if (seed % 4 != 0) _skip();
        return seed >> 2;
    }

    function _lateJoiner(uint256 i) internal pure returns (bool) {
        return i == 5 || i == 8;
    }

    /// `who` was just fully refreshed by the pool: its weights are the model's, and stay so
    /// until an event moves its stake or reputation.
    function _refreshed(address who, string memory action) internal {
        _scanLogs();
        vm.recordLogs();
        // Weights are held while a draw is pending (WorkerPool.holdDraws, holdOffers): a change
        // then waits for a refresh after the hold (VerifierWeightDeferred and
        // WorkerWeightDeferred mark it lagging).
        if (pool.workersHeld() || pool.verifiersHeld()) return;
        _check(pool.weightOf(who, false) == modelWeight(who, false), string.concat(action, ": worker weight != model"));
        _check(pool.weightOf(who, true) == modelWeight(who, true), string.concat(action, ": verifier weight != model"));
        mayLag[who] = false;
    }

    function _pickActor(uint256 seed, function(address) internal view returns (bool) ok)
        internal
        view
        returns (address)
    {
        for (uint256 k = 0; k < ACTORS; ++k) {
            address who = _actors[(seed % ACTORS + k) % ACTORS];
            if (ok(who)) return who;
        }
        _skip();
        return address(0);
    }

    function _registeredMember(address who) internal view returns (bool) {
        return _isMember(_slot[who] - 1) && registry.isRegistered(who);
    }

    function _withFreeStake(address who) internal view returns (bool) {
        return stakeManager.freeStake(who) != 0;
    }

    function _unbonded(address who) internal view returns (bool) {
        IStakeManager.StakeInfo memory info = stakeManager.stakeOf(who);
        return info.unbonding != 0 && block.number >= info.unbondingReadyAtBlock;
    }

    function _withStakeCredits(address who) internal view returns (bool) {
        return stakeManager.credits(who) != 0;
    }

    function _withMarketCredits(address who) internal view returns (bool) {
        return market.credits(who) != 0;
    }
}
