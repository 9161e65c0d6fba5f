// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IJobMarket} from "../interfaces/IJobMarket.sol";
import {IWorkerPool} from "../interfaces/IWorkerPool.sol";
import {IIdentityRegistry, ROLE_SUBMITTER, MAX_FETCH_KIBPS, MAX_RPC_RTT_MS} from "../interfaces/IIdentityRegistry.sol";
import {TaskIds} from "./TaskIds.sol";
import {Escrow} from "./Escrow.sol";
import {FutureRandomness} from "./FutureRandomness.sol";
import {MarketStore, MarketDeps, JobRecord, TaskFlow} from "./TaskFlow.sol";

/// @title JobBook: creating jobs, reading them back, and the market's batch calls
/// @notice An external library: JobMarket calls it with DELEGATECALL (its storage, its events,
/// its `msg.sender`), which keeps the market's bytecode under the EIP-170 limit with room to
/// spare. Job creation and the job view run once per job or off chain; the batch calls pay the
/// library call once for many tasks. Callers check reentrancy and batch bounds.
library JobBook {
    /// @notice See IJobMarket.MIN_WINDOW_BLOCKS.
    uint32 internal constant MIN_WINDOW_BLOCKS = 5;
    /// @notice See IJobMarket.MAX_REVEAL_WINDOW_BLOCKS.
    uint32 internal constant MAX_REVEAL_WINDOW_BLOCKS = 200;
    /// @notice See IJobMarket.MAX_CID_BYTES.
    uint256 internal constant MAX_CID_BYTES = 128;
    /// @notice The most shard tasks a round may have: a round's counters are 16 bits
    /// (`JobRecord.finalizedInRound`, `revealedInRound`).
    uint32 internal constant MAX_SHARDS = type(uint16).max;
    /// @notice See IJobMarket.MAX_BATCH.
    uint256 internal constant MAX_BATCH = 32;
    /// @notice See IJobMarket.MAX_STAGES.
    uint8 internal constant MAX_STAGES = TaskFlow.MAX_STAGES;
    /// @notice See IJobMarket.MIN_COLLATERAL: 20 TRAIN. A game lost at this stake pays its
    /// referees 20 % of it and burns 30 % (default slash split), one won for reputation burns
    /// half of it (contracts/PROPERTIES.md C13-C15).
    uint96 internal constant MIN_COLLATERAL = 20e18;
    /// @notice See IJobMarket.MAX_COLLATERAL_PER_REWARD.
    uint256 internal constant MAX_COLLATERAL_PER_REWARD = 100;

    /// @notice Validate `p`, store the job and emit `JobCreated`; the caller pulls `escrow`.
    /// @return jobId the new job's id
    /// @return escrow what the caller must pull from `msg.sender`
    function create(MarketStore storage s, MarketDeps memory d, IJobMarket.JobParams calldata p)
        external
        returns (uint256 jobId, uint256 escrow)
    {
        if (!d.registry.hasParticipantRole(msg.sender, ROLE_SUBMITTER)) revert IJobMarket.JobSubmitterNotRegistered(msg.sender);
        if (p.shards == 0 || p.rounds == 0 || p.shards > MAX_SHARDS) revert IJobMarket.JobInvalidShape(p.shards, p.rounds);
        // INVARIANT: every phase gives an honest party time to act, the audit ticket stays
        // readable until the reveal deadline, and a third party can re-run a task and
        // challenge it inside the window.
        if (
            p.acceptWindow < MIN_WINDOW_BLOCKS || p.computeWindow < MIN_WINDOW_BLOCKS
                || p.revealWindow < MIN_WINDOW_BLOCKS || p.challengeWindow < MIN_WINDOW_BLOCKS
        ) revert IJobMarket.JobWindowTooShort(MIN_WINDOW_BLOCKS);
        if (p.revealWindow > MAX_REVEAL_WINDOW_BLOCKS) {
            revert IJobMarket.JobRevealWindowTooLong(p.revealWindow, MAX_REVEAL_WINDOW_BLOCKS);
        }
        if (p.challengeWindow < p.computeWindow) revert IJobMarket.JobChallengeWindowTooShort(p.challengeWindow, p.computeWindow);
        // INVARIANT: a job pays its tasks (no accept penalties collected by a job that pays
        // nothing); a worker always has more at stake than the reward it could take for a
        // wrong result, and every game on the task stakes at least MIN_COLLATERAL a side (its
        // referees are paid, a self-dealt game burns a real amount); an ignored offer costs at
        // most one reward at the least accept penalty.
        _checkMoney(p.rewardPerTask, p.workerCollateral);
        uint256 cidLength = bytes(p.manifestCid).length;
        if (bytes(p.initialCheckpointCid).length > cidLength) cidLength = bytes(p.initialCheckpointCid).length;
        if (cidLength > MAX_CID_BYTES) revert IJobMarket.MarketCidTooLong(cidLength, MAX_CID_BYTES);
        if (p.expiryBlock <= block.number) revert IJobMarket.JobInvalidExpiry(p.expiryBlock);
        if (p.auditRateBps > Escrow.BPS) revert IJobMarket.JobInvalidAuditRate(p.auditRateBps);
        if (p.checkpointLeaves == 0) revert IJobMarket.JobInvalidCheckpointLeaves(p.checkpointLeaves);
        if (p.minFetchKiBps > MAX_FETCH_KIBPS || p.maxRpcRttMs > MAX_RPC_RTT_MS) {
            revert IJobMarket.JobInvalidNetworkTerms(p.minFetchKiBps, p.maxRpcRttMs);
        }
        if (p.stages == 0 || p.stages > MAX_STAGES || p.shards % p.stages != 0) {
            revert IJobMarket.JobInvalidStages(p.stages, p.shards);
        }
        // A stage's inputs are its siblings' results, revealed after its own commitment: an
        // audit committed blind cannot replay it. Split jobs are checked by challenges.
        if (p.stages > 1 && p.auditRateBps != 0) revert IJobMarket.JobInvalidAuditRate(p.auditRateBps);
        escrow = Escrow.jobEscrow(p.shards, p.rounds, p.rewardPerTask, p.auditFee);
        // INVARIANT: escrow fits the packed uint128 (checked, not truncated).
        if (escrow > type(uint128).max) revert IJobMarket.JobEscrowTooLarge(escrow);

        jobId = ++s.jobCount;
        JobRecord storage j = s.jobs[jobId];
        j.status = IJobMarket.JobStatus.Active;
        j.shards = p.shards;
        j.acceptWindow = p.acceptWindow;
        j.computeWindow = p.computeWindow;
        j.revealWindow = uint16(p.revealWindow); // ≤ MAX_REVEAL_WINDOW_BLOCKS (checked above)
        j.challengeWindow = p.challengeWindow;
        j.auditRateBps = p.auditRateBps;
        j.deviceClass = p.deviceClass;
        j.memoryMiB = p.memoryMiB;
        j.preferredRegion = p.preferredRegion;
        j.checkpointLeaves = p.checkpointLeaves;
        j.workerCollateral = p.workerCollateral;
        j.expiryBlock = p.expiryBlock;
        j.rounds = p.rounds;
        j.rewardPerTask = p.rewardPerTask;
        j.computePerTask = p.computePerTask;
        j.submitter = msg.sender;
        j.auditFee = p.auditFee;
        j.escrow = uint128(escrow);
        j.manifestHash = p.manifestHash;
        j.checkpointHash = p.initialCheckpointHash;
        if (bytes(p.initialCheckpointCid).length != 0) j.checkpointCid = p.initialCheckpointCid;
        if ((p.minFetchKiBps | p.maxRpcRttMs) != 0) {
            (j.minFetchKiBps, j.maxRpcRttMs, j.networkTerms) = (p.minFetchKiBps, p.maxRpcRttMs, true);
        }
        if (p.stages != 1) j.stages = p.stages;
        s.totalEscrow += uint128(escrow);
        s.jobsBySubmitter[msg.sender].push(jobId);
        emit IJobMarket.JobCreated(
            jobId, msg.sender, p.manifestCid, p.manifestHash, p.shards, p.rounds, Escrow.taskCount(p.shards, p.rounds), escrow
        );
        // The first offers' ticket: drawTask can draw them from its next block on.
        TaskFlow.requestOffers(d, j, jobId);
    }

    /// @dev The reward is nonzero and the collateral within [max(reward, MIN_COLLATERAL),
    /// MAX_COLLATERAL_PER_REWARD × reward].
    function _checkMoney(uint96 reward, uint96 collateral) private pure {
        if (reward == 0) revert IJobMarket.JobRewardZero();
        uint96 least = reward > MIN_COLLATERAL ? reward : MIN_COLLATERAL;
        if (collateral < least) revert IJobMarket.JobCollateralTooLow(collateral, least);
        uint256 most = uint256(reward) * MAX_COLLATERAL_PER_REWARD;
        if (collateral > most) revert IJobMarket.JobCollateralTooHigh(collateral, most);
    }

    /// @notice The stored job as IJobMarket.Job (see IJobMarket.jobOf).
    function jobOf(MarketStore storage s, uint256 jobId) external view returns (IJobMarket.Job memory job) {
        JobRecord storage j = s.jobs[jobId];
        job.submitter = j.submitter;
        job.status = j.status;
        job.shards = j.shards;
        job.rounds = j.rounds;
        job.rewardPerTask = j.rewardPerTask;
        job.auditFee = j.auditFee;
        job.expiryBlock = j.expiryBlock;
        job.workerCollateral = j.workerCollateral;
        job.acceptWindow = j.acceptWindow;
        job.computeWindow = j.computeWindow;
        job.revealWindow = j.revealWindow;
        job.challengeWindow = j.challengeWindow;
        job.auditRateBps = j.auditRateBps;
        job.deviceClass = j.deviceClass;
        job.memoryMiB = j.memoryMiB;
        job.preferredRegion = j.preferredRegion;
        job.computePerTask = j.computePerTask;
        job.currentRound = j.currentRound;
        job.nextIndex = j.nextIndex;
        job.finalizedInRound = j.finalizedInRound;
        job.pendingCount = j.pendingCount;
        job.checkpointLeaves = j.checkpointLeaves;
        job.escrow = j.escrow;
        job.surplus = j.surplus;
        job.manifestHash = j.manifestHash;
        job.checkpointHash = j.checkpointHash;
        job.checkpointCid = j.checkpointCid;
        job.minFetchKiBps = j.minFetchKiBps;
        job.maxRpcRttMs = j.maxRpcRttMs;
        job.stages = j.stages == 0 ? 1 : j.stages;
        job.revealedInRound = j.revealedInRound;
    }

    /// @notice See IJobMarket.drawTask. Here rather than in JobMarket: a stage task's offer
    /// (TaskFlow.assignStage) would not fit the market's bytecode with room to spare.
    function drawOne(MarketStore storage s, MarketDeps memory d, uint256 jobId) external returns (uint256 id) {
        (id,) = _draw(s, d, jobId, 1);
    }

    /// @notice See IJobMarket.drawTasks.
    function drawMany(MarketStore storage s, MarketDeps memory d, uint256 jobId, uint256 count)
        external
        returns (uint256 drawn)
    {
        if (count > MAX_BATCH) revert IJobMarket.MarketBatchTooLarge(count, MAX_BATCH);
        (, drawn) = _draw(s, d, jobId, count);
    }

    /// @dev Offers are drawn in two steps, from the future: a call finding no ticket (or a
    /// lapsed one) asks for one and draws nothing; a call after the ticket's block draws up
    /// to `count` tasks from its hash. The ticket stays until its epoch ends or nothing is
    /// left to draw, so a caller drawing fewer tasks cannot get the others a new hash; tasks
    /// sent back after the ticket (which must not be drawn from a public hash) wait until
    /// nothing else is left for it, and then the call asks for the next one, so nobody can
    /// get the others a new hash by sending a task back either. Neither the caller nor a party moving its stake
    /// meanwhile can read or steer an offer: its hash did not exist when the ticket was
    /// asked for, and the worker tree is held from the ticket on (WorkerPool.holdOffers).
    /// Returns the first task drawn.
    function _draw(MarketStore storage s, MarketDeps memory d, uint256 jobId, uint256 count)
        private
        returns (uint256 first, uint256 drawn)
    {
        JobRecord storage j = _drawable(s, jobId);
        if (!TaskFlow.hasDrawable(j)) revert IJobMarket.JobNothingToDraw(jobId);
        uint64 ticket = j.offerTicket;
        if (ticket == 0 || FutureRandomness.lapsed(ticket)) {
            TaskFlow.requestOffers(d, j, jobId);
            return (0, 0);
        }
        bytes32 base = TaskFlow.offerBase(j, jobId);
        IWorkerPool.Requirements memory req = TaskFlow.requirements(j);
        uint8 outcome;
        for (; drawn < count; ++drawn) {
            uint256 id;
            (id, outcome) = TaskFlow.drawNext(s, d, j, req, jobId, base, ticket);
            if (outcome != TaskFlow.DRAWN) {
                if (drawn == 0 && outcome == TaskFlow.NO_ELIGIBLE_WORKER) revert IJobMarket.JobNoEligibleWorker(jobId, id);
                break;
            }
            if (drawn == 0) first = id;
        }
        // NO_ELIGIBLE_WORKER (after a draw) leaves its task drawable: the ticket stays.
        if (outcome == TaskFlow.WAIT_FOR_TICKET) TaskFlow.requestOffers(d, j, jobId);
        else if (outcome == TaskFlow.NOTHING_TO_DRAW || (outcome == TaskFlow.DRAWN && !TaskFlow.hasDrawable(j))) {
            j.offerTicket = 0;
        }
    }

    /// @notice See TaskFlow.stageBlocker (JobMarket.finalize of a stage task).
    function stageBlocker(MarketStore storage s, uint256 id, uint8 stages) external view returns (uint256) {
        return TaskFlow.stageBlocker(s, id, stages);
    }

    /// @notice See TaskFlow.alignStages (called by JobMarket.acceptTask for a stage task).
    function alignStages(MarketStore storage s, uint256 id, uint8 stages, uint64 deadline) external {
        TaskFlow.alignStages(s, id, stages, deadline);
    }

    function _drawable(MarketStore storage s, uint256 jobId) private view returns (JobRecord storage j) {
        j = TaskFlow.activeJob(s, jobId);
        if (block.number > j.expiryBlock) revert IJobMarket.JobPastExpiry(jobId, j.expiryBlock);
    }

    /// @dev The pool members a batch settles, each once: its released pool slots, the
    /// collateral they unlock, and the completions (with their compute) to record.
    struct Settlement {
        address[] accounts;
        uint256[] releases;
        uint256[] unlocks;
        uint256[] completed;
        uint256[] compute;
        uint256 count;
    }

    /// @notice See IJobMarket.finalizeMany. Each task is paid as `finalize` pays it; each
    /// worker and auditor is then settled once for all its tasks of the batch: one history
    /// record (IdentityRegistry.recordTasksCompleted) and one pool release
    /// (WorkerPool.releaseMany), after every task's own state is written.
    function finalizeMany(MarketStore storage s, MarketDeps memory d, uint256[] calldata ids)
        external
        returns (uint256 finalized)
    {
        uint256 n = ids.length;
        if (n > MAX_BATCH) revert IJobMarket.MarketBatchTooLarge(n, MAX_BATCH);
        Settlement memory acc = Settlement(
            new address[](2 * n), new uint256[](2 * n), new uint256[](2 * n), new uint256[](2 * n), new uint256[](2 * n), 0
        );
        for (uint256 i = 0; i < n; ++i) {
            if (_finalizeOne(s, d, acc, ids[i])) finalized += 1;
        }
        for (uint256 k = 0; k < acc.count; ++k) {
            address account = acc.accounts[k];
            if (acc.completed[k] != 0) d.registry.recordTasksCompleted(account, uint32(acc.completed[k]), uint128(acc.compute[k]));
            if (acc.releases[k] != 0) d.pool.releaseMany(account, acc.releases[k], acc.unlocks[k]);
            else if (acc.unlocks[k] != 0) d.pool.unlock(account, acc.unlocks[k]);
        }
    }

    /// @dev Pay task `id` if its challenge window is over, and note what its worker and
    /// auditor are owed by the pool and the registry; false (and nothing done) otherwise.
    function _finalizeOne(MarketStore storage s, MarketDeps memory d, Settlement memory acc, uint256 id) private returns (bool) {
        IJobMarket.Task storage t = s.tasks[id];
        if (t.status != IJobMarket.TaskStatus.ChallengeWindow || block.number <= t.deadline) return false;
        uint256 jobId = TaskIds.jobOf(id);
        JobRecord storage j = s.jobs[jobId];
        // A stage is paid with its group (TaskFlow.stageBlocker), an aggregation task once
        // every shard of its round is finalized.
        if (TaskFlow.isStage(j, id) && TaskFlow.stageBlocker(s, id, j.stages) != 0) return false;
        if (uint32(id) == j.shards && j.finalizedInRound != j.shards) return false;
        address worker = t.worker;
        bool audited = t.flags & TaskFlow.FLAG_AUDITOR != 0;
        bool holds = TaskFlow.holdsCollateral(j, t, id);
        // INVARIANT: a task is paid once: Finalized is terminal.
        t.status = IJobMarket.TaskStatus.Finalized;
        TaskFlow.pay(s, d, j, jobId, t, id, audited);
        // Reputation and compute grow only from work someone else paid for.
        bool record = worker != j.submitter;
        // (A worker's pool slot was freed at its reveal: its collateral only is unlocked.)
        _add(acc, worker, 0, holds ? j.workerCollateral : 0, record ? 1 : 0, record ? j.computePerTask : 0);
        if (audited) _add(acc, t.auditor, 1, d.auditorCollateral, 0, 0);
        return true;
    }

    function _add(Settlement memory acc, address account, uint256 slots, uint256 unlock, uint256 completed, uint256 compute)
        private
        pure
    {
        uint256 k = 0;
        while (k < acc.count && acc.accounts[k] != account) ++k;
        if (k == acc.count) {
            acc.accounts[k] = account;
            acc.count = k + 1;
        }
        acc.releases[k] += slots;
        acc.unlocks[k] += unlock;
        acc.completed[k] += completed;
        acc.compute[k] += compute;
    }
}
