// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {IJobMarket} from "./interfaces/IJobMarket.sol";
import {IWorkerPool} from "./interfaces/IWorkerPool.sol";
import {IIdentityRegistry} from "./interfaces/IIdentityRegistry.sol";
import {IStakeManager} from "./interfaces/IStakeManager.sol";
import {TaskIds} from "./libraries/TaskIds.sol";
import {Escrow} from "./libraries/Escrow.sol";
import {FutureRandomness} from "./libraries/FutureRandomness.sol";
import {MarketStore, MarketDeps, JobRecord, TaskFlow} from "./libraries/TaskFlow.sol";
import {TaskRecovery} from "./libraries/TaskRecovery.sol";
import {JobBook} from "./libraries/JobBook.sol";

/// @title JobMarket
/// @notice Jobs, tasks, commit–reveal, audits, settlement and pull payments. Scheduling
/// lives in WorkerPool; stakes in StakeManager; history in IdentityRegistry. The shared task
/// moves are in TaskFlow; timeouts, closes, job stops and dispute outcomes in the external
/// library TaskRecovery; job creation, the job view and the batch calls (`drawTasks`,
/// `finalizeMany`) in the external library JobBook (both linked at deployment).
/// @dev ReentrancyGuardTransient (EIP-1153, cancun): same guard and error as ReentrancyGuard, ~5k gas cheaper per call.
contract JobMarket is ReentrancyGuardTransient, IJobMarket {
    using SafeERC20 for IERC20;

    /// @inheritdoc IJobMarket
    uint256 public constant MAX_BATCH = JobBook.MAX_BATCH;
    uint8 private constant FLAG_AUDIT_COMMITTED = TaskFlow.FLAG_AUDIT_COMMITTED;
    uint8 private constant FLAG_AUDIT_REVEALED = TaskFlow.FLAG_AUDIT_REVEALED;
    uint8 private constant FLAG_CHALLENGED = TaskFlow.FLAG_CHALLENGED;
    uint8 private constant FLAG_AUDIT_SETTLED = TaskFlow.FLAG_AUDIT_SETTLED;
    uint8 private constant FLAG_AUDIT_DUE = TaskFlow.FLAG_AUDIT_DUE;
    uint8 private constant FLAG_AUDITOR = TaskFlow.FLAG_AUDITOR;
    /// @inheritdoc IJobMarket
    uint32 public constant MIN_WINDOW_BLOCKS = JobBook.MIN_WINDOW_BLOCKS;
    /// @inheritdoc IJobMarket
    uint32 public constant MAX_REVEAL_WINDOW_BLOCKS = JobBook.MAX_REVEAL_WINDOW_BLOCKS;
    /// @inheritdoc IJobMarket
    uint256 public constant MAX_CID_BYTES = JobBook.MAX_CID_BYTES;
    /// @inheritdoc IJobMarket
    uint8 public constant MAX_STAGES = JobBook.MAX_STAGES;
    /// @inheritdoc IJobMarket
    uint16 public constant MIN_ACCEPT_PENALTY_BPS = 100;
    /// @inheritdoc IJobMarket
    uint96 public constant MIN_COLLATERAL = JobBook.MIN_COLLATERAL;
    /// @inheritdoc IJobMarket
    uint256 public constant MAX_COLLATERAL_PER_REWARD = JobBook.MAX_COLLATERAL_PER_REWARD;

    IERC20 public immutable token;
    IIdentityRegistry public immutable registry;
    IStakeManager public immutable stakeManager;
    IWorkerPool public immutable pool;
    uint16 public immutable timeoutPenaltyBps;
    uint16 public immutable acceptPenaltyBps;
    uint96 public immutable auditorCollateral;
    uint96 public immutable auditorPenalty;
    /// @dev The deployer: it may wire dispute games until it seals the wiring, then nothing.
    address private immutable _wirer;

    /// @inheritdoc IJobMarket
    bool public wiringSealed;
    /// @inheritdoc IJobMarket
    mapping(address game => bool) public isDisputeGame;

    MarketStore private _s;

    /// @param token_ the payment token (TrainToken)
    /// @param registry_ IdentityRegistry (grant this market RECORDER_ROLE)
    /// @param stakeManager_ StakeManager (grant this market MARKET_ROLE)
    /// @param pool_ WorkerPool (grant this market its MARKET_ROLE)
    /// @param config penalties and auditor collateral
    constructor(
        IERC20 token_,
        IIdentityRegistry registry_,
        IStakeManager stakeManager_,
        IWorkerPool pool_,
        MarketConfig memory config
    ) {
        if (
            config.timeoutPenaltyBps > Escrow.BPS || config.acceptPenaltyBps > Escrow.BPS
                || config.auditorPenalty > config.auditorCollateral || config.auditorCollateral < MIN_COLLATERAL
        ) revert MarketInvalidConfig();
        // INVARIANT: declining or ignoring an offer is never free (no cherry-picking or
        // stalling a job by draws left unanswered), nor is an auditor's missed commit.
        if (config.acceptPenaltyBps < MIN_ACCEPT_PENALTY_BPS || config.timeoutPenaltyBps < config.acceptPenaltyBps) {
            revert MarketPenaltyTooLow(config.acceptPenaltyBps, config.timeoutPenaltyBps, MIN_ACCEPT_PENALTY_BPS);
        }
        if (config.auditorPenalty == 0) revert MarketPenaltyTooLow(0, 0, 1);
        token = token_;
        registry = registry_;
        stakeManager = stakeManager_;
        pool = pool_;
        timeoutPenaltyBps = config.timeoutPenaltyBps;
        acceptPenaltyBps = config.acceptPenaltyBps;
        auditorCollateral = config.auditorCollateral;
        auditorPenalty = config.auditorPenalty;
        _wirer = msg.sender;
    }

    // ================================================================ wiring

    /// @inheritdoc IJobMarket
    function wireDisputeGame(address game) external {
        _requireWirer();
        isDisputeGame[game] = true;
        emit DisputeGameWired(game);
    }

    /// @inheritdoc IJobMarket
    function sealWiring() external {
        _requireWirer();
        wiringSealed = true;
        emit WiringSealed();
    }

    // ================================================================ submitter

    /// @inheritdoc IJobMarket
    function createJob(JobParams calldata params) external nonReentrant returns (uint256) {
        return _createJob(params);
    }

    /// @inheritdoc IJobMarket
    function createJobWithPermit(JobParams calldata params, uint256 deadline, uint8 v, bytes32 r, bytes32 s)
        external
        nonReentrant
        returns (uint256)
    {
        uint256 escrow = Escrow.jobEscrow(params.shards, params.rounds, params.rewardPerTask, params.auditFee);
        // A permit seen in the mempool may be used by someone else first; the allowance it
        // set then still lets transferFrom go through.
        try IERC20Permit(address(token)).permit(msg.sender, address(this), escrow, deadline, v, r, s) {} catch {}
        return _createJob(params);
    }

    /// @inheritdoc IJobMarket
    function cancelJob(uint256 jobId) external nonReentrant {
        TaskRecovery.stop(_s, jobId, false);
    }

    /// @inheritdoc IJobMarket
    function expireJob(uint256 jobId) external nonReentrant {
        TaskRecovery.stop(_s, jobId, true);
    }

    // ================================================================ scheduling

    /// @inheritdoc IJobMarket
    function drawTask(uint256 jobId) external returns (uint256 id) {
        return JobBook.drawOne(_s, _deps(), jobId);
    }

    /// @inheritdoc IJobMarket
    function drawTasks(uint256 jobId, uint256 count) external returns (uint256 drawn) {
        return JobBook.drawMany(_s, _deps(), jobId, count);
    }

    /// @inheritdoc IJobMarket
    function offerTicketOf(uint256 jobId) external view returns (uint64) {
        return _s.jobs[jobId].offerTicket;
    }

    // ================================================================ worker and auditor

    /// @inheritdoc IJobMarket
    function acceptTask(uint256 id) external {
        Task storage t = _s.tasks[id];
        if (t.status != TaskStatus.Offered) revert TaskNotOffered(id);
        if (msg.sender != t.worker) revert TaskNotWorker(id, msg.sender);
        _beforeDeadline(t, id);
        JobRecord storage j = _s.jobs[TaskIds.jobOf(id)];
        // A cancelled or expired job's offered tasks are closed, not started.
        if (j.status != JobStatus.Active) revert JobNotActive(TaskIds.jobOf(id), j.status);
        uint64 deadline = uint64(block.number) + j.computeWindow;
        t.status = TaskStatus.Running;
        t.deadline = deadline;
        // No pool refresh here: the draw that offered this task refreshed the weight in
        // this task's life already, and nothing the weight depends on moved since.
        emit TaskAccepted(id, msg.sender, deadline);
        if (TaskFlow.isStage(j, id)) JobBook.alignStages(_s, id, j.stages, deadline);
    }

    /// @inheritdoc IJobMarket
    function declineTask(uint256 id) external nonReentrant {
        TaskRecovery.decline(_s, _deps(), id);
    }

    /// @inheritdoc IJobMarket
    function commitResult(uint256 id, bytes32 commitment) external {
        Task storage t = _s.tasks[id];
        if (t.status != TaskStatus.Running) revert TaskNotRunning(id);
        if (msg.sender != t.worker) revert TaskNotWorker(id, msg.sender);
        _beforeDeadline(t, id);
        JobRecord storage j = _s.jobs[TaskIds.jobOf(id)];
        // The audit draw is settled from the hash of a block after this one (the ticket):
        // the worker cannot know, inside this call or before it, whether it will be audited.
        // Its reveal deadline counts from the ticket.
        uint64 deadline = uint64(block.number) + j.revealWindow;
        if (j.auditRateBps != 0) {
            uint64 ticket = FutureRandomness.ticket();
            deadline = ticket + j.revealWindow;
            emit AuditRequested(id, ticket);
            pool.holdDraws(ticket);
        }
        t.result = commitment;
        t.status = TaskStatus.Committed;
        t.deadline = deadline;
        emit ResultCommitted(id, msg.sender, commitment, deadline);
    }

    /// @inheritdoc IJobMarket
    function settleAudit(uint256 id) external {
        Task storage t = _s.tasks[id];
        JobRecord storage j = _s.jobs[TaskIds.jobOf(id)];
        if (!_auditUnsettled(t, j)) revert TaskAuditNotDue(id);
        _beforeDeadline(t, id);
        uint64 ticket = t.deadline - j.revealWindow;
        if (FutureRandomness.lapsed(ticket)) {
            // Nobody settled the draw in its epoch: it counts as drawn (the worker, who could
            // have settled it, gains nothing by waiting), and its auditor comes from a new ticket.
            ticket = FutureRandomness.ticket();
            t.flags |= FLAG_AUDIT_DUE;
            t.deadline = ticket + j.revealWindow;
            emit AuditRequested(id, ticket);
            pool.holdDraws(ticket);
            return;
        }
        (bool audited, bytes32 random) = _auditDraw(t, j, id);
        t.flags |= FLAG_AUDIT_SETTLED;
        if (!audited) {
            emit AuditSettled(id, false);
            return;
        }
        address auditor = pool.assign(
            keccak256(abi.encode(random, "auditor")),
            IWorkerPool.Requirements(j.deviceClass, j.memoryMiB, 0, auditorCollateral, t.worker, 0, 0),
            true
        );
        if (auditor == address(0)) {
            // No eligible verifier: the result goes on unaudited (challengeable), same reveal deadline.
            emit AuditWaived(id, t.deadline);
            return;
        }
        uint64 deadline = uint64(block.number) + j.computeWindow;
        t.auditor = auditor;
        t.flags |= FLAG_AUDIT_DUE | FLAG_AUDITOR;
        t.deadline = deadline;
        emit AuditorDrawn(id, auditor, deadline);
    }

    /// @inheritdoc IJobMarket
    function commitAudit(uint256 id, bytes32 commitment) external {
        Task storage t = _s.tasks[id];
        if (t.status != TaskStatus.Committed || t.flags & (FLAG_AUDITOR | FLAG_AUDIT_COMMITTED) != FLAG_AUDITOR) {
            revert TaskNotAwaitingAudit(id);
        }
        if (msg.sender != t.auditor) revert TaskNotAuditor(id, msg.sender);
        _beforeDeadline(t, id);
        uint64 deadline = uint64(block.number) + _s.jobs[TaskIds.jobOf(id)].revealWindow;
        t.audit = commitment;
        t.flags |= FLAG_AUDIT_COMMITTED;
        t.deadline = deadline;
        emit AuditCommitted(id, msg.sender, commitment, deadline);
    }

    /// @inheritdoc IJobMarket
    function revealResult(uint256 id, bytes32 root, string calldata resultCid, bytes32 salt) external {
        Task storage t = _s.tasks[id];
        if (t.status != TaskStatus.Committed) revert TaskNotCommitted(id);
        if (msg.sender != t.worker) revert TaskNotWorker(id, msg.sender);
        // INVARIANT: the worker's root stays secret until the auditor has committed to its own.
        uint8 flags = t.flags;
        if (flags & (FLAG_AUDITOR | FLAG_AUDIT_COMMITTED) == FLAG_AUDITOR) revert TaskAuditNotCommitted(id);
        _beforeDeadline(t, id);
        if (bytes(resultCid).length > MAX_CID_BYTES) revert MarketCidTooLong(bytes(resultCid).length, MAX_CID_BYTES);
        if (keccak256(abi.encode(id, root, resultCid, salt, msg.sender)) != t.result) revert TaskCommitmentMismatch(id);
        (uint256 jobId,, uint32 index) = TaskIds.decode(id);
        JobRecord storage j = _s.jobs[jobId];
        if (_auditUnsettled(t, j)) {
            // The draw is settled here when it drew no audit; a drawn audit needs its
            // auditor first (`settleAudit`), so the root stays secret.
            (bool audited,) = _auditDraw(t, j, id);
            if (audited) revert TaskAuditPending(id);
        }
        t.result = root;
        t.status = TaskStatus.Revealed;
        if (index == j.shards) _s.revealedCheckpointCid[jobId] = resultCid;
        emit ResultRevealed(id, msg.sender, root, resultCid);
        // Its compute is over: its pool slot is free for new work, its collateral stays
        // locked while the result stands for its window (IWorkerPool.unlock ends it).
        pool.freeSlot(msg.sender);
        if (flags & FLAG_AUDITOR == 0) TaskFlow.openWindow(t, id, j.challengeWindow);
        else if (flags & FLAG_AUDIT_REVEALED != 0) _compare(t, id, j);
        // The aggregation task is drawn on revealed results, while their windows run.
        if (index != j.shards) TaskFlow.shardRevealed(_deps(), j, jobId);
    }

    /// @inheritdoc IJobMarket
    function revealAudit(uint256 id, bytes32 root, bytes32 salt) external {
        Task storage t = _s.tasks[id];
        TaskStatus s = t.status;
        if (
            (s != TaskStatus.Committed && s != TaskStatus.Revealed) || t.flags & FLAG_AUDIT_COMMITTED == 0
                || t.flags & FLAG_AUDIT_REVEALED != 0
        ) revert TaskAuditNotRevealable(id);
        if (msg.sender != t.auditor) revert TaskNotAuditor(id, msg.sender);
        _beforeDeadline(t, id);
        if (keccak256(abi.encode(id, root, salt, msg.sender)) != t.audit) revert TaskCommitmentMismatch(id);
        t.audit = root;
        t.flags |= FLAG_AUDIT_REVEALED;
        emit AuditRevealed(id, msg.sender, root);
        if (s == TaskStatus.Revealed) _compare(t, id, _s.jobs[TaskIds.jobOf(id)]);
    }

    // ================================================================ settlement

    /// @inheritdoc IJobMarket
    function finalize(uint256 id) external nonReentrant {
        Task storage t = _s.tasks[id];
        if (t.status != TaskStatus.ChallengeWindow) revert TaskNotInChallengeWindow(id);
        if (block.number <= t.deadline) revert TaskChallengeWindowOpen(id, t.deadline);
        JobRecord storage j = _s.jobs[TaskIds.jobOf(id)];
        if (TaskFlow.isStage(j, id)) {
            uint256 waiting = JobBook.stageBlocker(_s, id, j.stages);
            if (waiting != 0) revert TaskStageGroupUnsettled(id, waiting);
        }
        // INVARIANT: an aggregation task is paid only once every shard of its round is.
        if (uint32(id) == j.shards && j.finalizedInRound != j.shards) {
            revert TaskAggregationInputsUnsettled(id, j.finalizedInRound, j.shards);
        }
        _finalize(t, id);
    }

    /// @inheritdoc IJobMarket
    function finalizeMany(uint256[] calldata ids) external nonReentrant returns (uint256 finalized) {
        return JobBook.finalizeMany(_s, _deps(), ids);
    }

    /// @inheritdoc IJobMarket
    function timeoutTask(uint256 id) external nonReentrant {
        TaskRecovery.timeout(_s, _deps(), id);
    }

    /// @inheritdoc IJobMarket
    function reportStalled(uint256 id) external {
        TaskRecovery.reportStalled(_s, id);
    }

    /// @inheritdoc IJobMarket
    function closeTask(uint256 id) external nonReentrant {
        TaskRecovery.close(_s, _deps(), id);
    }

    /// @inheritdoc IJobMarket
    function openChallenge(uint256 id, address challenger) external onlyDisputeGame {
        Task storage t = _s.tasks[id];
        if (t.status != TaskStatus.ChallengeWindow) revert TaskNotInChallengeWindow(id);
        _beforeDeadline(t, id);
        // INVARIANT: a challenged task keeps reward, fees and collateral locked until resolved.
        uint64 left = t.deadline - uint64(block.number);
        t.status = TaskStatus.Disputed;
        t.flags |= FLAG_CHALLENGED;
        t.deadline = left;
        emit TaskChallenged(id, challenger, left);
    }

    /// @inheritdoc IJobMarket
    function resolveDispute(uint256 id, bool workerWon) external onlyDisputeGame nonReentrant {
        TaskRecovery.resolve(_s, _deps(), id, workerWon ? 1 : 2);
    }

    /// @inheritdoc IJobMarket
    function voidDispute(uint256 id) external onlyDisputeGame nonReentrant {
        TaskRecovery.resolve(_s, _deps(), id, 0);
    }

    /// @inheritdoc IJobMarket
    function refundSurplus(uint256 jobId) external nonReentrant returns (uint256 amount) {
        JobRecord storage j = _s.jobs[jobId];
        if (j.status == JobStatus.None) revert JobNotFound(jobId);
        amount = TaskFlow.takeSurplus(_s, j);
        TaskFlow.emitRefund(jobId, j.submitter, amount);
    }

    /// @inheritdoc IJobMarket
    function withdraw() external nonReentrant {
        uint256 amount = _s.credits[msg.sender];
        if (amount == 0) revert MarketNothingToWithdraw(msg.sender);
        _s.credits[msg.sender] = 0;
        _s.totalCredits -= uint128(amount);
        emit Withdrawn(msg.sender, amount);
        token.safeTransfer(msg.sender, amount);
    }

    // ================================================================ views

    /// @inheritdoc IJobMarket
    function jobOf(uint256 jobId) external view returns (Job memory) {
        return JobBook.jobOf(_s, jobId);
    }

    /// @inheritdoc IJobMarket
    function taskOf(uint256 id) external view returns (Task memory) {
        return _s.tasks[id];
    }

    /// @inheritdoc IJobMarket
    function disputeTerms(uint256 id) external view returns (DisputeTerms memory d) {
        Task storage t = _s.tasks[id];
        (uint256 jobId,, uint32 index) = TaskIds.decode(id);
        JobRecord storage j = _s.jobs[jobId];
        d.status = t.status;
        d.challenged = t.flags & FLAG_CHALLENGED != 0;
        d.aggregation = index == j.shards;
        d.leaves = j.checkpointLeaves;
        d.worker = t.worker;
        d.auditor = t.auditor;
        d.root = t.result;
        d.auditRoot = t.audit;
        d.collateral = j.workerCollateral;
        d.auditorCollateral = auditorCollateral;
        d.submitter = j.submitter;
    }

    /// @inheritdoc IJobMarket
    function tasksOf(uint256 jobId, uint256 offset, uint256 limit) external view returns (uint256[] memory ids) {
        JobRecord storage j = _s.jobs[jobId];
        uint256 perRound = uint256(j.shards) + 1;
        uint256 count = Escrow.materialized(j.shards, j.currentRound, j.nextIndex);
        uint256 end = offset + limit < count ? offset + limit : count;
        if (offset >= end) return new uint256[](0);
        ids = new uint256[](end - offset);
        for (uint256 i = offset; i < end; ++i) {
            ids[i - offset] = TaskIds.encode(jobId, uint32(i / perRound), uint32(i % perRound));
        }
    }

    /// @inheritdoc IJobMarket
    function jobsOf(address submitter, uint256 offset, uint256 limit) external view returns (uint256[] memory ids) {
        uint256[] storage all = _s.jobsBySubmitter[submitter];
        uint256 end = offset + limit < all.length ? offset + limit : all.length;
        if (offset >= end) return new uint256[](0);
        ids = new uint256[](end - offset);
        for (uint256 i = offset; i < end; ++i) {
            ids[i - offset] = all[i];
        }
    }

    /// @inheritdoc IJobMarket
    function taskId(uint256 jobId, uint32 round, uint32 index) external pure returns (uint256) {
        return TaskIds.encode(jobId, round, index);
    }

    /// @inheritdoc IJobMarket
    function jobCount() external view returns (uint256) {
        return _s.jobCount;
    }

    /// @inheritdoc IJobMarket
    function totalEscrow() external view returns (uint256) {
        return _s.totalEscrow;
    }

    /// @inheritdoc IJobMarket
    function totalCredits() external view returns (uint256) {
        return _s.totalCredits;
    }

    /// @inheritdoc IJobMarket
    function credits(address account) external view returns (uint256) {
        return _s.credits[account];
    }

    // ================================================================ internals

    modifier onlyDisputeGame() {
        if (!isDisputeGame[msg.sender]) revert MarketNotDisputeGame(msg.sender);
        _;
    }

    function _deps() private view returns (MarketDeps memory) {
        return MarketDeps(pool, stakeManager, registry, timeoutPenaltyBps, acceptPenaltyBps, auditorCollateral, auditorPenalty);
    }

    function _requireWirer() private view {
        // INVARIANT: after sealing, no address can change who settles disputes.
        if (msg.sender != _wirer || wiringSealed) revert MarketWiringClosed(msg.sender);
    }

    function _createJob(JobParams calldata p) private returns (uint256 jobId) {
        uint256 escrow;
        (jobId, escrow) = JobBook.create(_s, _deps(), p);
        uint256 before = token.balanceOf(address(this));
        token.safeTransferFrom(msg.sender, address(this), escrow);
        uint256 received = token.balanceOf(address(this)) - before;
        // INVARIANT: balanceOf(this) == totalEscrow + totalCredits.
        if (received != escrow) revert JobEscrowMismatch(escrow, received);
    }

    function _beforeDeadline(Task storage t, uint256 id) private view {
        if (block.number > t.deadline) revert TaskDeadlinePassed(id, t.deadline);
    }

    /// @dev Whether the task is Committed with its audit draw still to settle (a first draw
    /// on an audited job, or the redraw of an auditor after a timeout).
    function _auditUnsettled(Task storage t, JobRecord storage j) private view returns (bool) {
        uint8 flags = t.flags;
        return t.status == TaskStatus.Committed && flags & (FLAG_AUDITOR | FLAG_AUDIT_SETTLED) == 0
            && (j.auditRateBps != 0 || flags & FLAG_AUDIT_DUE != 0);
    }

    /// @dev The audit draw of an unsettled commitment: its ticket is the reveal deadline minus
    /// the reveal window (so it is readable until that deadline). Reverts
    /// `RandomnessUnavailable` before the ticket's block has passed.
    function _auditDraw(Task storage t, JobRecord storage j, uint256 id) private view returns (bool audited, bytes32 random) {
        random = FutureRandomness.draw(t.deadline - j.revealWindow, bytes32(id));
        audited = t.flags & FLAG_AUDIT_DUE != 0 || uint256(random) % Escrow.BPS < j.auditRateBps;
    }

    function _compare(Task storage t, uint256 id, JobRecord storage j) private {
        if (t.result == t.audit) {
            TaskFlow.openWindow(t, id, j.challengeWindow);
            return;
        }
        // INVARIANT: a disputed task's reward, audit fee and both collaterals stay locked.
        t.status = TaskStatus.Disputed;
        emit TaskDisputed(id, t.worker, t.auditor, t.result, t.audit);
        // (The worker's slot was freed at its reveal.)
        pool.release(t.auditor, 0);
    }

    function _finalize(Task storage t, uint256 id) private {
        uint256 jobId = TaskIds.jobOf(id);
        JobRecord storage j = _s.jobs[jobId];
        address worker = t.worker;
        bool audited = t.flags & FLAG_AUDITOR != 0;
        bool holds = TaskFlow.holdsCollateral(j, t, id);
        // INVARIANT: a task is paid once: Finalized is terminal.
        t.status = TaskStatus.Finalized;
        TaskFlow.pay(_s, _deps(), j, jobId, t, id, audited);
        if (worker != j.submitter) registry.recordTaskCompleted(worker, j.computePerTask);
        if (holds) pool.unlock(worker, j.workerCollateral);
        if (audited) pool.release(t.auditor, auditorCollateral);
    }
}
