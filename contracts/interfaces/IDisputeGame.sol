// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @title IDisputeGame: challenges, bisection over checkpoint commitments, chess clocks and a
/// referee committee
/// @notice A worker's revealed root commits to the hashes of its checkpoints 0, I, 2I, …, K
/// (the job's `checkpointLeaves` leaves, positional Merkle tree of MerkleCommitment). A
/// challenger disagrees with its own root; the game narrows the disagreement to one
/// checkpoint interval, which a small committee of staked verifiers recomputes.
///
/// Opening. Anyone with free stake may `challenge` a task in its challenge window with a
/// bond equal to the task's worker collateral (locked in the StakeManager; at least
/// JobMarket.MIN_COLLATERAL) and its own root.
/// An audit mismatch (JobMarket moved the task to Disputed) becomes a game by the
/// permissionless `openAuditDispute`: the auditor is the challenger and its locked auditor
/// collateral is its bond. One game per task at a time: a second challenge reverts
/// `DisputeAlreadyOpen` (and JobMarket refuses it as well: the task is no longer in its
/// window); no list of challengers is kept.
///
/// Positions. Position 0 is the task's inputs (agreed by both by definition); position
/// p ≥ 1 is checkpoint leaf p − 1; position `leaves` is the result. The interval
/// (lo, hi) holds the invariant "the parties agree at lo and disagree at hi"; it starts at
/// (0, leaves).
///
/// Bisection. The challenger's opening claims its hash at `leaves` and at the midpoint
/// m = lo + (hi − lo) / 2. Every later move (the parties alternate) answers the pending
/// midpoint with the mover's own hash there (agree: lo = m; disagree: hi = m) and, while
/// hi − lo ≥ 2, claims the mover's hash at the new midpoint. The worker's first move also
/// claims its hash at `leaves`: equal to the challenger's, the challenged result stands and
/// the challenger loses at once. Every claim carries a Merkle proof against the mover's own
/// root (depth = ceil(log2(leaves))) and the CID of the checkpoint it names, so referees can
/// fetch it. A task is settled in ceil(log2(leaves)) moves after the opening; each move
/// verifies at most three proofs (O(log leaves) gas). A worker that started from a wrong
/// checkpoint 0 disagrees at position 1 and the interval ends at (0, 1): the referees build
/// checkpoint 0 from the task's inputs and vote at once. An aggregation task (one hash,
/// its root) goes straight to the referees on (0, 1).
///
/// Chess clocks. Each party has `clockBlocks` blocks for all its moves together; its clock
/// runs from the opponent's last move (or the opening) until its own. A party whose clock
/// ran out loses (`timeout`); a move after that reverts `DisputeClockExpired`.
///
/// The step game. When hi − lo = 1, lo ≥ 1 and the job bound its program (DisputeGame.
/// bindProgram), the game goes to `Stepping` and StepGame plays levels 1-3 and the one-step
/// from the agreed hash at lo to the parties' hashes at hi (the worker defends); its verdict
/// (`stepGameResolved`, its timeout included) settles the game as below, no referee drawn
/// (docs/onestep.md, "Wiring").
///
/// Referees (the other games, until they go). When hi − lo = 1 the game asks for a
/// committee (`RefereesRequested`): it is drawn from the hash of a later block (the ticket,
/// FutureRandomness), by anyone calling `drawReferees` from the ticket's next block on, so no
/// caller can pick the moment that suits it. `committeeSize` distinct verifiers (never a party; free stake ≥ `refereeStake`,
/// locked until its vote is judged) are drawn by weight without replacement.
/// Each replays the interval from the agreed checkpoint at lo (or builds checkpoint 0 from
/// the inputs when lo = 0) and votes by commit–reveal, `keccak256(abi.encode(gameId, vote,
/// salt, referee))`, for the worker's hash, the challenger's hash or neither. The reveal
/// phase opens once every referee committed or the commit window ended. `resolve` tallies
/// once every committed referee revealed or the reveal window ended: the worker wins iff a
/// strict majority of the revealed votes is for the worker's hash. A committee that cannot
/// judge (nobody eligible, nobody revealed, or its ticket lapsed unsettled: `timeout`) fails
/// and another is asked for; after `MAX_REDRAWS` redraws the game is voided: no verdict, so
/// nobody is slashed or paid, both stakes are released and the task is redone.
///
/// Settlement. The loser's stake at risk (worker collateral or bond) is slashed through the
/// StakeManager: `slashWinnerBps` to the winner, `slashRefereeBps` shared by the referees who
/// voted with the outcome, the rest burned. Referees who revealed against the outcome or
/// did not reveal lose `refereePenalty` of their locked stake, burned (no party is paid from
/// the penalties of its own referees), and reputation. An auditor that had confirmed a
/// result a challenger proves wrong loses its collateral too (`AuditorSlashed`). Both parties' dispute history is recorded
/// (the challenger's only if it has an identity), except the winner's of a self-dealt game,
/// one the job's submitter plays as worker or challenger: it gains no win and no reputation
/// (its loser's record stands). Every stake in a game is at least JobMarket.MIN_COLLATERAL
/// (the worker collateral a job may set, the auditor collateral a deployment may set), so a
/// lost game pays its majority referees `slashRefereeBps` of at least that, and a win bought
/// from a sybil costs the sybil's bond. JobMarket then moves the task on
/// (`resolveDispute`). The game holds no tokens: bonds are locked stake, proceeds are StakeManager
/// credits pulled with its `withdraw()`. Pool weights of the parties are refreshed at their
/// next market touch (or by anyone through `WorkerPool.refresh`), not here.
interface IDisputeGame {
    enum GameStatus {
        None,
        Bisecting,
        AwaitingReferees,
        Committing,
        Revealing,
        Resolved,
        Voided,
        Stepping // level 0 ended; StepGame plays levels 1-3 and the one-step
    }

    enum Party {
        None,
        Worker,
        Challenger
    }

    enum Vote {
        None,
        Worker,
        Challenger,
        Neither
    }

    /// @notice One claimed checkpoint hash, its Merkle proof against the mover's root and the
    /// CID where the checkpoint can be fetched.
    struct Claim {
        bytes32 hash;
        bytes32[] proof;
        string cid;
    }

    /// @notice A game as stored. `pending` is the hash the last mover claimed at the midpoint
    /// of (lo, hi), awaiting the other party's answer; `challengerHash` the challenger's claim
    /// at the result (its opening). The hashes each party claimed at every position are in
    /// the `DisputeBisected` logs, not in storage. Clocks are blocks left, counted from `lastMoveBlock`. `deadline` ends
    /// the commit or reveal phase. `committee` counts committees drawn, `moves` the moves made
    /// (the opening included).
    struct Game {
        uint256 taskId;
        address worker;
        GameStatus status;
        Party turn;
        bool audit;
        bool workerWon;
        uint8 committee;
        uint8 moves;
        uint16 leaves;
        uint16 lo;
        uint16 hi;
        address challenger;
        uint8 seats;
        uint8 committed;
        uint8 revealed;
        uint8 votesWorker;
        uint8 votesChallenger;
        uint8 votesNeither;
        uint64 lastMoveBlock;
        uint64 deadline;
        uint64 workerClock;
        uint64 challengerClock;
        uint96 workerStake;
        uint96 challengerStake;
        bytes32 workerRoot;
        bytes32 challengerRoot;
        bytes32 pending;
        bytes32 challengerHash;
    }

    /// @notice One referee seat of the current committee (committed once `commitment` is set).
    struct Seat {
        address referee;
        Vote vote;
        bytes32 commitment;
    }

    /// @notice Deployment parameters.
    /// @param clockBlocks each party's time budget for all its moves
    /// @param commitWindow blocks referees have to commit their votes
    /// @param revealWindow blocks referees have to reveal once the reveal phase opened
    /// @param committeeSize referees per committee (odd, 1..MAX_COMMITTEE)
    /// @param refereeStake free stake a verifier needs to be drawn as a referee
    /// @param refereePenalty taken from a referee that votes against the outcome or does not reveal
    struct GameConfig {
        uint64 clockBlocks;
        uint32 commitWindow;
        uint32 revealWindow;
        uint8 committeeSize;
        uint96 refereeStake;
        uint96 refereePenalty;
    }

    // ---------------------------------------------------------------- errors

    /// @notice No game has id `gameId`.
    error DisputeNotFound(uint256 gameId);
    /// @notice Task `taskId` is already under game `gameId`.
    error DisputeAlreadyOpen(uint256 taskId, uint256 gameId);
    /// @notice The challenger's root equals the worker's: there is nothing to dispute.
    error DisputeSameRoot(uint256 taskId);
    /// @notice A worker may not challenge its own result.
    error DisputeSelfChallenge(uint256 taskId);
    /// @notice `openAuditDispute` needs a task that an audit moved to Disputed.
    error DisputeNotAuditMismatch(uint256 taskId);
    /// @notice The game is not in the status this call needs (`status` is its status).
    error DisputeWrongStatus(uint256 gameId, GameStatus status);
    /// @notice `caller` is not the party whose move it is.
    error DisputeNotYourTurn(uint256 gameId, address caller);
    /// @notice The mover's clock ran out at block `expiredAtBlock`.
    error DisputeClockExpired(uint256 gameId, uint64 expiredAtBlock);
    /// @notice The party on turn still has time until block `expiresAtBlock`.
    error DisputeClockRunning(uint256 gameId, uint64 expiresAtBlock);
    /// @notice The move carries `given` claims where `expected` are due.
    error DisputeWrongClaimCount(uint256 gameId, uint256 given, uint256 expected);
    /// @notice The claim at `position` does not prove against the mover's root.
    error DisputeProofInvalid(uint256 gameId, uint256 position, bytes32 hash);
    /// @notice A claim's CID is longer than MAX_CID_BYTES (`length` bytes).
    error DisputeCidTooLong(uint256 gameId, uint256 length);
    /// @notice `caller` does not hold seat `seat` on the game's committee.
    error DisputeNotReferee(uint256 gameId, uint256 seat, address caller);
    /// @notice The referee already committed (or revealed) its vote.
    error DisputeAlreadyVoted(uint256 gameId, address referee);
    /// @notice The vote is not Worker, Challenger or Neither.
    error DisputeInvalidVote(uint256 gameId, uint8 vote);
    /// @notice The revealed vote and salt do not hash to the referee's commitment (or a zero
    /// commitment was sent).
    error DisputeVoteMismatch(uint256 gameId, address referee);
    /// @notice The phase ends at block `deadlineBlock`, which has passed.
    error DisputeDeadlinePassed(uint256 gameId, uint64 deadlineBlock);
    /// @notice The phase lasts until block `deadlineBlock`.
    error DisputeDeadlineNotPassed(uint256 gameId, uint64 deadlineBlock);
    /// @notice A GameConfig value is out of range.
    error DisputeInvalidConfig();

    // ---------------------------------------------------------------- events

    /// @notice Game `gameId` opened on task `taskId`; `audit` when an audit mismatch opened it.
    event DisputeOpened(
        uint256 indexed gameId,
        uint256 indexed taskId,
        address indexed challenger,
        address worker,
        bytes32 workerRoot,
        bytes32 challengerRoot,
        uint16 leaves,
        uint96 bond,
        bool audit
    );
    /// @notice `mover` claimed `hashes` (with `cids`) at `positions`; the interval in dispute is
    /// now (lo, hi) and the mover has `clockLeft` blocks left.
    event DisputeBisected(
        uint256 indexed gameId,
        address indexed mover,
        uint16[] positions,
        bytes32[] hashes,
        string[] cids,
        uint16 lo,
        uint16 hi,
        uint64 clockLeft
    );
    /// @notice The bisection ended on (lo, hi = lo + 1): both parties claimed the same hash at
    /// lo (lo = 0: the inputs) and different hashes at hi (see their `DisputeBisected` claims;
    /// for an aggregation task the two roots).
    event BisectionEnded(uint256 indexed gameId, uint16 lo, uint16 hi);
    /// @notice A committee is due: it is drawn from the hash of block `ticket`, by anyone,
    /// from block ticket + 1 until ticket + 256 (after that, `timeout` counts it as failed).
    event RefereesRequested(uint256 indexed gameId, uint64 ticket);
    /// @notice Committee number `committee` was drawn; votes are committed until `commitDeadline`.
    event RefereesDrawn(uint256 indexed gameId, uint8 committee, address[] referees, uint64 commitDeadline);
    /// @notice `referee` committed its vote.
    event VoteCommitted(uint256 indexed gameId, address indexed referee);
    /// @notice The reveal phase opened; it ends at `revealDeadline`.
    event RevealPhaseOpened(uint256 indexed gameId, uint64 revealDeadline);
    /// @notice `referee` revealed `vote`.
    event VoteRevealed(uint256 indexed gameId, address indexed referee, Vote vote);
    /// @notice Committee number `committee` could not judge (no eligible verifier, nobody
    /// revealed, or its draw lapsed): a new committee is due, or the game is voided.
    event CommitteeFailed(uint256 indexed gameId, uint8 committee);
    /// @notice The game ended without a verdict (MAX_REDRAWS + 1 committees failed): nobody
    /// was slashed or paid, the task is redone.
    event DisputeVoided(uint256 indexed gameId, uint256 indexed taskId);
    /// @notice `auditor` had confirmed the result the challenger proved wrong and lost `slashed`.
    event AuditorSlashed(uint256 indexed gameId, address indexed auditor, uint256 slashed);
    /// @notice `referee` lost `penalty` of its stake for voting against the outcome
    /// (`revealed`) or for not revealing.
    event RefereePenalized(uint256 indexed gameId, address indexed referee, uint256 penalty, bool revealed);
    /// @notice `party` let its clock run out.
    event ClockExpired(uint256 indexed gameId, address indexed party);
    /// @notice The game ended: `loser` was slashed `slashed` (the tally stays in `gameOf`).
    event DisputeSettled(
        uint256 indexed gameId, uint256 indexed taskId, bool workerWon, address winner, address loser, uint256 slashed
    );

    // ---------------------------------------------------------------- parties

    /// @notice Challenge task `taskId`'s revealed result with `root` (your own commitment over
    /// the same leaves), locking a bond equal to its worker collateral from your free stake,
    /// and make the opening move: claims at `leaves` and at the first midpoint (only the
    /// first when the task has one leaf; none for an aggregation task). Reverts
    /// `DisputeAlreadyOpen`, `DisputeSameRoot`, `DisputeSelfChallenge`,
    /// `TaskNotInChallengeWindow`, `StakeInsufficientFree`, `DisputeProofInvalid`.
    function challenge(uint256 taskId, bytes32 root, Claim[] calldata claims) external returns (uint256 gameId);

    /// @notice Permissionless: open the game of a task an audit mismatch moved to Disputed.
    /// The auditor (the challenger) makes the opening move with `move`. Reverts
    /// `DisputeNotAuditMismatch`, `DisputeAlreadyOpen`.
    function openAuditDispute(uint256 taskId) external returns (uint256 gameId);

    /// @notice The party on turn moves (see the contract notice for the claims due). Reverts
    /// `DisputeWrongStatus`, `DisputeNotYourTurn`, `DisputeClockExpired`,
    /// `DisputeWrongClaimCount`, `DisputeProofInvalid`.
    function move(uint256 gameId, Claim[] calldata claims) external;

    /// @notice Permissionless: end the phase whose time ran out. Bisecting: the party on turn
    /// loses. Committing: the reveal phase opens. Reverts `DisputeClockRunning`,
    /// `DisputeDeadlineNotPassed`, `DisputeWrongStatus`.
    function timeout(uint256 gameId) external;

    // ---------------------------------------------------------------- referees

    /// @notice Permissionless once the bisection ended: draw the committee. Reverts
    /// `DisputeWrongStatus`, `DisputeNoReferees`.
    function drawReferees(uint256 gameId) external;

    /// @notice The referee on `seat` (its index in `RefereesDrawn`) commits
    /// `keccak256(abi.encode(gameId, vote, salt, referee))`.
    function commitVote(uint256 gameId, uint256 seat, bytes32 commitment) external;

    /// @notice The referee on `seat` reveals its vote (1 worker, 2 challenger, 3 neither).
    function revealVote(uint256 gameId, uint256 seat, Vote vote, bytes32 salt) external;

    /// @notice Permissionless once every committed referee revealed or the reveal window
    /// ended: tally and settle (or ask for a new committee when nobody revealed).
    function resolve(uint256 gameId) external;

    // ---------------------------------------------------------------- views

    /// @notice The stored game.
    function gameOf(uint256 gameId) external view returns (Game memory);

    /// @notice The latest game opened on `taskId` (0 if none).
    function gameOfTask(uint256 taskId) external view returns (uint256);

    /// @notice The seats of the game's current committee.
    function committeeOf(uint256 gameId) external view returns (Seat[] memory);

    /// @notice Number of games opened so far (ids are 1..gameCount).
    function gameCount() external view returns (uint256);

    /// @notice Moves after the opening that bisection takes for `leaves` checkpoints:
    /// ceil(log2(leaves)).
    function movesFor(uint16 leaves) external pure returns (uint256);

    /// @notice Shortest clock and commit/reveal window a deployment may set, in blocks.
    function MIN_PHASE_BLOCKS() external view returns (uint32);

    /// @notice Longest CID a claim may carry, in bytes.
    function MAX_CID_BYTES() external view returns (uint256);

    /// @notice Largest committee.
    function MAX_COMMITTEE() external view returns (uint8);

    /// @notice Redraws after a failed committee before the game is voided (no verdict).
    function MAX_REDRAWS() external view returns (uint8);
}
