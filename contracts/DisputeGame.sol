// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {IDisputeGame} from "./interfaces/IDisputeGame.sol";
import {IJobMarket} from "./interfaces/IJobMarket.sol";
import {IWorkerPool} from "./interfaces/IWorkerPool.sol";
import {IStakeManager} from "./interfaces/IStakeManager.sol";
import {IIdentityRegistry} from "./interfaces/IIdentityRegistry.sol";
import {MerkleCommitment} from "./libraries/MerkleCommitment.sol";
import {Bisection} from "./libraries/Bisection.sol";
import {Committee} from "./libraries/Committee.sol";
import {FutureRandomness} from "./libraries/FutureRandomness.sol";
import {IStepGameReceiver} from "./interfaces/IStepGame.sol";
import {StepGame} from "./StepGame.sol";

/// @title DisputeGame
/// @notice Challenges, bisection with chess clocks, then StepGame's levels 1-3 and one-step
/// (a job that bound its program, an interval past the task's inputs) or a referee committee
/// (the rest, until it goes), and settlement; see IDisputeGame and docs/onestep.md
/// ("Wiring"). Interval arithmetic lives in Bisection, vote rules in Committee, proofs in
/// MerkleCommitment. Holds no tokens.
/// @dev Needs DISPUTE_ROLE on JobMarket, MARKET_ROLE on StakeManager and RECORDER_ROLE on
/// IdentityRegistry.
contract DisputeGame is ReentrancyGuardTransient, IDisputeGame, IStepGameReceiver {
    /// @notice What a job binds for its disputes to end in StepGame: its program (`root`,
    /// `entries`, `layout`: truetrain/trace/program.py, `Program.commitment()` their hash),
    /// the steps between checkpoints (`interval`), the Merkle root over its data leaves
    /// (`data`: each task slot round · shards + shard holds its steps' batch roots, padded to
    /// a power of two; truetrain/trace/game.py `job_batch_leaves`) and its shard count
    /// (checked against the job's: task `shards` of a round is its aggregation).
    struct Program {
        bytes32 root;
        uint64 entries;
        uint32 interval;
        uint32 shards;
        bytes32 data;
        uint256[] layout;
    }

    /// @notice A game's level-0 ends (`agreed` at lo, each party's at hi, worker first) and,
    /// once opened, its StepGame id.
    struct Link {
        bytes32 agreed;
        bytes32[2] hi;
        uint256 stepGameId;
    }

    /// @notice A StepGame's clock is this many of level 0's (its moves are ~8x level 0's).
    uint256 public constant STEP_CLOCK_FACTOR = 4;
    /// @notice The StepGame that ends repro disputes (0: every game ends with a committee).
    StepGame public immutable stepGame;
    mapping(uint256 jobId => Program) private _programs;
    /// @notice Level 0's ends and the StepGame of a game.
    mapping(uint256 gameId => Link) private _links;
    /// @notice The game a StepGame id settles.
    mapping(uint256 stepGameId => uint256 gameId) public gameOfStepGame;

    /// @notice Job `jobId` bound its program (`program` = keccak256(abi.encode(root, entries,
    /// layout))), data root and checkpoint interval.
    event ProgramBound(uint256 indexed jobId, bytes32 program, bytes32 data, uint32 interval);
    /// @notice Game `gameId`'s level 0 ended and StepGame `stepGameId` plays the rest, its
    /// batches from leaf `firstBatch` of the job's data root.
    event StepGameOpened(uint256 indexed gameId, uint256 stepGameId, uint256 firstBatch, uint256 steps);

    /// @notice Only the job's submitter binds its program.
    error DisputeNotSubmitter(uint256 jobId, address caller);
    /// @notice The job's program is bound already.
    error DisputeProgramBound(uint256 jobId);
    /// @notice A task of the job was drawn already: its program can no longer be bound.
    error DisputeProgramTooLate(uint256 jobId);
    /// @notice The binding has a zero root, no entries, no layout or no interval.
    error DisputeProgramInvalid(uint256 jobId);
    /// @notice `caller` is not the StepGame, or `stepGameId` is none of this game's.
    error DisputeNotStepGame(address caller, uint256 stepGameId);

    /// @inheritdoc IDisputeGame
    uint8 public constant MAX_COMMITTEE = 9;
    /// @inheritdoc IDisputeGame
    uint8 public constant MAX_REDRAWS = 2;
    /// @inheritdoc IDisputeGame
    uint32 public constant MIN_PHASE_BLOCKS = 5;
    /// @inheritdoc IDisputeGame
    uint256 public constant MAX_CID_BYTES = 128;

    IJobMarket public immutable market;
    IWorkerPool public immutable pool;
    IStakeManager public immutable stakeManager;
    IIdentityRegistry public immutable registry;
    uint64 public immutable clockBlocks;
    uint32 public immutable commitWindow;
    uint32 public immutable revealWindow;
    uint8 public immutable committeeSize;
    uint96 public immutable refereeStake;
    uint96 public immutable refereePenalty;

    /// @inheritdoc IDisputeGame
    uint256 public gameCount;
    mapping(uint256 gameId => Game) private _games;
    /// @inheritdoc IDisputeGame
    mapping(uint256 taskId => uint256 gameId) public gameOfTask;
    /// @dev Seats keyed by (committee << 8 | index).
    mapping(uint256 gameId => mapping(uint256 key => Seat)) private _seats;

    /// @param config clocks, windows, committee size and referee stake (see GameConfig)
    /// @param stepGame_ the StepGame repro disputes end in (0: none, committees only)
    constructor(
        IJobMarket market_,
        IWorkerPool pool_,
        IStakeManager stakeManager_,
        IIdentityRegistry registry_,
        GameConfig memory config,
        StepGame stepGame_
    ) {
        // INVARIANT: every phase gives an honest party time to act, and a referee's silence
        // or wrong vote always costs it something.
        if (
            config.clockBlocks < MIN_PHASE_BLOCKS || config.commitWindow < MIN_PHASE_BLOCKS
                || config.revealWindow < MIN_PHASE_BLOCKS || config.committeeSize == 0 || config.committeeSize % 2 == 0
                || config.committeeSize > MAX_COMMITTEE || config.refereePenalty == 0
                || config.refereePenalty > config.refereeStake
        ) revert DisputeInvalidConfig();
        market = market_;
        pool = pool_;
        stakeManager = stakeManager_;
        registry = registry_;
        clockBlocks = config.clockBlocks;
        commitWindow = config.commitWindow;
        revealWindow = config.revealWindow;
        committeeSize = config.committeeSize;
        refereeStake = config.refereeStake;
        refereePenalty = config.refereePenalty;
        stepGame = stepGame_;
    }

    // ================================================================ the job's program

    /// @notice Bind job `jobId`'s program, data root and checkpoint interval (its submitter,
    /// once, before its first task is drawn): its disputes then end in StepGame.
    function bindProgram(uint256 jobId, Program calldata program) external {
        // Task 0 of round 0 is the first a job draws; task `shards` of a round its aggregation.
        IJobMarket.DisputeTerms memory d = market.disputeTerms(jobId << 64);
        if (msg.sender != d.submitter) revert DisputeNotSubmitter(jobId, msg.sender);
        if (_programs[jobId].root != 0) revert DisputeProgramBound(jobId);
        if (d.status != IJobMarket.TaskStatus.None) revert DisputeProgramTooLate(jobId);
        if (
            program.root == 0 || program.entries == 0 || program.interval == 0 || program.layout.length == 0
                || !market.disputeTerms(jobId << 64 | program.shards).aggregation
        ) revert DisputeProgramInvalid(jobId);
        _programs[jobId] = program;
        emit ProgramBound(
            jobId, keccak256(abi.encode(program.root, program.entries, program.layout)), program.data, program.interval
        );
    }

    /// @inheritdoc IStepGameReceiver
    function stepGameResolved(uint256 stepGameId, address winner, address) external nonReentrant {
        uint256 gameId = gameOfStepGame[stepGameId];
        // INVARIANT: a verdict comes only from the StepGame, for the game this contract opened.
        if (msg.sender != address(stepGame) || gameId == 0) revert DisputeNotStepGame(msg.sender, stepGameId);
        Game storage g = _games[gameId];
        _requireStatus(g, gameId, GameStatus.Stepping);
        _settle(g, gameId, winner == g.worker);
    }

    /// @notice Job `jobId`'s bound program (a zero root: none).
    function programOf(uint256 jobId) external view returns (Program memory) {
        return _programs[jobId];
    }

    /// @notice Game `gameId`'s level-0 ends and StepGame id.
    function linkOf(uint256 gameId) external view returns (Link memory) {
        return _links[gameId];
    }

    // ================================================================ parties

    /// @inheritdoc IDisputeGame
    function challenge(uint256 taskId, bytes32 root, Claim[] calldata claims)
        external
        nonReentrant
        returns (uint256 gameId)
    {
        _requireNoGame(taskId);
        IJobMarket.DisputeTerms memory d = market.disputeTerms(taskId);
        if (msg.sender == d.worker) revert DisputeSelfChallenge(taskId);
        if (root == d.root) revert DisputeSameRoot(taskId);
        gameId = _open(taskId, d, msg.sender, root, d.collateral, false);
        // Refuses a task outside its challenge window (TaskNotInChallengeWindow / TaskDeadlinePassed).
        market.openChallenge(taskId, msg.sender);
        stakeManager.lockCollateral(msg.sender, d.collateral);
        if (_games[gameId].status == GameStatus.Bisecting) _move(_games[gameId], gameId, claims);
        else if (claims.length != 0) revert DisputeWrongClaimCount(gameId, claims.length, 0);
    }

    /// @inheritdoc IDisputeGame
    function openAuditDispute(uint256 taskId) external returns (uint256 gameId) {
        _requireNoGame(taskId);
        IJobMarket.DisputeTerms memory d = market.disputeTerms(taskId);
        if (d.status != IJobMarket.TaskStatus.Disputed || d.challenged) revert DisputeNotAuditMismatch(taskId);
        gameId = _open(taskId, d, d.auditor, d.auditRoot, d.auditorCollateral, true);
    }

    /// @inheritdoc IDisputeGame
    function move(uint256 gameId, Claim[] calldata claims) external nonReentrant {
        Game storage g = _game(gameId);
        _requireStatus(g, gameId, GameStatus.Bisecting);
        if (msg.sender != _partyOnTurn(g)) revert DisputeNotYourTurn(gameId, msg.sender);
        _move(g, gameId, claims);
    }

    /// @inheritdoc IDisputeGame
    function timeout(uint256 gameId) external nonReentrant {
        Game storage g = _game(gameId);
        if (g.status == GameStatus.Bisecting) {
            uint64 expiry = g.lastMoveBlock + (g.turn == Party.Worker ? g.workerClock : g.challengerClock);
            if (block.number <= expiry) revert DisputeClockRunning(gameId, expiry);
            address late = _partyOnTurn(g);
            emit ClockExpired(gameId, late);
            _settle(g, gameId, late != g.worker);
        } else if (g.status == GameStatus.Committing) {
            if (block.number <= g.deadline) revert DisputeDeadlineNotPassed(gameId, g.deadline);
            _openReveals(g, gameId);
        } else if (g.status == GameStatus.AwaitingReferees) {
            // Nobody drew the committee while the ticket's hash was readable.
            uint64 lapsesAt = FutureRandomness.lastBlock(g.deadline);
            if (block.number <= lapsesAt) revert DisputeDeadlineNotPassed(gameId, lapsesAt);
            g.committee += 1;
            _committeeFailed(g, gameId);
        } else {
            revert DisputeWrongStatus(gameId, g.status);
        }
    }

    // ================================================================ referees

    /// @inheritdoc IDisputeGame
    function drawReferees(uint256 gameId) external {
        Game storage g = _game(gameId);
        _requireStatus(g, gameId, GameStatus.AwaitingReferees);
        // INVARIANT: the committee comes from the hash of a block after the one that asked for
        // it (the ticket), whoever calls and whenever: calling at a chosen moment buys nothing.
        bytes32 random = FutureRandomness.draw(g.deadline, bytes32(gameId));
        uint8 committee = g.committee + 1;
        g.committee = committee;
        // Distinct verifiers (never a party), drawn by weight without replacement.
        address[] memory drawn = pool.drawCommittee(
            keccak256(abi.encode(random, committee)),
            committeeSize,
            IWorkerPool.Requirements(0, 0, 0, refereeStake, g.worker, 0, 0),
            g.challenger
        );
        uint256 found = Committee.oddSize(drawn.length);
        if (found == 0) {
            // No eligible verifier: this committee fails like a silent one (a new draw, then no verdict).
            _committeeFailed(g, gameId);
            return;
        }
        assembly ("memory-safe") {
            mstore(drawn, found)
        }
        for (uint256 i = 0; i < found; ++i) {
            _seats[gameId][_key(committee, i)].referee = drawn[i];
            // A referee's stake at risk is locked until the vote is judged.
            stakeManager.lockCollateral(drawn[i], refereeStake);
            // Its draw weight follows the stake it has left free (once the verifier weights are
            // no longer held for a pending draw: WorkerPool.holdDraws). Unlocks are not
            // reported: a weight left too low only costs the member itself, until its next refresh.
            pool.stakeChanged(drawn[i]);
        }
        uint64 deadline = uint64(block.number) + commitWindow;
        g.seats = uint8(found);
        g.committed = 0;
        g.revealed = 0;
        g.votesWorker = 0;
        g.votesChallenger = 0;
        g.votesNeither = 0;
        g.status = GameStatus.Committing;
        g.deadline = deadline;
        emit RefereesDrawn(gameId, committee, drawn, deadline);
    }

    /// @inheritdoc IDisputeGame
    function commitVote(uint256 gameId, uint256 seat, bytes32 commitment) external {
        Game storage g = _game(gameId);
        _requireStatus(g, gameId, GameStatus.Committing);
        if (block.number > g.deadline) revert DisputeDeadlinePassed(gameId, g.deadline);
        Seat storage s = _seat(g, gameId, seat);
        if (s.commitment != 0) revert DisputeAlreadyVoted(gameId, msg.sender);
        if (commitment == 0) revert DisputeVoteMismatch(gameId, msg.sender);
        s.commitment = commitment;
        uint8 committed = g.committed + 1;
        g.committed = committed;
        emit VoteCommitted(gameId, msg.sender);
        if (committed == g.seats) _openReveals(g, gameId);
    }

    /// @inheritdoc IDisputeGame
    function revealVote(uint256 gameId, uint256 seat, Vote vote, bytes32 salt) external {
        Game storage g = _game(gameId);
        _requireStatus(g, gameId, GameStatus.Revealing);
        if (block.number > g.deadline) revert DisputeDeadlinePassed(gameId, g.deadline);
        Seat storage s = _seat(g, gameId, seat);
        if (s.commitment == 0 || s.vote != Vote.None) revert DisputeAlreadyVoted(gameId, msg.sender);
        uint8 v = uint8(vote);
        if (!Committee.valid(v)) revert DisputeInvalidVote(gameId, v);
        if (Committee.commitment(gameId, v, salt, msg.sender) != s.commitment) {
            revert DisputeVoteMismatch(gameId, msg.sender);
        }
        s.vote = vote;
        g.revealed += 1;
        if (v == Committee.VOTE_WORKER) g.votesWorker += 1;
        else if (v == Committee.VOTE_CHALLENGER) g.votesChallenger += 1;
        else g.votesNeither += 1;
        emit VoteRevealed(gameId, msg.sender, vote);
    }

    /// @inheritdoc IDisputeGame
    function resolve(uint256 gameId) external nonReentrant {
        Game storage g = _game(gameId);
        _requireStatus(g, gameId, GameStatus.Revealing);
        if (g.revealed < g.committed && block.number <= g.deadline) revert DisputeDeadlineNotPassed(gameId, g.deadline);
        if (g.revealed != 0) {
            _settle(g, gameId, Committee.workerWins(g.votesWorker, g.revealed));
            return;
        }
        // Nobody revealed: every seat pays for it, and a new committee is due.
        _judgeReferees(g, gameId, true);
        _committeeFailed(g, gameId);
    }

    // ================================================================ views

    /// @inheritdoc IDisputeGame
    function gameOf(uint256 gameId) external view returns (Game memory) {
        return _games[gameId];
    }

    /// @inheritdoc IDisputeGame
    function committeeOf(uint256 gameId) external view returns (Seat[] memory seats) {
        Game storage g = _games[gameId];
        seats = new Seat[](g.seats);
        for (uint256 i = 0; i < seats.length; ++i) {
            seats[i] = _seats[gameId][_key(g.committee, i)];
        }
    }

    /// @inheritdoc IDisputeGame
    function movesFor(uint16 leaves) external pure returns (uint256) {
        return Bisection.moves(leaves);
    }

    // ================================================================ internals

    function _requireNoGame(uint256 taskId) private view {
        uint256 existing = gameOfTask[taskId];
        // INVARIANT: one game per task at a time.
        GameStatus status = _games[existing].status;
        if (existing != 0 && status != GameStatus.Resolved && status != GameStatus.Voided) {
            revert DisputeAlreadyOpen(taskId, existing);
        }
    }

    function _game(uint256 gameId) private view returns (Game storage g) {
        g = _games[gameId];
        if (g.status == GameStatus.None) revert DisputeNotFound(gameId);
    }

    function _requireStatus(Game storage g, uint256 gameId, GameStatus status) private view {
        if (g.status != status) revert DisputeWrongStatus(gameId, g.status);
    }

    function _partyOnTurn(Game storage g) private view returns (address) {
        return g.turn == Party.Worker ? g.worker : g.challenger;
    }

    function _open(
        uint256 taskId,
        IJobMarket.DisputeTerms memory d,
        address challenger,
        bytes32 root,
        uint96 bond,
        bool audit
    ) private returns (uint256 gameId) {
        gameId = ++gameCount;
        gameOfTask[taskId] = gameId;
        Game storage g = _games[gameId];
        g.taskId = taskId;
        g.worker = d.worker;
        g.challenger = challenger;
        g.audit = audit;
        g.workerRoot = d.root;
        g.challengerRoot = root;
        g.workerStake = d.collateral;
        g.challengerStake = bond;
        g.workerClock = clockBlocks;
        g.challengerClock = clockBlocks;
        g.lastMoveBlock = uint64(block.number);
        g.hi = 1;
        if (d.aggregation) {
            // One hash, the root itself: no bisection, the referees recompute the aggregation.
            g.leaves = 1;
            emit DisputeOpened(gameId, taskId, challenger, d.worker, d.root, root, 1, bond, audit);
            _endBisection(g, gameId);
            return gameId;
        }
        g.leaves = d.leaves;
        g.hi = d.leaves;
        g.status = GameStatus.Bisecting;
        g.turn = Party.Challenger;
        emit DisputeOpened(gameId, taskId, challenger, d.worker, d.root, root, d.leaves, bond, audit);
    }

    /// @dev The claims a move has checked so far, with what checks the next one.
    struct MoveCursor {
        bool byWorker;
        bytes32 root;
        uint256 depth;
        uint256 used;
        uint16[] positions;
    }

    /// @dev One move of the party on turn: its result claim on its first move, the answer
    /// at the pending midpoint, the claim at the next midpoint (see IDisputeGame).
    function _move(Game storage g, uint256 gameId, Claim[] calldata claims) private {
        MoveCursor memory m;
        m.byWorker = g.turn == Party.Worker;
        uint64 clock = _spendClock(g, gameId, m.byWorker);
        m.root = m.byWorker ? g.workerRoot : g.challengerRoot;
        m.depth = Bisection.depth(g.leaves);
        m.positions = new uint16[](claims.length);
        if (g.moves < 2) {
            // The mover's first move: its hash at the result.
            bytes32 end = _take(gameId, claims, m, g.leaves);
            if (m.byWorker && end == g.challengerHash) {
                // The challenged result is the challenger's own: the result stands.
                _finishMove(g, gameId, claims, m, clock);
                _settle(g, gameId, true);
                return;
            }
            if (!m.byWorker) g.challengerHash = end;
            _links[gameId].hi[m.byWorker ? 0 : 1] = end;
            // The worker's first move also answers the opening's midpoint claim.
            if (g.moves == 1 && Bisection.open(g.lo, g.hi)) _answer(g, gameId, claims, m);
        } else {
            _answer(g, gameId, claims, m);
        }
        g.moves += 1;
        if (Bisection.open(g.lo, g.hi)) {
            g.pending = _take(gameId, claims, m, Bisection.midpoint(g.lo, g.hi));
            g.turn = m.byWorker ? Party.Challenger : Party.Worker;
        } else if (g.moves == 1) {
            // A one-leaf task: the opening claimed the result alone; the worker claims next.
            g.turn = Party.Worker;
        }
        _finishMove(g, gameId, claims, m, clock);
        if (g.moves > 1 && !Bisection.open(g.lo, g.hi)) _endBisection(g, gameId);
    }

    /// @dev Charge the mover's clock for the blocks since the last move; its time left.
    function _spendClock(Game storage g, uint256 gameId, bool byWorker) private returns (uint64 clock) {
        uint64 last = g.lastMoveBlock;
        uint64 elapsed = uint64(block.number) - last;
        clock = byWorker ? g.workerClock : g.challengerClock;
        if (elapsed > clock) revert DisputeClockExpired(gameId, last + clock);
        clock -= elapsed;
        if (byWorker) g.workerClock = clock;
        else g.challengerClock = clock;
        g.lastMoveBlock = uint64(block.number);
    }

    /// @dev The mover's hash at the pending midpoint: agreement moves lo up, disagreement
    /// moves hi down (both claims are in the move logs).
    function _answer(Game storage g, uint256 gameId, Claim[] calldata claims, MoveCursor memory m) private {
        (uint16 lo, uint16 hi) = (g.lo, g.hi);
        uint16 at = Bisection.midpoint(lo, hi);
        bytes32 answer = _take(gameId, claims, m, at);
        bool agree = answer == g.pending;
        (g.lo, g.hi) = Bisection.narrow(lo, hi, at, agree);
        Link storage l = _links[gameId];
        if (agree) {
            l.agreed = answer;
        } else {
            (uint256 mover, uint256 other) = m.byWorker ? (0, 1) : (1, 0);
            l.hi[mover] = answer;
            l.hi[other] = g.pending;
        }
    }

    /// @dev The next claim of the move, checked against the mover's root at `position`.
    function _take(uint256 gameId, Claim[] calldata claims, MoveCursor memory m, uint16 position)
        private
        pure
        returns (bytes32 hash)
    {
        uint256 i = m.used;
        if (i >= claims.length) revert DisputeWrongClaimCount(gameId, claims.length, i + 1);
        Claim calldata c = claims[i];
        hash = c.hash;
        // INVARIANT: every claimed hash is bound to the mover's own root at its position.
        if (c.proof.length != m.depth || !MerkleCommitment.verify(m.root, position - 1, hash, c.proof)) {
            revert DisputeProofInvalid(gameId, position, hash);
        }
        m.positions[i] = position;
        m.used = i + 1;
    }

    function _finishMove(Game storage g, uint256 gameId, Claim[] calldata claims, MoveCursor memory m, uint64 clock)
        private
    {
        if (claims.length != m.used) revert DisputeWrongClaimCount(gameId, claims.length, m.used);
        bytes32[] memory hashes = new bytes32[](claims.length);
        string[] memory cids = new string[](claims.length);
        for (uint256 i = 0; i < claims.length; ++i) {
            hashes[i] = claims[i].hash;
            cids[i] = claims[i].cid;
            // INVARIANT: what a move logs is bounded (at most 3 claims of bounded CIDs).
            if (bytes(cids[i]).length > MAX_CID_BYTES) revert DisputeCidTooLong(gameId, bytes(cids[i]).length);
        }
        emit DisputeBisected(gameId, msg.sender, m.positions, hashes, cids, g.lo, g.hi, clock);
    }

    function _endBisection(Game storage g, uint256 gameId) private {
        g.turn = Party.None;
        emit BisectionEnded(gameId, g.lo, g.hi);
        Program storage p = _programs[g.taskId >> 64];
        // The committee stays where StepGame cannot take the dispute yet: no StepGame, a job
        // without a bound program, an interval from the task's inputs (lo = 0: no leaf holds
        // the agreed start's hash) and so an aggregation task.
        if (address(stepGame) == address(0) || p.root == 0 || g.lo == 0) _requestReferees(g, gameId);
        else _openStepGame(g, gameId, p);
    }

    /// @dev Hand the interval to StepGame: the worker defends; the agreed hash at lo and each
    /// party's at hi; the interval's steps and their batches under the job's data root.
    function _openStepGame(Game storage g, uint256 gameId, Program storage p) private {
        Link storage l = _links[gameId];
        uint256 steps = p.interval;
        uint256 first;
        // Leaf 0 is the task's checkpoint 0, so position lo (leaf lo - 1) is step (lo - 1) · steps
        // and a task's (leaves - 1) · steps steps are its subtree of the data root. No term
        // overflows: lo >= 1, leaves > lo, and every factor is at most 64 bits.
        unchecked {
            first = ((uint256(uint32(g.taskId >> 32)) * p.shards + uint32(g.taskId))
                << Bisection.depth(uint256(g.leaves - 1) * steps)) + uint256(g.lo - 1) * steps;
        }
        g.status = GameStatus.Stepping;
        uint256 id = stepGame.open(
            StepGame.Setup(
                g.worker, g.challenger, address(this), p.root, p.entries, p.layout, l.agreed, p.data, steps, l.hi[0],
                l.hi[1], uint256(clockBlocks) * STEP_CLOCK_FACTOR, first
            )
        );
        l.stepGameId = id;
        gameOfStepGame[id] = gameId;
        emit StepGameOpened(gameId, id, first, steps);
    }

    /// @dev Ask for a committee: it is drawn from the hash of a future block (the ticket,
    /// kept in `deadline`).
    function _requestReferees(Game storage g, uint256 gameId) private {
        uint64 ticket = FutureRandomness.ticket();
        g.status = GameStatus.AwaitingReferees;
        g.seats = 0;
        g.deadline = ticket;
        emit RefereesRequested(gameId, ticket);
        pool.holdDraws(ticket);
    }

    /// @dev Committee `g.committee` could not judge (nobody eligible, nobody revealed, or the
    /// draw lapsed): draw another, or end without a verdict after MAX_REDRAWS redraws.
    function _committeeFailed(Game storage g, uint256 gameId) private {
        uint8 committee = g.committee;
        emit CommitteeFailed(gameId, committee);
        if (committee > MAX_REDRAWS) _void(g, gameId);
        else _requestReferees(g, gameId);
    }

    /// @dev No verdict: nobody is slashed or paid, both stakes are released (the market
    /// releases what the task still holds) and the task is redone.
    function _void(Game storage g, uint256 gameId) private {
        g.status = GameStatus.Voided;
        g.seats = 0;
        emit DisputeVoided(gameId, g.taskId);
        _unlock(g.challenger, g.challengerStake);
        if (g.audit) _unlock(g.worker, g.workerStake);
        market.voidDispute(g.taskId);
    }

    function _openReveals(Game storage g, uint256 gameId) private {
        uint64 deadline = uint64(block.number) + revealWindow;
        g.status = GameStatus.Revealing;
        g.deadline = deadline;
        emit RevealPhaseOpened(gameId, deadline);
    }

    /// @dev The caller's seat `seat` on the current committee.
    function _seat(Game storage g, uint256 gameId, uint256 seat) private view returns (Seat storage s) {
        s = _seats[gameId][_key(g.committee, seat)];
        if (seat >= g.seats || s.referee != msg.sender) revert DisputeNotReferee(gameId, seat, msg.sender);
    }

    function _key(uint8 committee, uint256 index) private pure returns (uint256) {
        return uint256(committee) << 8 | index;
    }

    /// @dev Penalise the current committee's referees that did not side with the outcome
    /// (the penalty is burned: no party of the game gains from its referees' penalties),
    /// release every referee's stake; returns the majority.
    function _judgeReferees(Game storage g, uint256 gameId, bool workerWon)
        private
        returns (address[] memory majority)
    {
        uint256 seats = g.seats;
        uint8 committee = g.committee;
        majority = new address[](seats);
        uint256 count;
        for (uint256 i = 0; i < seats; ++i) {
            Seat storage seat = _seats[gameId][_key(committee, i)];
            address referee = seat.referee;
            uint8 vote = uint8(seat.vote);
            if (vote != 0 && Committee.withOutcome(vote, workerWon)) {
                majority[count++] = referee;
                _unlock(referee, refereeStake);
                continue;
            }
            // Recorded first: the forfeit refreshes the referee's draw weight, which must see
            // its reputation after this vote (a tree weight left above it would make the next
            // committee's rejection step drop it, so a small pool's committee would shrink by luck).
            if (vote == 0) registry.recordTimeout(referee);
            else registry.recordTaskFailed(referee);
            // The penalty comes out of the referee's locked stake first, then the rest is released.
            uint256 taken = stakeManager.forfeit(referee, refereePenalty);
            _unlock(referee, refereeStake - taken);
            emit RefereePenalized(gameId, referee, taken, vote != 0);
        }
        assembly ("memory-safe") {
            mstore(majority, count)
        }
    }

    /// @dev End the game: slash the loser (split with the majority referees), release the
    /// winner's stake where the task no longer holds it, record history, move the task on.
    function _settle(Game storage g, uint256 gameId, bool workerWon) private {
        g.status = GameStatus.Resolved;
        g.workerWon = workerWon;
        g.turn = Party.None;
        IJobMarket.DisputeTerms memory d = market.disputeTerms(g.taskId);
        (address winner, address loser) = workerWon ? (g.worker, g.challenger) : (g.challenger, g.worker);
        uint256 slashed = _slashLoser(g, gameId, d, workerWon, winner, loser);
        _recordParties(g, d.submitter, workerWon, slashed);
        emit DisputeSettled(gameId, g.taskId, workerWon, winner, loser, slashed);
        market.resolveDispute(g.taskId, workerWon);
    }

    function _slashLoser(
        Game storage g,
        uint256 gameId,
        IJobMarket.DisputeTerms memory d,
        bool workerWon,
        address winner,
        address loser
    ) private returns (uint256 slashed) {
        address[] memory majority = g.seats != 0 ? _judgeReferees(g, gameId, workerWon) : new address[](0);
        slashed = stakeManager.slash(loser, workerWon ? g.challengerStake : g.workerStake, winner, majority);
        if (!workerWon && !g.audit) _slashConfirmingAuditor(g, gameId, d, majority);
        // A worker that won a challenge keeps its collateral locked: the task goes back to
        // its challenge window and JobMarket releases it at finalization.
        if (!workerWon) _unlock(g.challenger, g.challengerStake);
        else if (g.audit) _unlock(g.worker, g.workerStake);
    }

    /// @dev A challenged result that an audit had confirmed was proven wrong: the auditor that
    /// matched it loses its collateral as well (split like the worker's).
    function _slashConfirmingAuditor(
        Game storage g,
        uint256 gameId,
        IJobMarket.DisputeTerms memory d,
        address[] memory majority
    ) private {
        if (d.auditor == address(0)) return;
        uint256 taken = stakeManager.slash(d.auditor, d.auditorCollateral, g.challenger, majority);
        emit AuditorSlashed(gameId, d.auditor, taken);
        registry.recordDispute(d.auditor, false, uint128(taken));
    }

    /// @dev Both parties' dispute history. A game the job's submitter plays (as the worker, or
    /// as the challenger: a public one or its auditor) is self-dealt: its loser's record
    /// stands, its winner gains nothing (no win, no reputation), as a task the worker paid for
    /// itself records no completion. Sybils the market cannot see pay for a win with the
    /// loser's bond, at least MIN_COLLATERAL, of which the winner gets back only its share.
    function _recordParties(Game storage g, address submitter, bool workerWon, uint256 slashed) private {
        address worker = g.worker;
        address challenger = g.challenger;
        // INVARIANT: no reputation from a self-dealt game.
        bool selfDealt = worker == submitter || challenger == submitter;
        if (!workerWon || !selfDealt) registry.recordDispute(worker, workerWon, workerWon ? 0 : uint128(slashed));
        if ((workerWon || !selfDealt) && registry.isRegistered(challenger)) {
            registry.recordDispute(challenger, !workerWon, workerWon ? uint128(slashed) : 0);
        }
    }

    /// @dev Unlock up to `amount` of `account`'s locked stake (other slashes may have taken part of it).
    function _unlock(address account, uint256 amount) private {
        uint256 locked = stakeManager.stakeOf(account).locked;
        if (amount > locked) amount = locked;
        if (amount != 0) stakeManager.unlockCollateral(account, amount);
    }
}
