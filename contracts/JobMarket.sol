// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {IJobMarket} from "./interfaces/IJobMarket.sol";
import {IWorkerPool} from "./interfaces/IWorkerPool.sol";
import {IIdentityRegistry, ROLE_SUBMITTER} from "./interfaces/IIdentityRegistry.sol";
import {IStakeManager} from "./interfaces/IStakeManager.sol";
import {TaskIds} from "./libraries/TaskIds.sol";
import {Escrow} from "./libraries/Escrow.sol";

/// @title JobMarket
/// @notice Jobs, tasks, commit–reveal, audits, timeouts and pull payments. Scheduling
/// lives in WorkerPool; stakes in StakeManager; history in IdentityRegistry.
/// @dev ReentrancyGuardTransient (EIP-1153, cancun): same guard and error as ReentrancyGuard, ~5k gas cheaper per call.
contract JobMarket is AccessControl, ReentrancyGuardTransient, IJobMarket {
    using SafeERC20 for IERC20;

    /// @inheritdoc IJobMarket
    bytes32 public constant DISPUTE_ROLE = keccak256("DISPUTE_ROLE");
    /// @inheritdoc IJobMarket
    uint256 public constant MAX_BATCH = 32;
    uint8 private constant FLAG_AUDIT_COMMITTED = 1;
    uint8 private constant FLAG_AUDIT_REVEALED = 2;
    uint8 private constant FLAG_CHALLENGED = 4;

    IERC20 public immutable token;
    IIdentityRegistry public immutable registry;
    IStakeManager public immutable stakeManager;
    IWorkerPool public immutable pool;
    uint16 public immutable timeoutPenaltyBps;
    uint16 public immutable acceptPenaltyBps;
    uint96 public immutable auditorCollateral;
    uint96 public immutable auditorPenalty;

    /// @dev One slot for both totals: the first credit on a market is not a zero-to-nonzero
    /// store, and a payout updates both in one slot. Both are bounded by the token balance
    /// of this contract, and every amount added is a job escrow checked to fit uint128.
    uint128 private _totalEscrow;
    uint128 private _totalCredits;
    /// @dev One slot: once a job exists the nonce write is never a zero-to-nonzero store.
    uint128 public jobCount;
    uint128 private _nonce;

    mapping(uint256 jobId => Job) private _jobs;
    mapping(uint256 taskId => Task) private _tasks;
    mapping(uint256 jobId => mapping(uint256 slot => uint256 taskId)) private _pending;
    mapping(uint256 jobId => string cid) private _revealedCheckpointCid;
    mapping(address submitter => uint256[] jobIds) private _jobsBySubmitter;
    mapping(address account => uint256 amount) private _credits;

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
                || config.auditorPenalty > config.auditorCollateral
        ) revert MarketInvalidConfig();
        token = token_;
        registry = registry_;
        stakeManager = stakeManager_;
        pool = pool_;
        timeoutPenaltyBps = config.timeoutPenaltyBps;
        acceptPenaltyBps = config.acceptPenaltyBps;
        auditorCollateral = config.auditorCollateral;
        auditorPenalty = config.auditorPenalty;
        _grantRole(DEFAULT_ADMIN_ROLE, msg.sender);
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
        Job storage j = _activeJob(jobId);
        if (msg.sender != j.submitter) revert JobNotSubmitter(jobId, msg.sender);
        j.status = JobStatus.Cancelled;
        uint256 refund = _refundUnspent(j) + _takeSurplus(j);
        emit JobCancelled(jobId, refund);
        _emitRefund(jobId, j.submitter, refund);
    }

    /// @inheritdoc IJobMarket
    function expireJob(uint256 jobId) external nonReentrant {
        Job storage j = _activeJob(jobId);
        if (block.number <= j.expiryBlock) revert JobNotExpired(jobId, j.expiryBlock);
        j.status = JobStatus.Expired;
        uint256 refund = _refundUnspent(j) + _takeSurplus(j);
        emit JobExpired(jobId, refund);
        _emitRefund(jobId, j.submitter, refund);
    }

    // ================================================================ scheduling

    /// @inheritdoc IJobMarket
    function drawTask(uint256 jobId) external returns (uint256 id) {
        Job storage j = _activeJob(jobId);
        if (block.number > j.expiryBlock) revert JobPastExpiry(jobId, j.expiryBlock);
        uint32 next = j.nextIndex;
        uint32 shards = j.shards;
        address exclude;
        if (j.pendingCount != 0) {
            // Tasks sent back are redrawn first (LIFO stack; all belong to the current round),
            // never to the worker that failed them (kept in `worker` while Pending).
            j.pendingCount -= 1;
            id = _pending[jobId][j.pendingCount];
            exclude = _tasks[id].worker;
        } else if (next < shards || (next == shards && j.finalizedInRound == shards)) {
            // INVARIANT: the aggregation task is drawable only once every shard task of the round is finalized.
            id = TaskIds.encode(jobId, j.currentRound, next);
            j.nextIndex = next + 1;
        } else {
            revert JobNothingToDraw(jobId);
        }
        if (!_offer(j, id, exclude)) revert JobNoEligibleWorker(jobId, id);
    }

    // ================================================================ worker and auditor

    /// @inheritdoc IJobMarket
    function acceptTask(uint256 id) external {
        Task storage t = _tasks[id];
        if (t.status != TaskStatus.Offered) revert TaskNotOffered(id);
        if (msg.sender != t.worker) revert TaskNotWorker(id, msg.sender);
        _beforeDeadline(t, id);
        Job storage j = _jobs[TaskIds.jobOf(id)];
        // A cancelled or expired job's offered tasks are closed, not started.
        if (j.status != JobStatus.Active) revert JobNotActive(TaskIds.jobOf(id), j.status);
        uint64 deadline = uint64(block.number) + j.computeWindow;
        t.status = TaskStatus.Running;
        t.deadline = deadline;
        // No pool refresh here: the draw that offered this task refreshed the weight in
        // this task's life already, and nothing the weight depends on moved since.
        emit TaskAccepted(id, msg.sender, deadline);
    }

    /// @inheritdoc IJobMarket
    function commitResult(uint256 id, bytes32 commitment) external {
        Task storage t = _tasks[id];
        if (t.status != TaskStatus.Running) revert TaskNotRunning(id);
        if (msg.sender != t.worker) revert TaskNotWorker(id, msg.sender);
        _beforeDeadline(t, id);
        Job storage j = _jobs[TaskIds.jobOf(id)];
        bool audited = j.auditRateBps != 0
            && uint256(_random(bytes32(id))) % Escrow.BPS < j.auditRateBps;
        address auditor = audited ? _drawAuditor(j, id, msg.sender) : address(0);
        uint64 deadline = uint64(block.number) + (auditor != address(0) ? j.computeWindow : j.revealWindow);
        t.result = commitment;
        t.status = TaskStatus.Committed;
        t.deadline = deadline;
        if (auditor != address(0)) t.auditor = auditor;
        emit ResultCommitted(id, msg.sender, commitment, deadline);
        if (auditor != address(0)) emit AuditorDrawn(id, auditor, deadline);
        else if (audited) emit AuditWaived(id, deadline);
    }

    /// @inheritdoc IJobMarket
    function commitAudit(uint256 id, bytes32 commitment) external {
        Task storage t = _tasks[id];
        if (t.status != TaskStatus.Committed || t.auditor == address(0) || t.flags & FLAG_AUDIT_COMMITTED != 0) {
            revert TaskNotAwaitingAudit(id);
        }
        if (msg.sender != t.auditor) revert TaskNotAuditor(id, msg.sender);
        _beforeDeadline(t, id);
        uint64 deadline = uint64(block.number) + _jobs[TaskIds.jobOf(id)].revealWindow;
        t.audit = commitment;
        t.flags |= FLAG_AUDIT_COMMITTED;
        t.deadline = deadline;
        emit AuditCommitted(id, msg.sender, commitment, deadline);
    }

    /// @inheritdoc IJobMarket
    function revealResult(uint256 id, bytes32 root, string calldata resultCid, bytes32 salt) external {
        Task storage t = _tasks[id];
        if (t.status != TaskStatus.Committed) revert TaskNotCommitted(id);
        if (msg.sender != t.worker) revert TaskNotWorker(id, msg.sender);
        // INVARIANT: the worker's root stays secret until the auditor has committed to its own.
        if (t.auditor != address(0) && t.flags & FLAG_AUDIT_COMMITTED == 0) revert TaskAuditNotCommitted(id);
        _beforeDeadline(t, id);
        if (keccak256(abi.encode(root, resultCid, salt, msg.sender)) != t.result) revert TaskCommitmentMismatch(id);
        (uint256 jobId,, uint32 index) = TaskIds.decode(id);
        Job storage j = _jobs[jobId];
        t.result = root;
        t.status = TaskStatus.Revealed;
        if (index == j.shards) _revealedCheckpointCid[jobId] = resultCid;
        emit ResultRevealed(id, msg.sender, root, resultCid);
        if (t.auditor == address(0)) _openChallengeWindow(t, id, j);
        else if (t.flags & FLAG_AUDIT_REVEALED != 0) _compare(t, id, j);
    }

    /// @inheritdoc IJobMarket
    function revealAudit(uint256 id, bytes32 root, bytes32 salt) external {
        Task storage t = _tasks[id];
        TaskStatus s = t.status;
        if (
            (s != TaskStatus.Committed && s != TaskStatus.Revealed) || t.flags & FLAG_AUDIT_COMMITTED == 0
                || t.flags & FLAG_AUDIT_REVEALED != 0
        ) revert TaskAuditNotRevealable(id);
        if (msg.sender != t.auditor) revert TaskNotAuditor(id, msg.sender);
        _beforeDeadline(t, id);
        if (keccak256(abi.encode(root, salt, msg.sender)) != t.audit) revert TaskCommitmentMismatch(id);
        t.audit = root;
        t.flags |= FLAG_AUDIT_REVEALED;
        emit AuditRevealed(id, msg.sender, root);
        if (s == TaskStatus.Revealed) _compare(t, id, _jobs[TaskIds.jobOf(id)]);
    }

    // ================================================================ settlement

    /// @inheritdoc IJobMarket
    function finalize(uint256 id) external nonReentrant {
        Task storage t = _tasks[id];
        if (t.status != TaskStatus.ChallengeWindow) revert TaskNotInChallengeWindow(id);
        if (block.number <= t.deadline) revert TaskChallengeWindowOpen(id, t.deadline);
        _finalize(t, id);
    }

    /// @inheritdoc IJobMarket
    function finalizeMany(uint256[] calldata ids) external nonReentrant returns (uint256 finalized) {
        if (ids.length > MAX_BATCH) revert MarketBatchTooLarge(ids.length, MAX_BATCH);
        for (uint256 i = 0; i < ids.length; ++i) {
            Task storage t = _tasks[ids[i]];
            if (t.status != TaskStatus.ChallengeWindow || block.number <= t.deadline) continue;
            _finalize(t, ids[i]);
            finalized += 1;
        }
    }

    /// @inheritdoc IJobMarket
    function timeoutTask(uint256 id) external nonReentrant {
        Task storage t = _tasks[id];
        TaskStatus s = t.status;
        if (s != TaskStatus.Offered && s != TaskStatus.Running && s != TaskStatus.Committed && s != TaskStatus.Revealed) {
            revert TaskNotTimeoutable(id, s);
        }
        if (block.number <= t.deadline) revert TaskDeadlineNotPassed(id, t.deadline);
        uint256 jobId = TaskIds.jobOf(id);
        Job storage j = _jobs[jobId];
        address worker = t.worker;
        if (s == TaskStatus.Committed && t.auditor != address(0) && t.flags & FLAG_AUDIT_COMMITTED == 0) {
            // The auditor never committed: penalise it and draw another (or waive the audit).
            _timeoutAuditor(t, id, j, s);
            address next = _drawAuditor(j, id, worker);
            uint64 deadline = uint64(block.number) + (next != address(0) ? j.computeWindow : j.revealWindow);
            t.auditor = next;
            t.deadline = deadline;
            if (next != address(0)) emit AuditorDrawn(id, next, deadline);
            else emit AuditWaived(id, deadline);
        } else if (s == TaskStatus.Revealed) {
            // The worker revealed, the auditor did not: its root is public now, so a new
            // auditor could copy it; the result stands unaudited (challengeable) instead.
            _timeoutAuditor(t, id, j, s);
            t.auditor = address(0);
            t.flags = 0;
            _openChallengeWindow(t, id, j);
        } else {
            // The worker missed accept, commit or reveal.
            uint256 bps = s == TaskStatus.Offered ? acceptPenaltyBps : timeoutPenaltyBps;
            uint256 collateral = j.workerCollateral;
            uint256 taken = _penalize(worker, Escrow.share(collateral, bps), j.submitter);
            emit TaskTimedOut(id, worker, s, taken);
            address auditor = t.auditor;
            if (auditor != address(0)) pool.release(auditor, auditorCollateral);
            pool.release(worker, collateral - taken);
            registry.recordTimeout(worker);
            _sendBack(j, jobId, id, true);
        }
    }

    /// @inheritdoc IJobMarket
    function closeTask(uint256 id) external nonReentrant {
        Task storage t = _tasks[id];
        uint256 jobId = TaskIds.jobOf(id);
        Job storage j = _jobs[jobId];
        TaskStatus s = t.status;
        if (j.status == JobStatus.Active || (s != TaskStatus.Pending && s != TaskStatus.Offered)) {
            revert TaskNotClosable(id);
        }
        address worker = t.worker;
        _close(j, jobId, t, id);
        if (s == TaskStatus.Offered) pool.release(worker, j.workerCollateral);
    }

    /// @inheritdoc IJobMarket
    function openChallenge(uint256 id, address challenger) external onlyRole(DISPUTE_ROLE) {
        Task storage t = _tasks[id];
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
    function resolveDispute(uint256 id, bool workerWon) external onlyRole(DISPUTE_ROLE) nonReentrant {
        Task storage t = _tasks[id];
        if (t.status != TaskStatus.Disputed) revert TaskNotDisputed(id);
        uint256 jobId = TaskIds.jobOf(id);
        Job storage j = _jobs[jobId];
        address worker = t.worker;
        emit DisputeResolved(id, workerWon);
        if (t.flags & FLAG_CHALLENGED != 0) {
            if (workerWon) {
                // The result stood: its challenge window resumes with the blocks it had left.
                t.flags &= ~FLAG_CHALLENGED;
                _openWindow(t, id, t.deadline);
                return;
            }
            // Pool slots were held through the challenge; the game slashed the collateral.
            address auditor = t.auditor;
            pool.release(worker, 0);
            if (auditor != address(0)) pool.release(auditor, auditorCollateral);
            _sendBack(j, jobId, id, false);
        } else if (workerWon) {
            t.status = TaskStatus.Finalized;
            _pay(j, jobId, t, id, false);
            registry.recordTaskCompleted(worker, j.computePerTask);
        } else {
            _sendBack(j, jobId, id, false);
        }
    }

    /// @inheritdoc IJobMarket
    function refundSurplus(uint256 jobId) external nonReentrant returns (uint256 amount) {
        Job storage j = _jobs[jobId];
        if (j.status == JobStatus.None) revert JobNotFound(jobId);
        amount = _takeSurplus(j);
        _emitRefund(jobId, j.submitter, amount);
    }

    /// @inheritdoc IJobMarket
    function withdraw() external nonReentrant {
        uint256 amount = _credits[msg.sender];
        if (amount == 0) revert MarketNothingToWithdraw(msg.sender);
        _credits[msg.sender] = 0;
        _totalCredits -= uint128(amount);
        emit Withdrawn(msg.sender, amount);
        token.safeTransfer(msg.sender, amount);
    }

    // ================================================================ views

    /// @inheritdoc IJobMarket
    function jobOf(uint256 jobId) external view returns (Job memory) {
        return _jobs[jobId];
    }

    /// @inheritdoc IJobMarket
    function taskOf(uint256 id) external view returns (Task memory) {
        return _tasks[id];
    }

    /// @inheritdoc IJobMarket
    function disputeTerms(uint256 id) external view returns (DisputeTerms memory d) {
        Task storage t = _tasks[id];
        (uint256 jobId,, uint32 index) = TaskIds.decode(id);
        Job storage j = _jobs[jobId];
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
    }

    /// @inheritdoc IJobMarket
    function tasksOf(uint256 jobId, uint256 offset, uint256 limit) external view returns (uint256[] memory ids) {
        Job storage j = _jobs[jobId];
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
        uint256[] storage all = _jobsBySubmitter[submitter];
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
    function totalEscrow() external view returns (uint256) {
        return _totalEscrow;
    }

    /// @inheritdoc IJobMarket
    function totalCredits() external view returns (uint256) {
        return _totalCredits;
    }

    /// @inheritdoc IJobMarket
    function credits(address account) external view returns (uint256) {
        return _credits[account];
    }

    // ================================================================ internals

    function _createJob(JobParams calldata p) private returns (uint256 jobId) {
        if (!registry.hasParticipantRole(msg.sender, ROLE_SUBMITTER)) revert JobSubmitterNotRegistered(msg.sender);
        if (p.shards == 0 || p.rounds == 0) revert JobInvalidShape(p.shards, p.rounds);
        if (p.acceptWindow == 0 || p.computeWindow == 0 || p.revealWindow == 0 || p.challengeWindow == 0) {
            revert JobInvalidWindows();
        }
        if (p.expiryBlock <= block.number) revert JobInvalidExpiry(p.expiryBlock);
        if (p.auditRateBps > Escrow.BPS) revert JobInvalidAuditRate(p.auditRateBps);
        if (p.checkpointLeaves == 0) revert JobInvalidCheckpointLeaves(p.checkpointLeaves);
        uint256 escrow = Escrow.jobEscrow(p.shards, p.rounds, p.rewardPerTask, p.auditFee);

        jobId = ++jobCount;
        Job storage j = _jobs[jobId];
        j.submitter = msg.sender;
        j.status = JobStatus.Active;
        j.shards = p.shards;
        j.rounds = p.rounds;
        j.rewardPerTask = p.rewardPerTask;
        j.auditFee = p.auditFee;
        j.expiryBlock = p.expiryBlock;
        j.workerCollateral = p.workerCollateral;
        j.acceptWindow = p.acceptWindow;
        j.computeWindow = p.computeWindow;
        j.revealWindow = p.revealWindow;
        j.challengeWindow = p.challengeWindow;
        j.auditRateBps = p.auditRateBps;
        j.deviceClass = p.deviceClass;
        j.memoryMiB = p.memoryMiB;
        j.preferredRegion = p.preferredRegion;
        j.computePerTask = p.computePerTask;
        j.checkpointLeaves = p.checkpointLeaves;
        // INVARIANT: escrow fits the packed uint128 (checked, not truncated).
        if (escrow > type(uint128).max) revert JobEscrowTooLarge(escrow);
        j.escrow = uint128(escrow);
        j.manifestHash = p.manifestHash;
        j.checkpointHash = p.initialCheckpointHash;
        if (bytes(p.initialCheckpointCid).length != 0) j.checkpointCid = p.initialCheckpointCid;
        _totalEscrow += uint128(escrow);
        _jobsBySubmitter[msg.sender].push(jobId);
        emit JobCreated(
            jobId, msg.sender, p.manifestCid, p.manifestHash, p.shards, p.rounds, Escrow.taskCount(p.shards, p.rounds), escrow
        );

        uint256 before = token.balanceOf(address(this));
        token.safeTransferFrom(msg.sender, address(this), escrow);
        uint256 received = token.balanceOf(address(this)) - before;
        // INVARIANT: balanceOf(this) == totalEscrow + totalCredits.
        if (received != escrow) revert JobEscrowMismatch(escrow, received);
    }

    function _activeJob(uint256 jobId) private view returns (Job storage j) {
        j = _jobs[jobId];
        if (j.status == JobStatus.None) revert JobNotFound(jobId);
        if (j.status != JobStatus.Active) revert JobNotActive(jobId, j.status);
    }

    function _beforeDeadline(Task storage t, uint256 id) private view {
        if (block.number > t.deadline) revert TaskDeadlinePassed(id, t.deadline);
    }

    /// @dev The one source of randomness: prevrandao mixed with the salt and a nonce. A VRF
    /// can replace this function.
    function _random(bytes32 salt) private returns (bytes32) {
        uint128 nonce = _nonce + 1;
        _nonce = nonce;
        return keccak256(abi.encode(block.prevrandao, salt, nonce));
    }

    function _offer(Job storage j, uint256 id, address exclude) private returns (bool) {
        address worker = pool.assign(
            _random(bytes32(id)),
            IWorkerPool.Requirements(j.deviceClass, j.memoryMiB, j.preferredRegion, j.workerCollateral, exclude),
            false
        );
        if (worker == address(0)) return false;
        uint64 deadline = uint64(block.number) + j.acceptWindow;
        Task storage t = _tasks[id];
        t.worker = worker;
        t.status = TaskStatus.Offered;
        t.deadline = deadline;
        (uint256 jobId, uint32 round, uint32 index) = TaskIds.decode(id);
        emit TaskDrawn(id, jobId, worker, round, index, deadline);
        return true;
    }

    function _drawAuditor(Job storage j, uint256 id, address worker) private returns (address) {
        return pool.assign(
            _random(bytes32(id)), IWorkerPool.Requirements(j.deviceClass, j.memoryMiB, 0, auditorCollateral, worker), true
        );
    }

    function _openChallengeWindow(Task storage t, uint256 id, Job storage j) private {
        _openWindow(t, id, j.challengeWindow);
    }

    function _openWindow(Task storage t, uint256 id, uint64 blocks) private {
        uint64 deadline = uint64(block.number) + blocks;
        t.status = TaskStatus.ChallengeWindow;
        t.deadline = deadline;
        emit ChallengeWindowOpened(id, deadline);
    }

    function _compare(Task storage t, uint256 id, Job storage j) private {
        if (t.result == t.audit) {
            _openChallengeWindow(t, id, j);
            return;
        }
        // INVARIANT: a disputed task's reward, audit fee and both collaterals stay locked.
        t.status = TaskStatus.Disputed;
        emit TaskDisputed(id, t.worker, t.auditor, t.result, t.audit);
        pool.release(t.worker, 0);
        pool.release(t.auditor, 0);
    }

    function _finalize(Task storage t, uint256 id) private {
        uint256 jobId = TaskIds.jobOf(id);
        Job storage j = _jobs[jobId];
        address worker = t.worker;
        address auditor = t.auditor;
        // INVARIANT: a task is paid once: Finalized is terminal.
        t.status = TaskStatus.Finalized;
        _pay(j, jobId, t, id, auditor != address(0));
        registry.recordTaskCompleted(worker, j.computePerTask);
        pool.release(worker, j.workerCollateral);
        if (auditor != address(0)) pool.release(auditor, auditorCollateral);
    }

    /// @dev Pay one task out of its job's escrow and move the job's counters on.
    function _pay(Job storage j, uint256 jobId, Task storage t, uint256 id, bool payAuditor) private {
        uint128 reward = j.rewardPerTask;
        uint128 fee = payAuditor ? j.auditFee : 0;
        // An unused audit fee stays in escrow as the job's surplus (same slot, no extra
        // store); it is refunded by refundSurplus, at completion, cancel or expiry.
        j.escrow -= reward + fee;
        if (!payAuditor) j.surplus += j.auditFee;
        _totalEscrow -= reward + fee;
        _credit(t.worker, reward);
        if (payAuditor) _credit(t.auditor, fee);
        emit TaskFinalized(id, t.worker, reward, payAuditor ? t.auditor : address(0), fee);

        (, uint32 round, uint32 index) = TaskIds.decode(id);
        if (index < j.shards) {
            j.finalizedInRound += 1;
            return;
        }
        // The aggregation task's result is the next round's starting checkpoint.
        j.currentRound = round + 1;
        j.nextIndex = 0;
        j.finalizedInRound = 0;
        j.checkpointHash = t.result;
        j.checkpointCid = _revealedCheckpointCid[jobId];
        emit RoundAdvanced(jobId, round + 1, j.checkpointCid, t.result);
        if (round + 1 == j.rounds && j.status == JobStatus.Active) {
            j.status = JobStatus.Completed;
            emit JobCompleted(jobId);
            _emitRefund(jobId, j.submitter, _takeSurplus(j));
        }
    }

    function _timeoutAuditor(Task storage t, uint256 id, Job storage j, TaskStatus phase) private {
        address auditor = t.auditor;
        uint256 taken = _penalize(auditor, auditorPenalty, j.submitter);
        emit TaskTimedOut(id, auditor, phase, taken);
        pool.release(auditor, auditorCollateral - taken);
        registry.recordTimeout(auditor);
    }

    function _penalize(address account, uint256 amount, address beneficiary) private returns (uint256) {
        if (amount == 0) return 0;
        return stakeManager.penalize(account, amount, beneficiary);
    }

    /// @dev A task whose worker failed: redraw it now (`redraw`; excluding that worker), else
    /// push it on the pending stack, where the next `drawTask` takes it (still excluding that
    /// worker); on a job that is no longer Active, close and refund it. A lost dispute does not
    /// redraw at once: the settlement is costly enough, and a keeper's next draw takes it.
    function _sendBack(Job storage j, uint256 jobId, uint256 id, bool redraw) private {
        Task storage t = _tasks[id];
        address exclude = t.worker;
        if (j.status != JobStatus.Active) {
            _close(j, jobId, t, id);
            return;
        }
        t.flags = 0;
        t.auditor = address(0);
        t.result = bytes32(0);
        t.audit = bytes32(0);
        if (redraw && block.number <= j.expiryBlock && _offer(j, id, exclude)) return;
        t.status = TaskStatus.Pending;
        t.deadline = 0;
        _pending[jobId][j.pendingCount] = id;
        j.pendingCount += 1;
        emit TaskRequeued(id, jobId);
    }

    function _close(Job storage j, uint256 jobId, Task storage t, uint256 id) private {
        uint256 cost = Escrow.taskCost(j.rewardPerTask, j.auditFee);
        t.status = TaskStatus.Closed;
        j.escrow -= uint128(cost);
        _totalEscrow -= uint128(cost);
        _credit(j.submitter, cost);
        emit TaskClosed(id, cost);
        _emitRefund(jobId, j.submitter, cost);
    }

    /// @dev Credit the job's surplus (unused audit fees) to its submitter.
    function _takeSurplus(Job storage j) private returns (uint256 amount) {
        amount = j.surplus;
        if (amount == 0) return 0;
        j.surplus = 0;
        j.escrow -= uint128(amount);
        _totalEscrow -= uint128(amount);
        _credit(j.submitter, amount);
    }

    function _refundUnspent(Job storage j) private returns (uint256 refund) {
        uint256 unspent = Escrow.taskCount(j.shards, j.rounds) - Escrow.materialized(j.shards, j.currentRound, j.nextIndex);
        refund = unspent * Escrow.taskCost(j.rewardPerTask, j.auditFee);
        j.escrow -= uint128(refund);
        _totalEscrow -= uint128(refund);
        _credit(j.submitter, refund);
    }

    function _emitRefund(uint256 jobId, address submitter, uint256 amount) private {
        if (amount != 0) emit Refunded(jobId, submitter, amount);
    }

    function _credit(address account, uint256 amount) private {
        if (amount == 0) return;
        _credits[account] += amount;
        _totalCredits += uint128(amount);
    }
}
