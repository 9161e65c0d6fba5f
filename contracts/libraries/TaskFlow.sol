// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IJobMarket} from "../interfaces/IJobMarket.sol";
import {IWorkerPool} from "../interfaces/IWorkerPool.sol";
import {IIdentityRegistry} from "../interfaces/IIdentityRegistry.sol";
import {IStakeManager} from "../interfaces/IStakeManager.sol";
import {TaskIds} from "./TaskIds.sol";
import {Escrow} from "./Escrow.sol";
import {FutureRandomness} from "./FutureRandomness.sol";

/// @notice A job as JobMarket stores it: IJobMarket.Job's fields (same names, same types, plus
/// the offer ticket and the network-terms flag; `revealWindow` is narrowed to uint16, which
/// holds every window `JobBook.create` accepts, ≤ MAX_REVEAL_WINDOW_BLOCKS), ordered so that
/// each task move touches as few slots as it can (a cold slot read costs 2,100 gas). `jobOf`
/// rebuilds the interface's Job from it.
/// slot 0, read by every task move (draw, accept, commit, reveal, finalize): status, shape,
/// windows, audit rate, the stage count and the draw's requirements; slot 1, read and written
/// by a draw and a finalize: the round counters, the offer ticket and the collateral; slot 2,
/// read by a draw (expiry) and a finalize (reward, compute); slot 3 and 4, read by a finalize;
/// slot 8, read by a draw only when the job sets network terms (`networkTerms`), and by the
/// pending queue.
struct JobRecord {
    // slot 0
    IJobMarket.JobStatus status;
    uint32 shards;
    uint32 acceptWindow;
    uint32 computeWindow;
    uint16 revealWindow;
    uint32 challengeWindow;
    uint16 auditRateBps;
    uint8 deviceClass;
    uint32 memoryMiB;
    uint16 preferredRegion;
    uint16 checkpointLeaves;
    /// @dev The stages a model is split into (0 and 1: not split): in slot 0, so that the
    /// accept, finalize and draw of a task of an unsplit job read no other slot to learn it.
    uint8 stages;
    /// @dev Whether `minFetchKiBps` or `maxRpcRttMs` is set (slot 8 is read by a draw only then).
    bool networkTerms;
    // slot 1
    uint32 currentRound;
    uint32 nextIndex;
    /// @dev Shard tasks of the current round finalized, and revealed in their current attempt
    /// (16 bits each: `JobBook.create` refuses more than MAX_SHARDS shards).
    uint16 finalizedInRound;
    uint16 revealedInRound;
    uint32 pendingCount;
    /// @dev The ticket block whose hash the job's next offers are drawn from
    /// (FutureRandomness), 0 when none is requested; cleared when the tasks it may draw
    /// change (the aggregation task is unlocked or sent back, the round advances) and when it is used. It
    /// shares the slot a draw writes anyway. A uint32 block number: `requestOffers` refuses a
    /// ticket past 2^32 (about 68 years of 0.5 s blocks) instead of wrapping.
    uint32 offerTicket;
    uint96 workerCollateral;
    // slot 2
    uint64 expiryBlock;
    uint32 rounds;
    uint96 rewardPerTask;
    uint64 computePerTask;
    // slot 3
    address submitter;
    uint96 auditFee;
    // slot 4
    uint128 escrow;
    uint128 surplus;
    bytes32 manifestHash;
    bytes32 checkpointHash;
    string checkpointCid;
    // slot 8: the network terms (zero = none; read by an offer only when `networkTerms`)
    uint32 minFetchKiBps;
    uint32 maxRpcRttMs;
    /// @dev The first slot of the pending queue (tasks sent back, drawn first in, first out:
    /// `pending[jobId][pendingHead … pendingHead + pendingCount)`).
    uint32 pendingHead;
}

/// @notice Everything JobMarket stores, in one struct so that its libraries can be handed the
/// whole state (Uniswap v4 / BoLD style). Totals share a slot: a payout updates both totals in
/// one store.
struct MarketStore {
    mapping(uint256 jobId => JobRecord) jobs;
    mapping(uint256 taskId => IJobMarket.Task) tasks;
    mapping(uint256 jobId => mapping(uint256 slot => uint256 taskId)) pending;
    mapping(uint256 jobId => string cid) revealedCheckpointCid;
    mapping(address submitter => uint256[] jobIds) jobsBySubmitter;
    mapping(address account => uint256 amount) credits;
    uint128 totalEscrow;
    uint128 totalCredits;
    uint256 jobCount;
    /// @dev The distinct workers that declined a task (TaskRecovery.decline), at most
    /// TaskRecovery.MAX_DECLINES.
    mapping(uint256 taskId => address[]) declinedBy;
}

/// @notice JobMarket's collaborators and fixed parameters, handed to its libraries.
struct MarketDeps {
    IWorkerPool pool;
    IStakeManager stakeManager;
    IIdentityRegistry registry;
    uint16 timeoutPenaltyBps;
    uint16 acceptPenaltyBps;
    uint96 auditorCollateral;
    uint96 auditorPenalty;
}

/// @title TaskFlow: the task moves JobMarket and TaskRecovery share
/// @notice Offering a task, sending it back, closing it, paying it, crediting and refunding.
/// Internal functions: each caller carries its own copy.
library TaskFlow {
    uint8 internal constant FLAG_AUDIT_COMMITTED = 1;
    uint8 internal constant FLAG_AUDIT_REVEALED = 2;
    uint8 internal constant FLAG_CHALLENGED = 4;
    /// @dev The audit draw of this commitment was settled (no audit, waived, or an auditor drawn).
    uint8 internal constant FLAG_AUDIT_SETTLED = 8;
    /// @dev An audit was drawn: after an auditor's timeout another one is due, whatever the rate.
    uint8 internal constant FLAG_AUDIT_DUE = 16;
    /// @dev An auditor is assigned (`auditor` is set): the hot paths test this bit instead of
    /// reading the auditor's slot (a cold read) for every unaudited task.
    uint8 internal constant FLAG_AUDITOR = 32;
    /// @dev A stage task in its own dispute whose group was sent back meanwhile: whatever the
    /// verdict, it is not paid (TaskRecovery.resolve sends it back too).
    uint8 internal constant FLAG_GROUP_RESET = 64;
    /// @dev A running stage task whose worker reported it is blocked on another stage: its
    /// deadline passing costs it nothing (TaskRecovery.timeout).
    uint8 internal constant FLAG_STALLED = 128;
    /// @dev The same bit on an aggregation task (never a stage, so never stalled): it won its
    /// audit's game before its round's shards were all finalized and waits for them in a
    /// challenge window already over; its worker holds no collateral any more (the game
    /// unlocked it; its pool slot was freed at its reveal), so its finalize unlocks nothing.
    uint8 internal constant FLAG_RELEASED = 128;

    /// @dev `drawNext` outcomes.
    uint8 internal constant DRAWN = 0;
    uint8 internal constant NOTHING_TO_DRAW = 1;
    uint8 internal constant NO_ELIGIBLE_WORKER = 2;

    /// @dev The most stages a job's model may be split into (bounds the loop over a group).
    uint8 internal constant MAX_STAGES = 8;
    /// @dev Draws a stage offer tries before it gives up (the task then waits to be drawn).
    uint256 internal constant STAGE_DRAWS = 8;

    /// @dev `drawNext` outcome: the next task became drawable after the job's offer ticket was
    /// requested (sent back since), so its offer waits for the next ticket.
    uint8 internal constant WAIT_FOR_TICKET = 3;

    /// @dev The random base of the offers drawn from the job's ticket: the hash of the ticket
    /// block, which did not exist when the ticket was requested. Reverts
    /// `JobOffersNotReady` before the ticket's next block.
    function offerBase(JobRecord storage j, uint256 jobId) internal view returns (bytes32) {
        uint64 ticket = j.offerTicket;
        if (block.number <= ticket) revert IJobMarket.JobOffersNotReady(jobId, ticket);
        return FutureRandomness.draw(ticket, bytes32(jobId));
    }

    /// @dev The seed of task `id`'s offer from a ticket's base. A task is drawn from one ticket
    /// at most once (one sent back waits for a later ticket), so no two offers share a seed.
    function offerSeed(bytes32 base, uint256 id) internal pure returns (bytes32 seed) {
        assembly ("memory-safe") {
            // keccak256(abi.encode(base, id)), hashed in the scratch space
            mstore(0x00, base)
            mstore(0x20, id)
            seed := keccak256(0x00, 0x40)
        }
    }

    /// @dev Ask for the job's next offer ticket and hold the worker tree from it to the end of
    /// its epoch (WorkerPool.holdOffers): the offers it settles are drawn from weights fixed
    /// before its hash existed.
    function requestOffers(MarketDeps memory d, JobRecord storage j, uint256 jobId) internal {
        uint64 ticket = FutureRandomness.ticket();
        if (ticket > type(uint32).max) revert IJobMarket.JobOffersNotReady(jobId, ticket);
        j.offerTicket = uint32(ticket);
        emit IJobMarket.OffersRequested(jobId, ticket);
        d.pool.holdOffers(ticket);
    }

    /// @dev Offer task `id` to a worker drawn from the pool by `seed`, never `exclude` (the
    /// worker that failed it), and for a stage task never a worker of another stage of its
    /// group. Returns false when none is eligible.
    function offer(
        MarketStore storage s,
        MarketDeps memory d,
        JobRecord storage j,
        IWorkerPool.Requirements memory req,
        uint256 id,
        address exclude,
        bytes32 seed
    ) internal returns (bool) {
        req.exclude = exclude;
        bool staged = isStage(j, id);
        address worker = staged
            ? assignStage(s, d, _copy(req), seed, id, j.stages) // assignStage adjusts its copy
            : d.pool.assign(seed, req, false);
        if (worker == address(0)) return false;
        _offered(s, j, id, worker, staged);
        return true;
    }

    /// @dev The job's draw requirements (`exclude` unset): a batch reads them once for all its offers.
    function requirements(JobRecord storage j) internal view returns (IWorkerPool.Requirements memory req) {
        req = IWorkerPool.Requirements(j.deviceClass, j.memoryMiB, j.preferredRegion, j.workerCollateral, address(0), 0, 0);
        if (j.networkTerms) (req.minFetchKiBps, req.maxRpcRttMs) = (j.minFetchKiBps, j.maxRpcRttMs);
    }

    function _copy(IWorkerPool.Requirements memory r) private pure returns (IWorkerPool.Requirements memory) {
        return IWorkerPool.Requirements(
            r.deviceClass, r.memoryMiB, r.preferredRegion, r.collateral, r.exclude, r.minFetchKiBps, r.maxRpcRttMs
        );
    }

    /// @dev Record task `id`'s offer to `worker` (and align its group's deadlines).
    function _offered(MarketStore storage s, JobRecord storage j, uint256 id, address worker, bool staged) private {
        (uint256 jobId, uint32 round, uint32 index) = TaskIds.decode(id);
        uint64 deadline = uint64(block.number) + j.acceptWindow;
        IJobMarket.Task storage t = s.tasks[id];
        t.worker = worker;
        t.status = IJobMarket.TaskStatus.Offered;
        t.deadline = deadline;
        emit IJobMarket.TaskDrawn(id, jobId, worker, round, index, deadline);
        if (staged) alignStages(s, id, j.stages, deadline + j.computeWindow);
    }

    /// @dev A worker for stage task `id` that holds no other stage of its group (the stages
    /// run at once, each in the memory of one): the pool excludes the worker of the stage
    /// before it (or the one that failed this task), and the draw is tried again from a fresh
    /// seed, up to STAGE_DRAWS times, while it lands on a worker of another stage. Unless the
    /// job names a region, the draw prefers the region of the neighbour stage's worker.
    function assignStage(
        MarketStore storage s,
        MarketDeps memory d,
        IWorkerPool.Requirements memory req,
        bytes32 seed,
        uint256 id,
        uint8 stages
    ) private returns (address) {
        address[] memory others = _groupWorkers(s, id, stages);
        uint256 stage = uint32(id) % stages;
        if (req.exclude == address(0) && stage != 0) req.exclude = others[stage - 1];
        // Consecutive stages trade activations and gradients every micro-batch: unless the job
        // names a region, a stage prefers its neighbour's (the pool's region boost).
        if (req.preferredRegion == 0) req.preferredRegion = _neighbourRegion(d, others, stage);
        for (uint256 attempt = 0; attempt < STAGE_DRAWS; ++attempt) {
            bytes32 attemptSeed = attempt == 0 ? seed : keccak256(abi.encode(seed, attempt));
            address candidate = d.pool.sample(attemptSeed, req, false);
            if (candidate == address(0)) return address(0);
            if (!_contains(others, candidate)) return d.pool.assign(attemptSeed, req, false);
        }
        return address(0);
    }

    /// @dev The region the worker of the stage before `stage` declares (of the stage after it
    /// when nobody holds the one before, as for the first stage); 0 (none) when neither is held.
    /// `others` is `_groupWorkers`: the stage before is at `stage - 1`, the one after at `stage`.
    function _neighbourRegion(MarketDeps memory d, address[] memory others, uint256 stage)
        private
        view
        returns (uint16)
    {
        address neighbour = stage != 0 ? others[stage - 1] : address(0);
        if (neighbour == address(0) && stage < others.length) neighbour = others[stage];
        return neighbour == address(0) ? 0 : d.registry.capabilityOf(neighbour).region;
    }

    /// @dev The workers holding the other stages of task `id`'s group, in stage order (zero at
    /// stages nobody holds: not drawn yet, or waiting to be drawn again).
    function _groupWorkers(MarketStore storage s, uint256 id, uint8 stages) private view returns (address[] memory others) {
        uint256[] memory ids = siblings(id, stages);
        others = new address[](ids.length);
        for (uint256 i = 0; i < ids.length; ++i) {
            IJobMarket.Task storage t = s.tasks[ids[i]];
            if (t.status >= IJobMarket.TaskStatus.Offered && t.status <= IJobMarket.TaskStatus.Finalized) {
                others[i] = t.worker;
            }
        }
    }

    /// @dev Whether task `id` of job `j` is a stage: a shard task of a job split into stages
    /// (the round's aggregation task never is).
    function isStage(JobRecord storage j, uint256 id) internal view returns (bool) {
        return j.stages > 1 && uint32(id) < j.shards;
    }

    /// @dev The ids of the other stages of task `id`'s group, in stage order (so the stage
    /// before `id`'s, if any, is at its stage index - 1). At most MAX_STAGES - 1.
    function siblings(uint256 id, uint8 stages) internal pure returns (uint256[] memory ids) {
        (uint256 jobId, uint32 round, uint32 index) = TaskIds.decode(id);
        uint32 first = index - index % stages;
        ids = new uint256[](stages - 1);
        uint256 n;
        for (uint32 k = first; k < first + stages; ++k) {
            if (k != index) ids[n++] = TaskIds.encode(jobId, round, k);
        }
    }

    /// @dev The first other stage of task `id`'s group that is neither Finalized nor past its
    /// challenge window (0: none; task ids are never 0): until then `id` is not paid.
    function stageBlocker(MarketStore storage s, uint256 id, uint8 stages) internal view returns (uint256) {
        uint256[] memory ids = siblings(id, stages);
        for (uint256 i = 0; i < ids.length; ++i) {
            IJobMarket.Task storage t = s.tasks[ids[i]];
            bool settled = t.status == IJobMarket.TaskStatus.Finalized
                || (t.status == IJobMarket.TaskStatus.ChallengeWindow && block.number > t.deadline);
            if (!settled) return ids[i];
        }
        return 0;
    }

    function _contains(address[] memory list, address account) private pure returns (bool) {
        for (uint256 i = 0; i < list.length; ++i) {
            if (list[i] == account) return true;
        }
        return false;
    }

    /// @dev The stages of a group run at once and wait on each other's messages: every
    /// running stage of task `id`'s group (other than `id`) not yet past its deadline gets a
    /// commit deadline of at least `deadline`. At most MAX_STAGES - 1 tasks.
    function alignStages(MarketStore storage s, uint256 id, uint8 stages, uint64 deadline) internal {
        uint256[] memory ids = siblings(id, stages);
        for (uint256 i = 0; i < ids.length; ++i) {
            IJobMarket.Task storage t = s.tasks[ids[i]];
            // An overdue stage is not rescued: it is left to its timeout.
            if (t.status == IJobMarket.TaskStatus.Running && t.deadline < deadline && block.number <= t.deadline) {
                t.deadline = deadline;
                emit IJobMarket.StageDeadlineExtended(ids[i], deadline);
            }
        }
    }

    /// @dev Offer the job's next task, under the job's `requirements` `req`, from random base
    /// `base` of ticket `ticket` (the caller checked that the job is Active and not past its
    /// expiry): tasks sent back first (a queue, oldest first; all belong to the current round),
    /// never to the worker that failed them (kept in `worker` while Pending), and only those sent
    /// back by the ticket's block (a Pending task's `deadline` is the block it came back in): the
    /// first one sent back later, and all behind it, wait for the next ticket; then the round's
    /// next shard; then its aggregation task, once every shard task of the round has revealed
    /// its result (never for the worker that last failed it, kept in its `worker`).
    /// Changes nothing when it returns NOTHING_TO_DRAW, NO_ELIGIBLE_WORKER or WAIT_FOR_TICKET
    /// (nothing left for this ticket, but tasks sent back since wait for the next); a batch stops
    /// there and keeps what it drew.
    function drawNext(
        MarketStore storage s,
        MarketDeps memory d,
        JobRecord storage j,
        IWorkerPool.Requirements memory req,
        uint256 jobId,
        bytes32 base,
        uint64 ticket
    ) internal returns (uint256 id, uint8 outcome) {
        uint32 pendingCount = j.pendingCount;
        if (pendingCount != 0) {
            uint32 head = j.pendingHead;
            id = s.pending[jobId][head];
            IJobMarket.Task storage t = s.tasks[id];
            // INVARIANT: no offer is drawn from a hash that was public when its task became drawable.
            if (t.deadline <= ticket) {
                if (!offer(s, d, j, req, id, t.worker, offerSeed(base, id))) return (id, NO_ELIGIBLE_WORKER);
                j.pendingHead = head + 1;
                j.pendingCount = pendingCount - 1;
                return (id, DRAWN);
            }
        }
        uint32 next = j.nextIndex;
        uint32 shards = j.shards;
        // INVARIANT: the aggregation task is drawable only once every shard task of the round is revealed.
        if (next > shards || (next == shards && j.revealedInRound != shards)) {
            return (id, pendingCount != 0 ? WAIT_FOR_TICKET : NOTHING_TO_DRAW);
        }
        id = TaskIds.encode(jobId, j.currentRound, next);
        // A shard is drawn once per round this way (never sent back here); the aggregation
        // task may come back here, keeping the worker that failed it.
        address exclude = next == shards ? s.tasks[id].worker : address(0);
        if (!offer(s, d, j, req, id, exclude, offerSeed(base, id))) return (id, NO_ELIGIBLE_WORKER);
        j.nextIndex = next + 1;
    }

    /// @dev Whether the job has a task to draw (pending, or the round's next shard or its
    /// unlocked aggregation task).
    function hasDrawable(JobRecord storage j) internal view returns (bool) {
        if (j.pendingCount != 0) return true;
        uint32 next = j.nextIndex;
        uint32 shards = j.shards;
        return next < shards || (next == shards && j.revealedInRound == shards);
    }

    /// @dev Shard task `index` of job `j` revealed its result: once every shard of the round
    /// has, the aggregation task becomes drawable, from a ticket asked for now. (Not while a
    /// drawn aggregation still waits for its own game to end after an earlier reset: that
    /// game's end sends it back, `sendBack`.)
    function shardRevealed(MarketDeps memory d, JobRecord storage j, uint256 jobId) internal {
        uint16 revealed = j.revealedInRound + 1;
        j.revealedInRound = revealed;
        if (revealed == j.shards && j.nextIndex == revealed) requestOffers(d, j, jobId);
    }

    function openWindow(IJobMarket.Task storage t, uint256 id, uint64 blocks) internal {
        uint64 deadline = uint64(block.number) + blocks;
        t.status = IJobMarket.TaskStatus.ChallengeWindow;
        t.deadline = deadline;
        emit IJobMarket.ChallengeWindowOpened(id, deadline);
    }

    /// @dev A task whose worker failed (or that went back through no fault of its own): queue
    /// it as pending, where a later ticket's draw takes it (still excluding that
    /// worker, kept in `worker`); its `deadline` records the block it came back in, so that no
    /// ticket whose hash was already public draws it. An aggregation task is not queued: it is
    /// undrawn again (`nextIndex`), drawable once every shard is revealed (then from a ticket
    /// asked for after now). A shard whose result was revealed resets a drawn aggregation
    /// (`_unreveal`). On a job that is no longer Active, close and refund it instead.
    function sendBack(MarketStore storage s, MarketDeps memory d, JobRecord storage j, uint256 jobId, uint256 id)
        internal
    {
        IJobMarket.Task storage t = s.tasks[id];
        uint32 index = uint32(id);
        uint32 shards = j.shards;
        if (index < shards && t.status >= IJobMarket.TaskStatus.Revealed && t.status <= IJobMarket.TaskStatus.Disputed) {
            _unreveal(s, d, j, jobId, id);
        }
        if (j.status != IJobMarket.JobStatus.Active) {
            close(s, j, jobId, t, id);
            return;
        }
        t.flags = 0;
        t.auditor = address(0);
        t.result = bytes32(0);
        t.audit = bytes32(0);
        t.deadline = uint64(block.number);
        if (index == shards) {
            t.status = IJobMarket.TaskStatus.None;
            j.nextIndex = shards;
            // Drawable again at once: not from a hash that was public before now.
            if (j.revealedInRound == shards) j.offerTicket = 0;
        } else {
            t.status = IJobMarket.TaskStatus.Pending;
            s.pending[jobId][uint256(j.pendingHead) + j.pendingCount] = id;
            j.pendingCount += 1;
        }
        emit IJobMarket.TaskRequeued(id, jobId);
    }

    /// @dev Shard task `id`'s revealed result is discarded. If the round's aggregation task
    /// was drawn on it, the aggregation goes back undrawn, its worker and auditor losing
    /// nothing (a drawn one in its own game is flagged: the game's end sends it back).
    function _unreveal(MarketStore storage s, MarketDeps memory d, JobRecord storage j, uint256 jobId, uint256 id)
        private
    {
        uint16 revealed = j.revealedInRound;
        j.revealedInRound = revealed - 1;
        uint32 shards = j.shards;
        // Drawn on every shard's result (after an earlier reset it is flagged already).
        if (revealed != shards || j.nextIndex != shards + 1) return;
        uint256 agg = TaskIds.encode(jobId, j.currentRound, shards);
        IJobMarket.Task storage a = s.tasks[agg];
        // INVARIANT: an aggregation task is paid only on its round's final shard results.
        if (a.status == IJobMarket.TaskStatus.Disputed) {
            a.flags |= FLAG_GROUP_RESET;
            return;
        }
        // Offered to ChallengeWindow: never Pending (not queued) nor Finalized (paid after
        // every shard is finalized, and a finalized shard is never sent back).
        releaseAggregation(d, j, a, agg, id);
        sendBack(s, d, j, jobId, agg);
    }

    /// @dev Whether finalized task `id` (`t`) still holds its worker's collateral: all do but an
    /// aggregation task that won its audit's game (FLAG_RELEASED; the same bit on a stage is
    /// FLAG_STALLED, which may still be set when a stage that reported a stall is paid).
    function holdsCollateral(JobRecord storage j, IJobMarket.Task storage t, uint256 id) internal view returns (bool) {
        return t.flags & FLAG_RELEASED == 0 || uint32(id) != j.shards;
    }

    /// @dev Give task `t`'s worker its collateral `amount` back, and its pool slot while it
    /// still holds one (before its reveal: JobMarket.revealResult frees it).
    function returnCollateral(MarketDeps memory d, IJobMarket.Task storage t, uint256 amount) internal {
        if (t.status >= IJobMarket.TaskStatus.Revealed) d.pool.unlock(t.worker, amount);
        else d.pool.release(t.worker, amount);
    }

    /// @dev Aggregation task `id` (`t`) goes back through no fault of its worker (shard task
    /// `cause`'s result was discarded): its worker's and auditor's collateral and pool slots
    /// come back whole (what they still hold: none after a game on the audit, FLAG_RELEASED
    /// set and FLAG_AUDITOR cleared by its end), and the redraw may pick its worker again.
    function releaseAggregation(MarketDeps memory d, JobRecord storage j, IJobMarket.Task storage t, uint256 id, uint256 cause)
        internal
    {
        uint8 flags = t.flags;
        // INVARIANT: a reset aggregation's worker and auditor lose nothing.
        if (flags & FLAG_RELEASED == 0) returnCollateral(d, t, j.workerCollateral);
        if (flags & FLAG_AUDITOR != 0) d.pool.release(t.auditor, d.auditorCollateral);
        t.worker = address(0);
        emit IJobMarket.AggregationReset(id, cause);
    }

    function close(MarketStore storage s, JobRecord storage j, uint256 jobId, IJobMarket.Task storage t, uint256 id)
        internal
    {
        uint256 cost = Escrow.taskCost(j.rewardPerTask, j.auditFee);
        t.status = IJobMarket.TaskStatus.Closed;
        j.escrow -= uint128(cost);
        s.totalEscrow -= uint128(cost);
        credit(s, j.submitter, cost);
        emit IJobMarket.TaskClosed(id, cost);
        emitRefund(jobId, j.submitter, cost);
    }

    /// @dev Pay one task out of its job's escrow and move the job's counters on.
    function pay(
        MarketStore storage s,
        MarketDeps memory d,
        JobRecord storage j,
        uint256 jobId,
        IJobMarket.Task storage t,
        uint256 id,
        bool payAuditor
    ) internal {
        uint128 reward = j.rewardPerTask;
        uint128 fee = payAuditor ? j.auditFee : 0;
        // An unused audit fee stays in escrow as the job's surplus (same slot, no extra
        // store); it is refunded by refundSurplus, at completion, cancel or expiry. A task
        // finishing after its job was stopped refunds its fee at once: the stop refunded the
        // surplus there was, and nothing else would come for this fee.
        uint128 unused = payAuditor ? 0 : j.auditFee;
        if (unused != 0 && j.status != IJobMarket.JobStatus.Active) {
            fee = unused;
            unused = 0;
            credit(s, j.submitter, fee);
            emitRefund(jobId, j.submitter, fee);
        }
        j.escrow -= reward + fee;
        if (unused != 0) j.surplus += unused;
        s.totalEscrow -= reward + fee;
        credit(s, t.worker, reward);
        if (payAuditor) credit(s, t.auditor, fee);
        emit IJobMarket.TaskFinalized(id, t.worker, reward, payAuditor ? t.auditor : address(0), payAuditor ? fee : 0);

        (, uint32 round, uint32 index) = TaskIds.decode(id);
        if (index < j.shards) {
            // (The aggregation task became drawable when the last shard revealed.)
            j.finalizedInRound += 1;
            return;
        }
        // The aggregation task's result is the next round's starting checkpoint; its tasks are
        // drawn from a ticket asked for now.
        j.currentRound = round + 1;
        j.nextIndex = 0;
        j.finalizedInRound = 0;
        j.revealedInRound = 0;
        j.checkpointHash = t.result;
        j.checkpointCid = s.revealedCheckpointCid[jobId];
        emit IJobMarket.RoundAdvanced(jobId, round + 1, j.checkpointCid, t.result);
        if (round + 1 == j.rounds && j.status == IJobMarket.JobStatus.Active) {
            j.status = IJobMarket.JobStatus.Completed;
            emit IJobMarket.JobCompleted(jobId);
            emitRefund(jobId, j.submitter, takeSurplus(s, j));
        }
        _nextOffers(d, j, jobId);
    }

    /// @dev New tasks became drawable (a new round): on an Active job
    /// they get a ticket asked for now (not one asked before them), else none.
    function _nextOffers(MarketDeps memory d, JobRecord storage j, uint256 jobId) private {
        if (j.status == IJobMarket.JobStatus.Active) requestOffers(d, j, jobId);
        else j.offerTicket = 0;
    }

    /// @dev Reputation and compute grow only from work someone else paid for: a worker's own
    /// jobs leave its record (and so its draw weight) as it is.
    function recordCompleted(MarketDeps memory d, JobRecord storage j, address worker) internal {
        if (worker != j.submitter) d.registry.recordTaskCompleted(worker, j.computePerTask);
    }

    /// @dev Credit the job's surplus (unused audit fees) to its submitter.
    function takeSurplus(MarketStore storage s, JobRecord storage j) internal returns (uint256 amount) {
        amount = j.surplus;
        if (amount == 0) return 0;
        j.surplus = 0;
        j.escrow -= uint128(amount);
        s.totalEscrow -= uint128(amount);
        credit(s, j.submitter, amount);
    }

    function emitRefund(uint256 jobId, address submitter, uint256 amount) internal {
        if (amount != 0) emit IJobMarket.Refunded(jobId, submitter, amount);
    }

    function credit(MarketStore storage s, address account, uint256 amount) internal {
        if (amount == 0) return;
        s.credits[account] += amount;
        s.totalCredits += uint128(amount);
    }

    function activeJob(MarketStore storage s, uint256 jobId) internal view returns (JobRecord storage j) {
        j = s.jobs[jobId];
        if (j.status == IJobMarket.JobStatus.None) revert IJobMarket.JobNotFound(jobId);
        if (j.status != IJobMarket.JobStatus.Active) revert IJobMarket.JobNotActive(jobId, j.status);
    }
}
