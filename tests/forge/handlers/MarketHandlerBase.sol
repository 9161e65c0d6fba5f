// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {TestBase} from "../utils/Test.sol";
import {Vm} from "../utils/Vm.sol";
import {Traces} from "../utils/Traces.sol";
import {TrainToken} from "contracts/TrainToken.sol";
import {IdentityRegistry} from "contracts/IdentityRegistry.sol";
import {StakeManager} from "contracts/StakeManager.sol";
import {WorkerPool} from "contracts/WorkerPool.sol";
import {JobMarket} from "contracts/JobMarket.sol";
import {DisputeGame} from "contracts/DisputeGame.sol";
import {IJobMarket} from "contracts/interfaces/IJobMarket.sol";
import {IDisputeGame} from "contracts/interfaces/IDisputeGame.sol";
import {IWorkerPool} from "contracts/interfaces/IWorkerPool.sol";
import {IStakeManager} from "contracts/interfaces/IStakeManager.sol";
import {
    IIdentityRegistry,
    ROLE_WORKER,
    ROLE_VERIFIER,
    ROLE_SUBMITTER
} from "contracts/interfaces/IIdentityRegistry.sol";

/// @title MarketHandlerBase: the market suite's actors, clock, ghost accounting and helpers
/// @notice State shared by the market handler's action contracts (TaskActions, GameActions,
/// MarketHandler: one deployed contract, split by inheritance). Twelve actors, each with a
/// fixed behaviour: two submitters; workers W0 (honest), W1 (honest, also a verifier), W2
/// (commits a wrong root and fights for it), W3 (commits a wrong root, goes silent when
/// audited and never moves in a game; unregistered until `register`); verifiers V0, V1 (honest;
/// V0 also challenges wrong results), V2 (honest, unregistered until `register`), V3 (colluding:
/// audits by copying the worker's root, votes against the truth); challengers C0 (honest, no
/// identity) and C1 (challenges with a made-up trace). Every action picks, from its fuzz
/// seeds, an object (job, task, game, actor) in the state the call needs, and makes only calls
/// its model of the protocol says must succeed; when there is nothing to do the call is
/// discarded (`vm.assume(false)`: forge's Discards column, not counted in the depth). The
/// suite runs with fail-on-revert, so the metrics table reads calls / reverts (0, or the
/// suite fails) / discards, and calls - discards did real work.
///
/// Ghosts: tokens minted (the handler owns the devnet token) and sent straight to contracts;
/// every TaskFinalized / TaskClosed per task and DisputeSettled / DisputeVoided per game, read
/// from the logs of every action; `mayLag[a]`: an event since `a`'s last full pool refresh
/// may have moved its free stake or reputation without the pool hearing of it (see the
/// suite's draw-weight invariant).
abstract contract MarketHandlerBase is TestBase {
    using Traces for Traces.Trace;

    enum Kind {
        Submitter,
        HonestWorker,
        LyingWorker,
        QuittingWorker,
        HonestVerifier,
        ColludingVerifier,
        HonestChallenger,
        LyingChallenger
    }

    uint256 public constant ACTORS = 12;
    /// Who sends the permissionless calls (draws, settles, timeouts, finalizations).
    address public constant KEEPER = address(0xBEEF);
    uint256 public constant INITIAL_STAKE = 1_000 ether;
    uint16 internal constant BPS = 10_000;
    string internal constant CID = "bafyresult";

    TrainToken public immutable token;
    IdentityRegistry public immutable registry;
    StakeManager public immutable stakeManager;
    WorkerPool public immutable pool;
    JobMarket public immutable market;
    DisputeGame public immutable game;

    address[ACTORS] internal _actors;
    Kind[ACTORS] internal _kinds;
    uint8[ACTORS] internal _roles;
    mapping(address account => uint256 slot) internal _slot; // index + 1

    /// The block the suite's chain is at; every action rolls to it first.
    uint256 public currentBlock;

    uint256 public ghostMinted;
    mapping(address holder => uint256 amount) public ghostDonated;
    uint256[] internal _tasks;
    mapping(uint256 taskId => bool) internal _known;
    mapping(uint256 taskId => uint256 count) public finalizedCount;
    mapping(uint256 taskId => uint256 count) public closedCount;
    mapping(uint256 gameId => uint256 count) public settledCount;
    mapping(uint256 gameId => uint256 count) public voidedCount;
    mapping(address account => bool) public mayLag;
    /// Logs seen per event signature (topic 0), for the suite's coverage report.
    mapping(bytes32 topic0 => uint256 count) public eventCount;

    /// The worker's committed root and salt of a task's current commitment; the auditor's root.
    mapping(uint256 taskId => bytes32) internal _workerRoot;
    mapping(uint256 taskId => bytes32) internal _workerSalt;
    mapping(uint256 taskId => bytes32) internal _auditRoot;
    /// Every root a party committed to, with the trace behind it.
    mapping(bytes32 root => Traces.Trace) internal _traceOf;

    /// A job's fixed parameters, kept at creation (reading `jobOf` for them costs a lot).
    struct JobInfo {
        uint32 shards;
        uint16 leaves;
        uint16 auditRateBps;
        uint32 revealWindow;
        uint96 collateral;
    }

    mapping(uint256 jobId => JobInfo) internal _jobInfo;

    /// First broken per-call check ("" while all held).
    string public violation;

    constructor(
        TrainToken token_,
        IdentityRegistry registry_,
        StakeManager stakeManager_,
        WorkerPool pool_,
        JobMarket market_,
        DisputeGame game_
    ) {
        (token, registry, stakeManager, pool, market, game) = (token_, registry_, stakeManager_, pool_, market_, game_);
        currentBlock = block.number;
        Kind[ACTORS] memory kinds = [
            Kind.Submitter,
            Kind.Submitter,
            Kind.HonestWorker,
            Kind.HonestWorker,
            Kind.LyingWorker,
            Kind.QuittingWorker,
            Kind.HonestVerifier,
            Kind.HonestVerifier,
            Kind.HonestVerifier,
            Kind.ColludingVerifier,
            Kind.HonestChallenger,
            Kind.LyingChallenger
        ];
        uint8[ACTORS] memory roles = [
            ROLE_SUBMITTER,
            ROLE_SUBMITTER,
            ROLE_WORKER,
            ROLE_WORKER | ROLE_VERIFIER,
            ROLE_WORKER,
            ROLE_WORKER,
            ROLE_VERIFIER,
            ROLE_VERIFIER,
            ROLE_VERIFIER,
            ROLE_VERIFIER,
            0,
            ROLE_SUBMITTER
        ];
        for (uint256 i = 0; i < ACTORS; ++i) {
            _actors[i] = address(uint160(0xA0000 + i));
            _kinds[i] = kinds[i];
            _roles[i] = roles[i];
            _slot[_actors[i]] = i + 1;
        }
    }

    modifier step() {
        vm.roll(currentBlock);
        vm.recordLogs();
        _;
        _scanLogs();
    }

    // ================================================================ views for the suite

    function actor(uint256 i) external view returns (address) {
        return _actors[i];
    }

    function kindOf(address account) public view returns (Kind) {
        return _kinds[_slot[account] - 1];
    }

    function slotOf(address account) external view returns (uint256) {
        return _slot[account];
    }

    /// Every task id the suite has seen drawn, in order.
    function allTasks() external view returns (uint256[] memory) {
        return _tasks;
    }

    /// The weight WorkerPool._refresh gives `account` in the worker (or verifier) tree now:
    /// free stake × reputation (clamped to 2^100) while it is joined, holds the tree's role
    /// (as the pool cached it), is live and under its concurrency limit; else 0.
    function modelWeight(address account, bool verifier) public view returns (uint256 w) {
        IWorkerPool.Member memory m = pool.memberOf(account);
        if (!m.joined || m.roles & (verifier ? ROLE_VERIFIER : ROLE_WORKER) == 0) return 0;
        (, uint64 lastSeen, uint32 reputation, IIdentityRegistry.Capability memory cap) = registry.poolViewOf(account);
        if (lastSeen + pool.livenessWindow() < block.number) return 0;
        if (m.active >= (cap.maxConcurrent == 0 ? 1 : cap.maxConcurrent)) return 0;
        w = stakeManager.freeStake(account) * reputation;
        if (w > pool.MAX_MEMBER_WEIGHT()) w = pool.MAX_MEMBER_WEIGHT();
    }

    // ================================================================ internals: actors and money

    /// Whether `who` commits wrong results when it works (W2, W3; and V3 or C1, were they
    /// ever drawn as workers).
    function _liar(address who) internal view returns (bool) {
        Kind k = kindOf(who);
        return
            k == Kind.LyingWorker || k == Kind.QuittingWorker || k == Kind.ColludingVerifier
                || k == Kind.LyingChallenger;
    }

    function _isMember(uint256 i) internal view returns (bool) {
        return _roles[i] & (ROLE_WORKER | ROLE_VERIFIER) != 0;
    }

    /// A staker (worker, verifier or challenger) from a seed.
    function _staker(uint256 seed) internal view returns (address) {
        return _actors[2 + seed % (ACTORS - 2)];
    }

    function _mint(address to, uint256 amount) internal {
        token.mint(to, amount);
        ghostMinted += amount;
    }

    /// Give `who` at least `amount` tokens (mints the shortfall).
    function _fund(address who, uint256 amount) internal {
        uint256 balance = token.balanceOf(who);
        if (balance < amount) _mint(who, amount - balance);
    }

    function _stake(address who, uint256 amount) internal {
        _fund(who, amount);
        vm.startPrank(who);
        token.approve(address(stakeManager), amount);
        stakeManager.stake(amount);
        vm.stopPrank();
    }

    function _register(uint256 i) internal {
        address who = _actors[i];
        // workers: GPU class 1, 24 GiB, regions 3 and 5 (jobs may prefer 3), 2 tasks at once
        IIdentityRegistry.Capability memory cap = IIdentityRegistry.Capability(1, 24_576, 1_000, i % 2 == 0 ? 3 : 5, 2);
        vm.prank(who);
        registry.register(_roles[i], "bafyprofile", keccak256(abi.encode(who)), cap);
        if (_isMember(i)) {
            vm.prank(who);
            pool.joinPool();
        }
    }

    /// Skip this call: nothing to do (forge counts it under Discards, not in the depth).
    function _skip() internal pure {
        vm.assume(false);
    }

    /// Revert with `reason` (a caught revert, passed on unchanged).
    function _bubble(bytes memory reason) internal pure {
        assembly ("memory-safe") {
            revert(add(reason, 32), mload(reason))
        }
    }

    /// Add one to a coverage counter that outlives the run's revert (an environment variable
    /// of this forge process; the suite logs it after each run).
    function _countEnv(string memory name) internal {
        string memory key = string.concat("TRUETRAIN_FORGE_COVERAGE_", name);
        vm.setEnv(key, vm.toString(vm.envOr(key, uint256(0)) + 1));
    }

    function _check(bool ok, string memory what) internal {
        if (!ok && bytes(violation).length == 0) violation = what;
    }

    // ================================================================ internals: traces

    function _leavesOf(uint256 id) internal view returns (uint16) {
        return _jobInfo[id >> 64].leaves;
    }

    function _isAggregation(uint256 id) internal view returns (bool) {
        return uint32(id) == _jobInfo[id >> 64].shards;
    }

    /// The root of task `id`'s true trace (remembered).
    function _truth(uint256 id) internal returns (bytes32) {
        uint16 leaves = _leavesOf(id);
        return _remember(Traces.Trace(id, leaves, leaves, 0));
    }

    /// The root of a lie about task `id` by actor `who` (an aggregation task's lie is wrong
    /// from its first leaf: the referees judge its one hash).
    function _lie(uint256 id, address who, uint256 seed) internal returns (bytes32) {
        uint16 leaves = _leavesOf(id);
        uint16 at = _isAggregation(id) ? 0 : uint16(seed % leaves);
        return _remember(Traces.Trace(id, leaves, at, uint8(_slot[who])));
    }

    function _remember(Traces.Trace memory t) internal returns (bytes32 r) {
        r = t.root();
        _traceOf[r] = t;
    }

    /// Whether `root` is task `id`'s true result.
    function _isTrue(bytes32 root) internal view returns (bool) {
        Traces.Trace memory t = _traceOf[root];
        return t.leaves != 0 && t.divergeAt == t.leaves;
    }

    // ================================================================ internals: picking

    function _pickTask(uint256 seed, function(uint256, IJobMarket.Task memory) internal view returns (bool) ok)
        internal
        view
        returns (uint256 id, IJobMarket.Task memory t)
    {
        uint256 n = _tasks.length;
        for (uint256 k = 0; k < n; ++k) {
            id = _tasks[(seed % n + k) % n];
            t = market.taskOf(id);
            if (ok(id, t)) return (id, t);
        }
        _skip();
    }

    function _pickJob(uint256 seed, function(uint256, IJobMarket.Job memory) internal view returns (bool) ok)
        internal
        view
        returns (uint256 jobId, IJobMarket.Job memory j)
    {
        uint256 n = market.jobCount();
        for (uint256 k = 0; k < n; ++k) {
            jobId = 1 + (seed % n + k) % n;
            j = market.jobOf(jobId);
            if (ok(jobId, j)) return (jobId, j);
        }
        _skip();
    }

    function _pickGame(uint256 seed, function(uint256, IDisputeGame.Game memory) internal view returns (bool) ok)
        internal
        view
        returns (uint256 gameId, IDisputeGame.Game memory g)
    {
        uint256 n = game.gameCount();
        for (uint256 k = 0; k < n; ++k) {
            gameId = 1 + (seed % n + k) % n;
            g = game.gameOf(gameId);
            if (ok(gameId, g)) return (gameId, g);
        }
        _skip();
    }

    /// Whether the task's latest game is still being played.
    function _gameLive(uint256 id) internal view returns (bool) {
        uint256 gameId = game.gameOfTask(id);
        if (gameId == 0) return false;
        IDisputeGame.GameStatus s = game.gameOf(gameId).status;
        return s != IDisputeGame.GameStatus.Resolved && s != IDisputeGame.GameStatus.Voided;
    }

    // ================================================================ internals: logs

    /// Count payouts per task and game, learn new task ids, and mark every account whose
    /// locked stake, stake or reputation moved (its pool weight may lag until refreshed).
    function _scanLogs() internal {
        Vm.Log[] memory logs = vm.getRecordedLogs();
        for (uint256 i = 0; i < logs.length; ++i) {
            Vm.Log memory l = logs[i];
            bytes32 t0 = l.topics.length == 0 ? bytes32(0) : l.topics[0];
            eventCount[t0] += 1;
            if (l.topics.length < 2) continue; // every event counted below has an indexed id
            if (l.emitter == address(market)) {
                uint256 id = uint256(l.topics[1]);
                if (t0 == IJobMarket.TaskFinalized.selector) {
                    finalizedCount[id] += 1;
                } else if (t0 == IJobMarket.TaskClosed.selector) {
                    closedCount[id] += 1;
                } else if (t0 == IJobMarket.TaskDrawn.selector && !_known[id]) {
                    _known[id] = true;
                    _tasks.push(id);
                }
            } else if (l.emitter == address(game)) {
                if (t0 == IDisputeGame.DisputeSettled.selector) settledCount[uint256(l.topics[1])] += 1;
                else if (t0 == IDisputeGame.DisputeVoided.selector) voidedCount[uint256(l.topics[1])] += 1;
            } else if (
                (l.emitter == address(stakeManager)
                        && (t0 == IStakeManager.CollateralLocked.selector
                            || t0 == IStakeManager.CollateralUnlocked.selector
                            || t0 == IStakeManager.StakeDeducted.selector))
                    || (l.emitter == address(registry) && t0 == IIdentityRegistry.ReputationChanged.selector)
                    || (l.emitter == address(pool)
                        && (t0 == IWorkerPool.MemberAssigned.selector || t0 == IWorkerPool.VerifierWeightDeferred.selector
                            || t0 == IWorkerPool.WorkerWeightDeferred.selector))
            ) {
                mayLag[address(uint160(uint256(l.topics[1])))] = true;
            }
        }
    }
}
