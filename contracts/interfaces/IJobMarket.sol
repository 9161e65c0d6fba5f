// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @title IJobMarket: training jobs, their tasks and their money
/// @notice A submitter escrows `(shards + 1) × rounds × (rewardPerTask + auditFee)` for a
/// job. Every round has `shards` training tasks and one aggregation task (index `shards`)
/// whose inputs are that round's results; round r + 1 trains from round r's aggregated
/// checkpoint (the aggregation task's revealed result CID and root). A task id is the pure
/// function `jobId << 64 | round << 32 | index` (TaskIds). No call loops over tasks or
/// workers: a task's state is created when it is first drawn, rounds advance by counters,
/// and training tasks sent back (timeouts, lost disputes) wait in a per-job pending queue
/// that is drawn first, never for the worker that failed them (a Pending task's `worker` is
/// that worker). The aggregation task is drawn as soon as every shard task of its round has
/// revealed its result (it computes while their challenge windows run) and paid only once
/// every one is finalized; a revealed shard result that is discarded afterwards (its
/// dispute lost) sends a drawn aggregation back undrawn, unpaid and unpenalised
/// (`AggregationReset`). An aggregation task is never queued: sent back, it is undrawn
/// again (`TaskRequeued`), its failed worker kept in `worker` and excluded from the redraw.
///
/// Task life: Pending ─draw─▶ Offered ─accept─▶ Running ─commit─▶ Committed
/// (on an audited job the commit gets a ticket: the hash of a block after it decides the
/// audit, so the worker cannot know it when it commits; `settleAudit` draws the auditor,
/// which commits before the worker reveals) ─reveal─▶ Revealed (waiting for the auditor's
/// reveal) / ChallengeWindow (no audit or the audit matched) ─window over, finalize─▶
/// Finalized. A worker silent after its commitment loses its whole collateral, as losing
/// a dispute would; so does an auditor silent after its own. A mismatching audit moves the task to Disputed with its funds
/// locked; so does a challenge inside the window (`openChallenge`, dispute game only: the
/// DisputeGame, which reads `disputeTerms`). The game settles stakes itself and then calls
/// `resolveDispute`, which only moves the task: a worker that lost has its task sent back
/// to be drawn for another worker; a worker that won an audit dispute is paid (without the
/// audit fee; an aggregation task whose shards are not all finalized yet waits for them
/// in a challenge window already over), and one that won against a challenger gets its challenge window back with
/// the blocks it had left. Every deadline has
/// a permissionless `timeoutTask` that moves the task on and penalises who was late. On a
/// cancelled or expired job nothing new is drawn: unspent escrow is refunded at once, tasks
/// in flight finish and are paid, Pending/Offered ones are closed with `closeTask` and
/// refunded.
///
/// Money: rewards, audit fees and refunds are credited in this contract and pulled with
/// `withdraw()`; penalties and slashes are credited in the StakeManager. Conservation:
/// token.balanceOf(this) == totalEscrow() + totalCredits().
interface IJobMarket {
    enum JobStatus {
        None,
        Active,
        Completed,
        Cancelled,
        Expired
    }

    enum TaskStatus {
        None,
        Pending,
        Offered,
        Running,
        Committed,
        Revealed,
        ChallengeWindow,
        Disputed,
        Finalized,
        Closed
    }

    /// @notice What a submitter asks for. Windows are in blocks. `checkpointLeaves` is the
    /// number of checkpoints a training task commits to (steps 0, I, 2I, …, K: the leaves of
    /// its Merkle root), which the dispute game bisects over; an aggregation task commits to
    /// one checkpoint hash. `computePerTask` is the
    /// manifest-defined compute unit credited to the worker's history per finished task
    /// (for example samples × local epochs of one shard). `preferredRegion` 0 = none.
    /// `minFetchKiBps` and `maxRpcRttMs` are network terms on the worker drawn for a task
    /// (0 = none; see IWorkerPool: declared figures, fresh, not cooling down after a timeout);
    /// an auditor is drawn without them, so a job's network terms never thin its audits.
    /// `stages` (1 … MAX_STAGES, dividing `shards`) splits the model by layers: the round's
    /// shard tasks come in groups of `stages` consecutive indices, one per stage, that run
    /// at once and exchange activations and gradients. A stage is never offered to the
    /// worker of another stage of its group; without `preferredRegion` it prefers the region
    /// its neighbour stage's worker declares (low latency between consecutive stages), and
    /// while a stage of a group is offered or accepted the group's running stages keep at
    /// least a compute window from then (they wait on it).
    /// A split job draws no audits (`auditRateBps` must be 0): a stage's inputs are its
    /// siblings' results, so its results are checked by challenges in the challenge window.
    struct JobParams {
        string manifestCid;
        bytes32 manifestHash;
        string initialCheckpointCid;
        bytes32 initialCheckpointHash;
        uint32 shards;
        uint32 rounds;
        uint96 rewardPerTask;
        uint96 auditFee;
        uint96 workerCollateral;
        uint32 acceptWindow;
        uint32 computeWindow;
        uint32 revealWindow;
        uint32 challengeWindow;
        uint8 deviceClass;
        uint32 memoryMiB;
        uint16 preferredRegion;
        uint16 auditRateBps;
        uint64 computePerTask;
        uint64 expiryBlock;
        uint16 checkpointLeaves;
        uint32 minFetchKiBps;
        uint32 maxRpcRttMs;
        uint8 stages;
    }

    /// @notice A job as stored. `escrow` is what the job still holds here, `surplus` the
    /// part of it that is already free (audit fees of tasks finalized without an audit),
    /// refunded by `refundSurplus` and automatically at completion, cancel and expiry (a task finalized after its job stopped refunds its unused fee at once). `nextIndex` is the next index of the current round to give
    /// an id to (`shards` = the aggregation task, `shards + 1` = all drawn);
    /// `finalizedInRound` counts finalized shard tasks of the current round, `revealedInRound`
    /// those whose result of their current attempt is revealed (the round's aggregation task
    /// is drawn once every one is, and paid once every one is finalized).
    struct Job {
        address submitter;
        JobStatus status;
        uint32 shards;
        uint32 rounds;
        uint96 rewardPerTask;
        uint96 auditFee;
        uint64 expiryBlock;
        uint96 workerCollateral;
        uint32 acceptWindow;
        uint32 computeWindow;
        uint32 revealWindow;
        uint32 challengeWindow;
        uint16 auditRateBps;
        uint8 deviceClass;
        uint32 memoryMiB;
        uint16 preferredRegion;
        uint64 computePerTask;
        uint32 currentRound;
        uint32 nextIndex;
        uint32 finalizedInRound;
        uint32 pendingCount;
        uint16 checkpointLeaves;
        uint128 escrow;
        uint128 surplus;
        bytes32 manifestHash;
        bytes32 checkpointHash;
        string checkpointCid;
        uint32 minFetchKiBps;
        uint32 maxRpcRttMs;
        uint8 stages;
        uint32 revealedInRound;
    }

    /// @notice A task as stored. `deadline` is the block the current phase ends (accept,
    /// commit, audit commit, reveal or challenge window). `result` holds the worker's
    /// commitment, then its revealed root; `audit` the auditor's commitment, then its root.
    /// `flags`: bit 0 auditor committed, bit 1 auditor revealed, bit 2 challenged (the
    /// dispute was opened by `openChallenge`; `deadline` then holds the blocks its challenge
    /// window had left), bit 3 the audit draw was settled, bit 4 an audit is due, bit 5 an
    /// auditor is assigned (`auditor` is set).
    struct Task {
        address worker;
        TaskStatus status;
        uint64 deadline;
        uint8 flags;
        address auditor;
        bytes32 result;
        bytes32 audit;
    }

    /// @notice Market-wide parameters, fixed at deployment.
    /// @param timeoutPenaltyBps share of a late worker's collateral taken by `penalize`
    /// (credited to the submitter) when it misses the commit or reveal deadline
    /// @param acceptPenaltyBps share of the collateral taken when it misses the accept deadline
    /// @param auditorCollateral stake an auditor must have free; locked while it audits (at
    /// least MIN_COLLATERAL: it is the auditor's bond in the game of a mismatch)
    /// @param auditorPenalty taken from an auditor that misses an audit deadline
    struct MarketConfig {
        uint16 timeoutPenaltyBps;
        uint16 acceptPenaltyBps;
        uint96 auditorCollateral;
        uint96 auditorPenalty;
    }

    /// @notice What the dispute game needs to know of a task, in one call.
    /// @param challenged the task is Disputed through `openChallenge` (not an audit)
    /// @param aggregation the task is its round's aggregation task (one checkpoint, no bisection)
    /// @param leaves the job's checkpoint leaves per training task
    /// @param root the worker's revealed root; `auditRoot` the auditor's revealed root
    /// @param submitter the job's submitter (a game it or its worker plays is self-dealt)
    struct DisputeTerms {
        TaskStatus status;
        bool challenged;
        bool aggregation;
        uint16 leaves;
        address worker;
        address auditor;
        bytes32 root;
        bytes32 auditRoot;
        uint96 collateral;
        uint96 auditorCollateral;
        address submitter;
    }

    // ---------------------------------------------------------------- errors

    /// @notice No job has id `jobId`.
    error JobNotFound(uint256 jobId);
    /// @notice The job is not Active (cancelled, expired or completed).
    error JobNotActive(uint256 jobId, JobStatus status);
    /// @notice Only the job's submitter may do this.
    error JobNotSubmitter(uint256 jobId, address caller);
    /// @notice The caller holds no ROLE_SUBMITTER identity.
    error JobSubmitterNotRegistered(address account);
    /// @notice The job's escrow does not fit 128 bits.
    error JobEscrowTooLarge(uint256 escrow);
    /// @notice Shard count and rounds must both be ≥ 1, and shards ≤ 65,535 (a round's
    /// counters are 16 bits).
    error JobInvalidShape(uint32 shards, uint32 rounds);
    /// @notice A training task must commit to at least 1 checkpoint.
    error JobInvalidCheckpointLeaves(uint16 checkpointLeaves);
    /// @notice Every window (accept, compute, reveal, challenge) must be at least `minimum` blocks.
    error JobWindowTooShort(uint32 minimum);
    /// @notice The reveal window must end while the audit ticket's block hash is readable.
    error JobRevealWindowTooLong(uint32 revealWindow, uint32 maximum);
    /// @notice The challenge window must be at least the compute window, so a third party can
    /// re-run the task and challenge it in time.
    error JobChallengeWindowTooShort(uint32 challengeWindow, uint32 computeWindow);
    /// @notice The worker collateral (also a challenger's bond) must be at least `minimum`: the
    /// reward per task, and MIN_COLLATERAL.
    error JobCollateralTooLow(uint96 collateral, uint96 minimum);
    /// @notice The worker collateral must be at most `maximum`, MAX_COLLATERAL_PER_REWARD × the
    /// reward per task.
    error JobCollateralTooHigh(uint96 collateral, uint256 maximum);
    /// @notice A job must pay its tasks: the reward per task must be nonzero.
    error JobRewardZero();
    /// @notice The expiry block must lie in the future.
    error JobInvalidExpiry(uint64 expiryBlock);
    /// @notice The audit rate is above 10_000 bps, or not 0 on a job split into stages.
    error JobInvalidAuditRate(uint16 auditRateBps);
    /// @notice A network term is above the bound of what a worker can declare
    /// (`minFetchKiBps > MAX_FETCH_KIBPS` or `maxRpcRttMs > MAX_RPC_RTT_MS`).
    error JobInvalidNetworkTerms(uint32 minFetchKiBps, uint32 maxRpcRttMs);
    /// @notice `stages` is 0, above MAX_STAGES or does not divide `shards`.
    error JobInvalidStages(uint8 stages, uint32 shards);
    /// @notice The escrow pulled differs from what the job needs (fee-on-transfer token).
    error JobEscrowMismatch(uint256 expected, uint256 received);
    /// @notice The job's expiry block has passed: call `expireJob`.
    error JobPastExpiry(uint256 jobId, uint64 expiryBlock);
    /// @notice `expireJob` before the expiry block.
    error JobNotExpired(uint256 jobId, uint64 expiryBlock);
    /// @notice No task of the job can be drawn now (round's shard tasks still running).
    error JobNothingToDraw(uint256 jobId);
    /// @notice No eligible worker was found within the pool's draw attempts.
    error JobNoEligibleWorker(uint256 jobId, uint256 taskId);
    /// @notice The job's offers are drawn from the hash of block `ticket`: draw from block
    /// ticket + 1 on (until the ticket's epoch ends; a later call asks for a new ticket).
    error JobOffersNotReady(uint256 jobId, uint64 ticket);
    /// @notice The task is not Offered.
    error TaskNotOffered(uint256 taskId);
    /// @notice The task is not Running.
    error TaskNotRunning(uint256 taskId);
    /// @notice The task is not Committed.
    error TaskNotCommitted(uint256 taskId);
    /// @notice The task has no auditor waiting to commit.
    error TaskNotAwaitingAudit(uint256 taskId);
    /// @notice The task's auditor has not committed yet: the worker may not reveal.
    error TaskAuditNotCommitted(uint256 taskId);
    /// @notice The task's audit draw drew an audit: `settleAudit` draws its auditor first.
    error TaskAuditPending(uint256 taskId);
    /// @notice The task has no audit draw to settle (not Committed, already settled, or not audited).
    error TaskAuditNotDue(uint256 taskId);
    /// @notice The auditor cannot reveal now (not committed, already revealed, or wrong state).
    error TaskAuditNotRevealable(uint256 taskId);
    /// @notice The task is not in its challenge window.
    error TaskNotInChallengeWindow(uint256 taskId);
    /// @notice The challenge window is still open until `deadlineBlock`.
    error TaskChallengeWindowOpen(uint256 taskId, uint64 deadlineBlock);
    /// @notice Stage task `taskId` waits for stage task `siblingId` of its group: a group's
    /// stages are paid together, once every one is past its challenge window.
    error TaskStageGroupUnsettled(uint256 taskId, uint256 siblingId);
    /// @notice Aggregation task `taskId` is paid only once every shard task of its round is
    /// finalized (`finalized` of `shards` are): a shard still in its window or its dispute
    /// may yet be sent back, which resets the aggregation.
    error TaskAggregationInputsUnsettled(uint256 taskId, uint32 finalized, uint32 shards);
    /// @notice The task is not Disputed.
    error TaskNotDisputed(uint256 taskId);
    /// @notice Only the task's worker may do this.
    error TaskNotWorker(uint256 taskId, address caller);
    /// @notice Only the task's auditor may do this.
    error TaskNotAuditor(uint256 taskId, address caller);
    /// @notice The phase's deadline `deadlineBlock` has passed.
    error TaskDeadlinePassed(uint256 taskId, uint64 deadlineBlock);
    /// @notice The phase's deadline `deadlineBlock` has not passed yet.
    error TaskDeadlineNotPassed(uint256 taskId, uint64 deadlineBlock);
    /// @notice The task is in no phase that can time out.
    error TaskNotTimeoutable(uint256 taskId, TaskStatus status);
    /// @notice Task `taskId` is not a stage of a job split into stages (or already reported stalled).
    error TaskNotStage(uint256 taskId);
    /// @notice The revealed values do not hash to the commitment.
    error TaskCommitmentMismatch(uint256 taskId);
    /// @notice `closeTask` needs a task of a job that is no longer Active: Pending or Offered,
    /// or a stage past its challenge window whose group can never be whole.
    error TaskNotClosable(uint256 taskId);
    /// @notice The caller has no credits to withdraw.
    error MarketNothingToWithdraw(address account);
    /// @notice A batch is longer than `MAX_BATCH`.
    error MarketBatchTooLarge(uint256 length, uint256 max);
    /// @notice A MarketConfig value is out of range (bps above 10_000, penalty above collateral,
    /// auditor collateral below MIN_COLLATERAL).
    error MarketInvalidConfig();
    /// @notice The accept penalty is below `minimum` bps, the timeout penalty below the accept
    /// penalty, or the auditor penalty is zero (ignoring a duty would be free).
    error MarketPenaltyTooLow(uint16 acceptPenaltyBps, uint16 timeoutPenaltyBps, uint16 minimum);
    /// @notice Only a wired dispute game may call this.
    error MarketNotDisputeGame(address caller);
    /// @notice Only the deployer may wire, and only until the wiring is sealed.
    error MarketWiringClosed(address caller);
    /// @notice A CID is longer than `maximum` bytes.
    error MarketCidTooLong(uint256 length, uint256 maximum);

    // ---------------------------------------------------------------- events

    /// @notice Job `jobId` was created with `taskCount` tasks and `escrow` pulled.
    event JobCreated(
        uint256 indexed jobId,
        address indexed submitter,
        string manifestCid,
        bytes32 manifestHash,
        uint32 shards,
        uint32 rounds,
        uint256 taskCount,
        uint256 escrow
    );
    /// @notice Task `taskId` (job `jobId`, `round`, `index`) was offered to `worker` until `acceptDeadline`.
    event TaskDrawn(
        uint256 indexed taskId, uint256 indexed jobId, address indexed worker, uint32 round, uint32 index, uint64 acceptDeadline
    );
    /// @notice The job's next offers will be drawn from the hash of block `ticket` (readable
    /// from block ticket + 1 to the end of the ticket's epoch, FutureRandomness).
    event OffersRequested(uint256 indexed jobId, uint64 ticket);
    /// @notice `worker` accepted; it must commit by `commitDeadline`.
    event TaskAccepted(uint256 indexed taskId, address indexed worker, uint64 commitDeadline);
    /// @notice A running stage task's commit deadline moved to `commitDeadline`: a stage of its
    /// group was offered or accepted later, and the group's stages wait on each other.
    event StageDeadlineExtended(uint256 indexed taskId, uint64 commitDeadline);
    /// @notice `worker` committed to its result; it may reveal (after any auditor commits) until `revealDeadline`.
    event ResultCommitted(uint256 indexed taskId, address indexed worker, bytes32 commitment, uint64 revealDeadline);
    /// @notice The task's audit draw is settled from the hash of block `ticket` (readable from
    /// block ticket + 1 until the reveal deadline): at a commitment on an audited job, and for
    /// a new auditor after one timed out.
    event AuditRequested(uint256 indexed taskId, uint64 ticket);
    /// @notice The audit draw was settled and drew no audit (`audited` false).
    event AuditSettled(uint256 indexed taskId, bool audited);
    /// @notice `auditor` was drawn to re-execute the task; it must commit by `auditDeadline`.
    event AuditorDrawn(uint256 indexed taskId, address indexed auditor, uint64 auditDeadline);
    /// @notice No eligible auditor could be drawn: the task goes on unaudited; reveal by `revealDeadline`.
    event AuditWaived(uint256 indexed taskId, uint64 revealDeadline);
    /// @notice `auditor` committed to its own result; both reveal by `revealDeadline`.
    event AuditCommitted(uint256 indexed taskId, address indexed auditor, bytes32 commitment, uint64 revealDeadline);
    /// @notice `worker` revealed its result (Merkle root of its checkpoints and the result CID).
    event ResultRevealed(uint256 indexed taskId, address indexed worker, bytes32 root, string resultCid);
    /// @notice `auditor` revealed its root.
    event AuditRevealed(uint256 indexed taskId, address indexed auditor, bytes32 root);
    /// @notice The result stands (no audit, or it matched); it can be finalized after `deadline`.
    event ChallengeWindowOpened(uint256 indexed taskId, uint64 deadline);
    /// @notice The audit did not match: the task's funds are locked until the dispute is resolved.
    event TaskDisputed(uint256 indexed taskId, address indexed worker, address indexed auditor, bytes32 root, bytes32 auditRoot);
    /// @notice `challenger` challenged the revealed result; the dispute game runs, and the
    /// challenge window has `windowLeft` blocks left should the result stand.
    event TaskChallenged(uint256 indexed taskId, address indexed challenger, uint64 windowLeft);
    /// @notice The dispute game ended without a verdict: nobody was paid or slashed, the task is redone.
    event DisputeVoided(uint256 indexed taskId);
    /// @notice The dispute game settled the task's dispute (stakes were settled by the game).
    event DisputeResolved(uint256 indexed taskId, bool workerWon);
    /// @notice The task was finalized: `reward` credited to `worker`, `auditFee` to `auditor` (0 if none).
    event TaskFinalized(uint256 indexed taskId, address indexed worker, uint256 reward, address indexed auditor, uint256 auditFee);
    /// @notice `account` missed the deadline of phase `phase`; `penalty` was taken from its
    /// stake: burned when the submitter could have caused the miss (an offer or a run not
    /// committed, an audit not committed), else as a slash.
    event TaskTimedOut(uint256 indexed taskId, address indexed account, TaskStatus phase, uint256 penalty);
    /// @notice The task went back to its job's pending queue (drawn first, oldest first, from
    /// an offer ticket asked for after it came back); an aggregation task goes back undrawn
    /// instead, drawn again once every shard of its round is revealed.
    event TaskRequeued(uint256 indexed taskId, uint256 indexed jobId);
    /// @notice Stage task `taskId` was sent back with its group, unpaid and unpenalised (its
    /// worker's collateral released): stage task `causeTaskId` of the group failed after it
    /// started (it timed out running, lost or voided its dispute), and the stages it
    /// exchanged messages with must run again with its replacement; or `taskId` ran out of
    /// time waiting for stage `causeTaskId`, which nobody held (`causeTaskId == taskId`: it
    /// won its own dispute after its group was sent back, or its stall report held); or, on
    /// a stopped job, `taskId` was closed after its challenge window because stage
    /// `causeTaskId` of its group will never run (`TaskClosed` follows).
    event StageReset(uint256 indexed taskId, uint256 indexed causeTaskId);
    /// @notice Aggregation task `taskId`, drawn once every shard of its round was revealed,
    /// went back undrawn through no fault of its worker: shard task `causeTaskId`'s revealed
    /// result was discarded (its dispute lost or voided, its stage group sent back), so the
    /// aggregation's inputs change. Its worker and auditor get their whole collateral and pool
    /// slots back and nobody is paid; it is drawn again once every shard is revealed again
    /// (`causeTaskId == taskId`: it won its own dispute after that happened).
    event AggregationReset(uint256 indexed taskId, uint256 indexed causeTaskId);
    /// @notice The worker of running stage task `taskId` reported it is blocked on another stage.
    event StageStalled(uint256 indexed taskId, address indexed worker);
    /// @notice A task of a cancelled or expired job was closed; its cost refunded (to its
    /// decliners and submitter when closed by `JobInputsUnavailable`).
    event TaskClosed(uint256 indexed taskId, uint256 refund);
    /// @notice The offered worker declined task `taskId` (it could not fetch its inputs);
    /// `penalty` (the accept penalty) was burned from its stake.
    event TaskDeclined(uint256 indexed taskId, address indexed worker, uint256 penalty);
    /// @notice `worker`'s decline of task `taskId` was paid back (`amount` credited) when its
    /// job ended for unavailable inputs.
    event DeclineRepaid(uint256 indexed taskId, address indexed worker, uint256 amount);
    /// @notice Job `jobId` ended (Cancelled): MAX_DECLINES workers declined task `taskId`;
    /// `refund` was credited to the submitter after its decliners were paid back.
    event JobInputsUnavailable(uint256 indexed jobId, uint256 indexed taskId, uint256 refund);
    /// @notice Job `jobId` entered `round`, training from the given checkpoint.
    event RoundAdvanced(uint256 indexed jobId, uint32 round, string checkpointCid, bytes32 checkpointHash);
    /// @notice Every round of job `jobId` is done.
    event JobCompleted(uint256 indexed jobId);
    /// @notice The submitter cancelled the job; `refund` (never-drawn tasks) was credited.
    event JobCancelled(uint256 indexed jobId, uint256 refund);
    /// @notice The job passed its expiry block; `refund` (never-drawn tasks) was credited.
    event JobExpired(uint256 indexed jobId, uint256 refund);
    /// @notice `amount` of job `jobId`'s escrow was credited back to its submitter.
    event Refunded(uint256 indexed jobId, address indexed submitter, uint256 amount);
    /// @notice `game` may open, resolve and void disputes.
    event DisputeGameWired(address indexed game);
    /// @notice The wiring is sealed: no dispute game can be added any more.
    event WiringSealed();
    /// @notice `account` withdrew `amount` of its credits.
    event Withdrawn(address indexed account, uint256 amount);

    // ---------------------------------------------------------------- submitter

    /// @notice Create a job and pull its escrow with `transferFrom` (approve first).
    /// Reverts `JobSubmitterNotRegistered`, `JobInvalidShape`, `JobInvalidWindows`,
    /// `JobRewardZero`, `JobCollateralTooLow`, `JobCollateralTooHigh`, `JobInvalidExpiry`,
    /// `JobInvalidAuditRate`, `JobInvalidNetworkTerms`, `JobEscrowMismatch`.
    function createJob(JobParams calldata params) external returns (uint256 jobId);

    /// @notice `createJob` with an EIP-2612 permit for the escrow (a failed permit falls back
    /// to an existing allowance).
    function createJobWithPermit(JobParams calldata params, uint256 deadline, uint8 v, bytes32 r, bytes32 s)
        external
        returns (uint256 jobId);

    /// @notice Submitter only: stop drawing, refund never-drawn tasks at once.
    function cancelJob(uint256 jobId) external;

    /// @notice Permissionless after the expiry block: as `cancelJob`.
    function expireJob(uint256 jobId) external;

    // ---------------------------------------------------------------- scheduling

    /// @notice Permissionless: offer the job's next task (pending queue first, then the
    /// round's next shard, then the aggregation task once every shard task of the round is
    /// finalized) to a worker drawn from the pool. Offers are drawn from the future in two
    /// calls: when the job has no live offer ticket this call asks for one
    /// (`OffersRequested`), draws nothing and returns 0; from the ticket's next block to the
    /// end of its epoch it draws from the ticket block's hash, against worker weights held
    /// since the ticket (WorkerPool.holdOffers); the ticket serves every task of the job
    /// drawable when it was asked for, until its epoch ends. A task that became drawable
    /// after the ticket was asked for (sent back, or the round's aggregation task unlocked)
    /// waits for the next ticket, which a call asks for once nothing else is left for the
    /// current one (returning what it drew before). Reverts
    /// `JobOffersNotReady` before the ticket's next block, `JobNothingToDraw`,
    /// `JobNoEligibleWorker` (the ticket stays), `JobPastExpiry`, `JobNotActive`.
    function drawTask(uint256 jobId) external returns (uint256 taskId);

    /// @notice Permissionless: `drawTask` for up to `count` tasks from one ticket (at most
    /// `MAX_BATCH`), stopping early when nothing more can be drawn from it or no eligible
    /// worker is found for the next task; what was drawn stays drawn. Returns how many tasks
    /// were offered (their ids are in the `TaskDrawn` events; 0 when it asked for a ticket).
    /// Reverts as `drawTask` when not even one could be drawn, and `MarketBatchTooLarge`
    /// when `count` is above `MAX_BATCH`.
    function drawTasks(uint256 jobId, uint256 count) external returns (uint256 drawn);

    /// @notice The block whose hash the job's next offers are drawn from; 0 when none is asked for.
    function offerTicketOf(uint256 jobId) external view returns (uint64);

    // ---------------------------------------------------------------- worker and auditor

    /// @notice The offered worker accepts before the accept deadline.
    function acceptTask(uint256 taskId) external;

    /// @notice The offered worker says it cannot fetch the task's inputs (its shard or the
    /// job's checkpoint), before the accept deadline. It costs what ignoring the offer would:
    /// the accept penalty, burned (so it is never a cheaper exit than silence, and nobody is
    /// paid for it); the rest of its collateral is released and the task goes back, its
    /// redraw excluding the decliner. No timeout is recorded. When 3 distinct workers
    /// (MAX_DECLINES) have declined the task, its job ends (Cancelled, as `cancelJob`), the
    /// task is closed, each of its decliners is paid back its penalty out of the refund and
    /// the rest goes to the submitter (`DeclineRepaid`, `JobInputsUnavailable`). Reverts
    /// `TaskNotOffered`, `TaskNotWorker`, `TaskDeadlinePassed`, `JobNotActive`.
    function declineTask(uint256 taskId) external;

    /// @notice The worker commits `keccak256(abi.encode(taskId, root, resultCid, salt, worker))`
    /// before the commit deadline. On a job with an audit rate the audit draw gets a ticket
    /// (`AuditRequested`): the hash of a later block decides it.
    function commitResult(uint256 taskId, bytes32 commitment) external;

    /// @notice Permissionless from the ticket's next block until the reveal deadline: settle
    /// the task's audit draw. No audit: the worker reveals (its reveal settles the draw by
    /// itself as well). An audit: an auditor is drawn from the verifiers by the weights held
    /// since the ticket, the worker taken out of the draw (`AuditorDrawn`), or the audit is
    /// waived when no verifier is eligible. A draw nobody settled inside its ticket's epoch
    /// counts as drawn: its auditor is asked for from a new ticket (`AuditRequested`). Reverts
    /// `TaskAuditNotDue`, `TaskDeadlinePassed`, `RandomnessUnavailable`.
    function settleAudit(uint256 taskId) external;

    /// @notice The auditor commits `keccak256(abi.encode(taskId, root, salt, auditor))` before its deadline.
    function commitAudit(uint256 taskId, bytes32 commitment) external;

    /// @notice The worker reveals (after the auditor's commit, if audited) before the reveal
    /// deadline; an unsettled audit draw is settled here (reverts `TaskAuditPending` when it
    /// drew an audit, `RandomnessUnavailable` before the ticket's block passed).
    function revealResult(uint256 taskId, bytes32 root, string calldata resultCid, bytes32 salt) external;

    /// @notice The auditor reveals before the reveal deadline.
    function revealAudit(uint256 taskId, bytes32 root, bytes32 salt) external;

    // ---------------------------------------------------------------- settlement

    /// @notice Permissionless after the challenge window: pay the worker (and auditor),
    /// return collateral, record history, advance the round on an aggregation task.
    /// Reverts `TaskAggregationInputsUnsettled` for an aggregation task while a shard task
    /// of its round is not finalized.
    function finalize(uint256 taskId) external;

    /// @notice `finalize` for up to `MAX_BATCH` tasks; tasks not finalizable are skipped.
    /// Returns how many were finalized. Each task is paid (and its round moved on) as
    /// `finalize` does; then each worker and auditor of the batch is settled once for all its
    /// tasks in it: one history record and one pool release (collateral unlock and weight
    /// refresh), so a batch costs less per task the more tasks each member has in it.
    function finalizeMany(uint256[] calldata taskIds) external returns (uint256 finalized);

    /// @notice Permissionless after a phase deadline: penalise who was late and move the
    /// task on (redraw, reassign an auditor, waive the audit or requeue).
    function timeoutTask(uint256 taskId) external;

    /// @notice Permissionless: close a Pending or Offered task of a job that is no longer
    /// Active and refund its cost to the submitter. Also a stage task of such a job past its
    /// challenge window whose group can never be whole (a stage of it was never drawn, or is
    /// Pending, Offered or Closed): it is not paid (a stage cannot finish without the other
    /// stages of its attempt, so its result was fed by none), its worker's whole collateral
    /// and pool slot come back (`StageReset` naming that stage), its cost is refunded.
    function closeTask(uint256 taskId) external;

    /// @notice The worker of a running stage task says it is alive but blocked, waiting on
    /// another stage of its group. Once per attempt, before the deadline. When its deadline
    /// passes the report is judged on what the chain shows of the group at that timeout: it
    /// holds if another stage is unheld (never drawn, Pending, Offered, Closed, or in a
    /// dispute whose group was sent back), running with a later deadline (drawn or accepted
    /// after this one was due), or running past its deadline without having reported (the
    /// silent one, which pays its own timeout). Then the stage goes back without penalty
    /// (with its group) and may be drawn again. Otherwise (every other stage committed,
    /// revealed, or reported too) the report was false or cannot be told from a false one:
    /// the stage pays the running timeout's penalty, the timeout is recorded, and its worker
    /// is excluded from the redraw. Reporting never costs more than not reporting.
    function reportStalled(uint256 taskId) external;

    /// @notice Dispute game only: a challenger disputes the task's revealed result inside its
    /// challenge window. The task becomes Disputed (its funds stay locked). Reverts
    /// `TaskNotInChallengeWindow`, `TaskDeadlinePassed`.
    function openChallenge(uint256 taskId, address challenger) external;

    /// @notice Dispute game only: the dispute game settled the stakes of a Disputed task; move
    /// the task on. Audit dispute: worker won → finalized and paid (the audit fee goes back
    /// to the submitter), lost → sent back. Challenge: worker won → the challenge window
    /// resumes with the blocks it had left, lost → the worker's (and any auditor's) pool
    /// slot is released and the task sent back. Reverts `TaskNotDisputed`.
    function resolveDispute(uint256 taskId, bool workerWon) external;

    /// @notice Dispute game only: the dispute game ended with no verdict (no committee could
    /// judge it). Nobody is paid or slashed: collaterals are released and the task is sent
    /// back to be redone. Reverts `TaskNotDisputed`.
    function voidDispute(uint256 taskId) external;

    /// @notice Permissionless: credit job `jobId`'s surplus (unused audit fees) to its
    /// submitter now. Returns the amount.
    function refundSurplus(uint256 jobId) external returns (uint256 amount);

    /// @notice Withdraw the caller's credits (rewards, audit fees, refunds).
    function withdraw() external;

    // ---------------------------------------------------------------- views

    /// @notice The stored job.
    function jobOf(uint256 jobId) external view returns (Job memory);

    /// @notice The stored task (status None if never drawn).
    function taskOf(uint256 taskId) external view returns (Task memory);

    /// @notice What the dispute game reads of a task (see DisputeTerms).
    function disputeTerms(uint256 taskId) external view returns (DisputeTerms memory);

    /// @notice Ids of job `jobId`'s tasks `offset .. offset + limit` in draw order (only tasks
    /// already given state).
    function tasksOf(uint256 jobId, uint256 offset, uint256 limit) external view returns (uint256[] memory ids);

    /// @notice Ids of `submitter`'s jobs `offset .. offset + limit`.
    function jobsOf(address submitter, uint256 offset, uint256 limit) external view returns (uint256[] memory ids);

    /// @notice The id of task `index` of `round` of job `jobId` (pure).
    function taskId(uint256 jobId, uint32 round, uint32 index) external pure returns (uint256);

    /// @notice `account`'s withdrawable credits.
    function credits(address account) external view returns (uint256);

    /// @notice Number of jobs created so far (ids are 1..jobCount).
    function jobCount() external view returns (uint256);

    /// @notice Sum of all jobs' escrow.
    function totalEscrow() external view returns (uint256);

    /// @notice Sum of all withdrawable credits.
    function totalCredits() external view returns (uint256);

    /// @notice Shortest window (accept, compute, reveal, challenge) a job may set, in blocks.
    function MIN_WINDOW_BLOCKS() external view returns (uint32);

    /// @notice Longest reveal window (the audit ticket must stay readable until its end).
    function MAX_REVEAL_WINDOW_BLOCKS() external view returns (uint32);

    /// @notice Longest CID (manifest, checkpoint, result) the market stores or logs, in bytes.
    function MAX_CID_BYTES() external view returns (uint256);

    /// @notice Smallest accept penalty a deployment may set, in basis points.
    function MIN_ACCEPT_PENALTY_BPS() external view returns (uint16);

    /// @notice Smallest worker collateral a job may set (so the smallest challenger bond), and
    /// the smallest auditor collateral a deployment may set, in wei: every game stakes at
    /// least this much on each side, so a lost one pays its referees and burns a real amount,
    /// and a won one raises reputation only at that price.
    function MIN_COLLATERAL() external view returns (uint96);

    /// @notice Largest worker collateral a job may set, as a multiple of its reward per task:
    /// at the least accept penalty an ignored offer costs at most one reward.
    function MAX_COLLATERAL_PER_REWARD() external view returns (uint256);

    /// @notice Longest batch `finalizeMany` takes.
    function MAX_BATCH() external view returns (uint256);

    /// @notice The most stages a job's model may be split into (JobParams.stages).
    function MAX_STAGES() external view returns (uint8);

    /// @notice Whether `game` is a wired dispute game (may open, resolve and void disputes).
    function isDisputeGame(address game) external view returns (bool);

    /// @notice Whether the wiring is sealed (no dispute game can be added any more).
    function wiringSealed() external view returns (bool);

    /// @notice The deployer only, before `sealWiring`: let `game` open, resolve and void disputes.
    function wireDisputeGame(address game) external;

    /// @notice The deployer only, once: close the wiring for good (the deployment does it).
    function sealWiring() external;
}
