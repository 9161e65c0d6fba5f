// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IOneStepKind, IStepGameReceiver, StepEntry} from "./interfaces/IStepGame.sol";
import {MerkleCommitment} from "./libraries/MerkleCommitment.sol";
import {StepTrees} from "./libraries/StepTrees.sol";
import {OneStepGemm} from "./numerics/OneStepGemm.sol";
import {TensorMerkle} from "./numerics/TensorMerkle.sol";

/// @title StepGame
/// @notice Levels 1 to 3 of a repro dispute and its one-step (docs/onestep.md, "The step
/// game"): from one checkpoint interval whose start both parties agree on, down to one
/// element of one operator application, which the chain recomputes. The honest party wins
/// whether it defends or challenges; a party that does not move in time loses on its clock.
///
/// Level 0's leaves are checkpoint hashes, `keccak256(abi.encode(step, rngKey, layoutHash,
/// tensorsRoot))` (truetrain/training/checkpoint.py), the tensors root a state root. The
/// defender's first move opens the agreed start's hash (its tensors root is where the game
/// starts); each party's level-1 commitment ends on a state root that, with the start's step
/// advanced by the interval's steps and its rng key and layout, hashes to the party's end.
///
/// Level 1: each party commits a Merkle root over its state roots after each step of the
/// interval (its last leaf its level-0 end's); both reveal the children of their current node,
/// the defender first, and the game goes to the left child where those differ, else right,
/// down to the first step whose end state roots differ (the earlier leaves, so the step's
/// start, agreed). Level 2: each party commits its trace root of that step (a Merkle root over
/// `keccak256(abi.encode(t, output root))`), shown consistent with its end state root (the
/// program's layout: each state tensor after the step is an update entry's output or the
/// start's); the same descent ends at the first application `t` whose output roots differ.
/// Level 3: the defender opens entry `t` of the program and its output root, reveals the two
/// children of each node of that output's tree (TensorMerkle), the challenger picks one, down
/// to a chunk of 64 words; the defender reveals the chunk; the challenger names one word and
/// sends the one-step: the inputs opened against their agreed roots, the kind's verifier's
/// element compared with the defender's: equal, the challenger loses; different, the defender.
contract StepGame {
    /// @notice Where a game stands (whose move it is is `turn`).
    enum Stage {
        None,
        Steps, // level 1: the parties commit their per-step state roots
        StepDescent, // level 1: the descent to the first differing step
        Trace, // level 2: the parties commit their trace roots of that step
        TraceDescent, // level 2: the descent to the first differing application
        Output, // level 3: the defender opens the application's entry and output root
        ElementDescent, // level 3: the descent over the output's tree
        Chunk, // level 3: the defender reveals the leaf's chunk
        OneStep, // the challenger's one-step
        Done
    }

    /// @notice How a game ended.
    enum Reason {
        OneStepAgreed, // the chain's element equals the defender's: the challenger loses
        OneStepDiffered, // it does not: the defender loses
        ClockExpired // the party to move ran out of time
    }

    uint8 internal constant DEFENDER = 0;
    uint8 internal constant CHALLENGER = 1;
    /// @notice Most state tensors, output dimensions; most blocks on a clock.
    uint256 public constant MAX_STATE = StepTrees.MAX_LEAVES;
    uint256 public constant MAX_DIMS = 8;
    uint256 public constant MAX_CLOCK = 1 << 40;

    /// @notice What `open` is given: the parties; the receiver of the verdict (0: none);
    /// the program (its entries' root, their count and the state layout, truetrain/trace/
    /// program.py); the interval's agreed start checkpoint hash, the Merkle root over its
    /// steps' batch roots, its number of steps; each party's end checkpoint hash (level 0's
    /// leaves, all three); each party's clock in blocks; `firstBatch`: the leaf of the
    /// interval's first step under `batches` (a job's data root holds every task's steps:
    /// DisputeGame's wiring, docs/onestep.md; 0 for a root over the interval's steps alone).
    struct Setup {
        address defender;
        address challenger;
        address receiver;
        bytes32 programRoot;
        uint256 entries;
        uint256[] layout;
        bytes32 startHash;
        bytes32 batches;
        uint256 steps;
        bytes32 defenderEndHash;
        bytes32 challengerEndHash;
        uint256 clock;
        uint256 firstBatch;
    }

    /// @notice A checkpoint hash's preimage: the checkpoint's step, its rng key, the hash of
    /// its tensors' names, dtypes and shapes, and its state root (over the tensors' roots).
    struct Checkpoint {
        uint256 step;
        bytes32 rngKey;
        bytes32 layoutHash;
        bytes32 tensorsRoot;
    }

    /// @notice A game's state. `node[p]`: party p's current node at levels 1 and 2 (at level
    /// 3 `node[0]` is the defender's); `pending`: the defender's children awaiting the
    /// challenger's; `index`, `height`, `size`: the current node's position, the levels
    /// below it and the leaves of the tree (padding past them).
    struct Game {
        address[2] party;
        address receiver;
        Stage stage;
        uint8 turn; // the party to move; once Done, the winner
        uint64 turnStart;
        bool undelivered; // Done, and the receiver refused the verdict: `deliver` retries
        uint64[2] clock;
        bytes32 programRoot;
        bytes32 layoutHash; // the program's state layout's
        bytes32 batches;
        uint64 entries;
        uint64 steps;
        uint64 firstBatch; // the leaf of the interval's first step under `batches`
        bytes32[2] end; // the parties' end checkpoint hashes
        uint256 endStep; // the start's step plus the steps
        bytes32 rngKey; // the start's, the ends' too
        bytes32 tensorsLayout; // the start's layoutHash, the ends' too
        bytes32[2] node;
        bytes32[2] pending;
        uint64 index;
        uint64 height;
        uint64 size;
        bytes32 rootD; // the defender's level-1 root, then its trace root
        bytes32 state; // the start's hash, its state root once opened, then the disputed step's
        uint64 step;
        uint64 app;
        uint64 words; // the output's words (elements times words an element)
        bytes32 entryHash;
    }

    /// @notice Party `p`'s consistency of its trace with its end state root: the step's start
    /// state tensors' roots (`prev`, Merkle root the agreed start), the output roots of the
    /// layout's update entries in state order (`updated`, each with a proof against the trace
    /// root), and for the defender where the step does not begin the interval, the start's
    /// proof against its level-1 root.
    struct TraceClaim {
        bytes32 root;
        uint256[] layout;
        bytes32[] prev;
        bytes32[] updated;
        bytes32[][] proofs;
        bytes32[] startProof;
    }

    /// @notice An input's root and its proof: against the defender's trace root (an earlier
    /// entry), the step's start state root (a state tensor) or the step's batch root.
    struct InputRoot {
        bytes32 root;
        bytes32[] proof;
    }

    /// @notice The one-step: the program entry, the revealed chunk and the word named in it,
    /// the inputs' roots, the step's batch root with its proof against the batches (only when
    /// an input is the batch's), the kind's openings.
    struct OneStepClaim {
        bytes entry;
        bytes chunk;
        uint256 word;
        InputRoot[] inputs;
        bytes32 batchRoot;
        bytes32[] batchProof;
        OneStepGemm.Opening[] openings;
    }

    /// @notice Kind (keccak256 of its name) -> its one-step contract.
    mapping(bytes32 kind => address) public verifierOf;
    mapping(uint256 id => Game) internal _games;
    /// @notice Games opened so far (ids from 1).
    uint256 public gameCount;

    /// @notice A kind's one-step contract was registered (at construction only).
    event KindRegistered(bytes32 indexed kind, address verifier);
    /// @notice A game was opened for `program` (`keccak256(abi.encode(root, entries, layout))`).
    event GameOpened(uint256 indexed id, address defender, address challenger, bytes32 program, uint256 steps);
    /// @notice The defender opened the agreed start checkpoint's hash.
    event StartOpened(uint256 indexed id, uint256 step, bytes32 rngKey, bytes32 layoutHash, bytes32 tensorsRoot);
    /// @notice Party `party` committed its level-1 root, its last leaf `end`.
    event StepsCommitted(uint256 indexed id, uint8 party, bytes32 root, bytes32 end);
    /// @notice Party `party` revealed the children of its node at `index` (`height` levels up).
    event ChildrenRevealed(uint256 indexed id, uint8 party, uint256 index, uint256 height, bytes32 left, bytes32 right);
    /// @notice Level `level` ended on leaf `position` (a step, an application).
    event LevelEnded(uint256 indexed id, uint8 level, uint256 position);
    /// @notice Party `party` committed its trace root of the disputed step.
    event TraceCommitted(uint256 indexed id, uint8 party, bytes32 root);
    /// @notice The defender opened application `app`'s entry and output root.
    event OutputOpened(uint256 indexed id, uint256 app, bytes32 root, uint256 words);
    /// @notice The challenger picked a child: the node now at `index`.
    event ChildPicked(uint256 indexed id, uint256 index, uint256 height);
    /// @notice The defender revealed the chunk of leaf `leaf`.
    event ChunkRevealed(uint256 indexed id, uint256 leaf, bytes chunk);
    /// @notice The game ended.
    event GameResolved(uint256 indexed id, address winner, address loser, Reason reason, uint256 value);
    /// @notice The receiver refused game `id`'s verdict (it reverted, or ran out of gas): the
    /// game is over all the same, and anyone may `deliver` the verdict again.
    event VerdictUndelivered(uint256 indexed id);
    /// @notice Game `id`'s verdict reached its receiver on a later `deliver`.
    event VerdictDelivered(uint256 indexed id);

    /// @notice The constructor's kinds and verifiers do not pair up, or one is zero.
    error StepKindsInvalid();
    /// @notice A checkpoint's preimage hashes to `got`, not to its hash `expected`.
    error StepPreimageInvalid(bytes32 expected, bytes32 got);
    /// @notice `open`'s setup is unusable (field `field` of Setup, numbered from 0).
    error StepSetupInvalid(uint256 field);
    /// @notice The game is not at a stage this call moves (it is at `stage`).
    error StepStageInvalid(uint256 id, Stage stage);
    /// @notice It is `expected`'s move.
    error StepNotYourTurn(address expected);
    /// @notice The mover's clock ran out (`elapsed` blocks against `budget`): only `timeout`.
    error StepClockExpired(uint256 elapsed, uint256 budget);
    /// @notice The party to move still has time (`remaining` blocks).
    error StepClockRunning(uint256 remaining);
    /// @notice An opening does not hash to the mover's commitment `expected`.
    error StepOpeningInvalid(bytes32 expected, bytes32 got);
    /// @notice A revealed node where the tree holds padding only is not the padding node, or a
    /// chunk's zero padding is not zero.
    error StepPaddingInvalid(uint256 index, uint256 height);
    /// @notice The challenger picked a subtree holding padding only.
    error StepPickOutOfRange(uint256 index, uint256 height);
    /// @notice The layout is not the game's, or the claim's lists do not fit it.
    error StepLayoutInvalid();
    /// @notice Game `id` has no verdict its receiver refused.
    error StepNothingToDeliver(uint256 id);
    /// @notice A trace does not give the mover's end state root.
    error StepStateInconsistent(bytes32 expected, bytes32 got);
    /// @notice The entry is not the opened one, or it is malformed.
    error StepEntryInvalid();
    /// @notice Word `word` is past the output's `words`, or not in the chunk.
    error StepElementOutOfRange(uint256 word, uint256 words);
    /// @notice Input `k`'s reference or root is not one the game can open.
    error StepInputInvalid(uint256 k);
    /// @notice No one-step contract computes `kind`.
    error StepKindUnsupported(bytes32 kind);

    /// @param kinds keccak256 of each kind's name; @param verifiers its one-step contract.
    constructor(bytes32[] memory kinds, address[] memory verifiers) {
        if (kinds.length != verifiers.length) revert StepKindsInvalid();
        for (uint256 k = 0; k < kinds.length; ++k) {
            if (verifiers[k] == address(0) || verifierOf[kinds[k]] != address(0)) revert StepKindsInvalid();
            verifierOf[kinds[k]] = verifiers[k];
            emit KindRegistered(kinds[k], verifiers[k]);
        }
    }

    // --- opening and level 1 ---------------------------------------------------------------

    /// @notice Open a game; the defender moves first. Returns its id.
    function open(Setup calldata s) external returns (uint256 id) {
        _checkSetup(s);
        id = ++gameCount;
        Game storage g = _games[id];
        g.party = [s.defender, s.challenger];
        g.receiver = s.receiver;
        g.stage = Stage.Steps;
        g.turnStart = uint64(block.number);
        g.clock = [uint64(s.clock), uint64(s.clock)];
        g.programRoot = s.programRoot;
        g.layoutHash = keccak256(abi.encode(s.layout));
        g.batches = s.batches;
        g.entries = uint64(s.entries);
        g.steps = uint64(s.steps);
        g.firstBatch = uint64(s.firstBatch);
        g.end = [s.defenderEndHash, s.challengerEndHash];
        g.state = s.startHash;
        emit GameOpened(id, s.defender, s.challenger, keccak256(abi.encode(s.programRoot, s.entries, s.layout)), s.steps);
    }

    /// @notice Level 1: commit `root`, the Merkle root over the state roots after each step of
    /// the interval; `lastProof` shows its last leaf is `end`, the state root of the caller's
    /// end checkpoint. The defender's move first opens the start's hash (`start`); the
    /// challenger's `start` is not read.
    function commitSteps(
        uint256 id,
        bytes32 root,
        bytes32 end,
        bytes32[] calldata lastProof,
        Checkpoint calldata start
    ) external {
        Game storage g = _move(id, Stage.Steps);
        uint8 p = g.turn;
        if (p == DEFENDER) _openStart(g, id, start);
        bytes32 endHash = keccak256(abi.encode(g.endStep, g.rngKey, g.tensorsLayout, end));
        if (endHash != g.end[p]) revert StepPreimageInvalid(g.end[p], endHash);
        MerkleCommitment.requireValid(root, g.steps - 1, end, lastProof);
        g.node[p] = root;
        emit StepsCommitted(id, p, root, end);
        if (p == DEFENDER) {
            g.turn = CHALLENGER;
            return;
        }
        g.rootD = g.node[DEFENDER];
        _descend(g, id, Stage.StepDescent, g.steps);
    }

    /// @notice Levels 1 and 2: reveal the children of the caller's current node (the
    /// defender, then the challenger); level 3: the defender's.
    function reveal(uint256 id, bytes32 left, bytes32 right) external {
        Game storage g = _games[id];
        Stage stage = g.stage;
        if (stage != Stage.StepDescent && stage != Stage.TraceDescent && stage != Stage.ElementDescent) {
            revert StepStageInvalid(id, stage);
        }
        _move(id, stage);
        uint8 p = g.turn;
        bytes32 parent = MerkleCommitment.parentNode(left, right);
        if (parent != g.node[p]) revert StepOpeningInvalid(g.node[p], parent);
        uint256 h = g.height - 1;
        if ((2 * uint256(g.index) + 1) << h >= g.size && right != StepTrees.padding(h)) {
            revert StepPaddingInvalid(2 * uint256(g.index) + 1, h);
        }
        emit ChildrenRevealed(id, p, g.index, g.height, left, right);
        if (p == DEFENDER) {
            g.pending = [left, right];
            g.turn = CHALLENGER;
            return;
        }
        bool goRight = g.pending[0] == left;
        g.node = goRight ? [g.pending[1], right] : [g.pending[0], left];
        g.index = 2 * g.index + (goRight ? 1 : 0);
        g.height = uint64(h);
        g.turn = DEFENDER;
        if (h == 0) _levelEnded(g, id);
    }

    // --- level 2 ---------------------------------------------------------------------------

    /// @notice Level 2: commit the trace root of the disputed step, shown to give the caller's
    /// end state root from the agreed start (`c`).
    function commitTrace(uint256 id, TraceClaim calldata c) external {
        Game storage g = _move(id, Stage.Trace);
        uint8 p = g.turn;
        uint256 n = c.layout.length;
        if (keccak256(abi.encode(c.layout)) != g.layoutHash || c.prev.length != n || c.updated.length != c.proofs.length)
        {
            revert StepLayoutInvalid();
        }
        bytes32 start = StepTrees.rootOf(c.prev);
        if (p == DEFENDER) {
            if (g.step == 0) {
                if (start != g.state) revert StepStateInconsistent(g.state, start);
            } else {
                MerkleCommitment.requireValid(g.rootD, g.step - 1, start, c.startProof);
            }
            g.state = start;
        } else if (start != g.state) {
            revert StepStateInconsistent(g.state, start);
        }
        bytes32 next = _nextState(c);
        bytes32 leaf = MerkleCommitment.leafNode(next);
        if (leaf != g.node[p]) revert StepStateInconsistent(g.node[p], leaf);
        g.node[p] = c.root;
        emit TraceCommitted(id, p, c.root);
        if (p == DEFENDER) {
            g.rootD = c.root;
            g.turn = CHALLENGER;
            return;
        }
        _descend(g, id, Stage.TraceDescent, g.entries);
    }

    // --- level 3 ---------------------------------------------------------------------------

    /// @notice Level 3: the defender opens the disputed application's program entry
    /// (`entry`, its proof against the program root) and its output root.
    function openOutput(uint256 id, bytes calldata entry, bytes32[] calldata proof, bytes32 outputRoot) external {
        Game storage g = _move(id, Stage.Output);
        MerkleCommitment.requireValid(g.programRoot, g.app, keccak256(entry), proof);
        bytes32 leaf = MerkleCommitment.leafNode(keccak256(abi.encode(uint256(g.app), outputRoot)));
        if (leaf != g.node[DEFENDER]) revert StepOpeningInvalid(g.node[DEFENDER], leaf);
        StepEntry.Entry memory e = _decode(entry);
        uint256 words = e.words;
        for (uint256 k = 0; k < e.shape.length; ++k) {
            words *= e.shape[k];
        }
        if (words == 0 || words >> 64 != 0) revert StepEntryInvalid();
        g.entryHash = keccak256(entry);
        g.words = uint64(words);
        g.node[DEFENDER] = outputRoot;
        emit OutputOpened(id, g.app, outputRoot, words);
        uint256 leaves = (words + TensorMerkle.CHUNK - 1) / TensorMerkle.CHUNK;
        g.index = 0;
        g.size = uint64(leaves);
        g.height = uint64(TensorMerkle.ceilLog2(leaves));
        g.stage = g.height == 0 ? Stage.Chunk : Stage.ElementDescent;
    }

    /// @notice Level 3: the challenger picks the defender's left or right child.
    function pick(uint256 id, bool goRight) external {
        Game storage g = _games[id];
        if (g.stage != Stage.ElementDescent || g.turn != CHALLENGER) revert StepStageInvalid(id, g.stage);
        _move(id, Stage.ElementDescent);
        uint256 h = g.height - 1;
        uint256 index = 2 * uint256(g.index) + (goRight ? 1 : 0);
        if (index << h >= g.size) revert StepPickOutOfRange(index, h);
        g.node[DEFENDER] = g.pending[goRight ? 1 : 0];
        g.index = uint64(index);
        g.height = uint64(h);
        g.turn = DEFENDER;
        if (h == 0) g.stage = Stage.Chunk;
        emit ChildPicked(id, index, h);
    }

    /// @notice Level 3: the defender reveals the chunk (64 words) of the picked leaf.
    function revealChunk(uint256 id, bytes calldata chunk) external {
        Game storage g = _move(id, Stage.Chunk);
        _checkChunk(g, chunk);
        uint256 first = uint256(g.index) * TensorMerkle.CHUNK;
        for (uint256 w = g.words > first ? g.words - first : 0; w < TensorMerkle.CHUNK; ++w) {
            if (bytes4(chunk[4 * w:4 * w + 4]) != 0) revert StepPaddingInvalid(g.index, 0);
        }
        g.stage = Stage.OneStep;
        g.turn = CHALLENGER;
        emit ChunkRevealed(id, g.index, chunk);
    }

    /// @notice The one-step: the challenger names word `c.word` of the revealed chunk and
    /// opens the application's inputs; the kind's verifier recomputes the element and the
    /// game ends: the defender's element equal to it, the challenger loses, else the defender.
    function oneStep(uint256 id, OneStepClaim calldata c) external {
        Game storage g = _move(id, Stage.OneStep);
        if (keccak256(c.entry) != g.entryHash) revert StepEntryInvalid();
        _checkChunk(g, c.chunk);
        uint256 word = uint256(g.index) * TensorMerkle.CHUNK + c.word;
        if (c.word >= TensorMerkle.CHUNK || word >= g.words) revert StepElementOutOfRange(word, g.words);
        StepEntry.Entry memory e = _decode(c.entry);
        address verifier = verifierOf[e.kind];
        if (verifier == address(0)) revert StepKindUnsupported(e.kind);
        uint256 value = IOneStepKind(verifier).element(e, _inputs(g, e, c), word / e.words, c.openings);
        uint256 at = e.words == 2 ? c.word & ~uint256(1) : c.word;
        uint256 claimed = uint256(bytes32(c.chunk[4 * at:4 * at + 4 * e.words])) >> (256 - 32 * e.words);
        bool agreed = value == claimed;
        _resolve(g, id, agreed ? DEFENDER : CHALLENGER, agreed ? Reason.OneStepAgreed : Reason.OneStepDiffered, value);
    }

    /// @notice End a game whose party to move ran out of time: it loses. Anyone may call.
    function timeout(uint256 id) external {
        Game storage g = _games[id];
        if (g.stage == Stage.None || g.stage == Stage.Done) revert StepStageInvalid(id, g.stage);
        uint8 p = g.turn;
        uint256 elapsed = block.number - g.turnStart;
        if (elapsed <= g.clock[p]) revert StepClockRunning(g.clock[p] - elapsed);
        _resolve(g, id, 1 - p, Reason.ClockExpired, 0);
    }

    /// @notice Hand game `id`'s verdict to its receiver again (anyone), after it refused it;
    /// a refusal now reverts this call and the verdict stays undelivered.
    function deliver(uint256 id) external {
        Game storage g = _games[id];
        if (!g.undelivered) revert StepNothingToDeliver(id);
        g.undelivered = false;
        emit VerdictDelivered(id);
        IStepGameReceiver(g.receiver).stepGameResolved(id, g.party[g.turn], g.party[1 - g.turn]);
    }

    // --- views -----------------------------------------------------------------------------

    /// @notice Where game `id` stands: its stage, whose move (0 defender, 1 challenger), the
    /// clocks left as of the turn's start, the block the turn began, the current position.
    function status(uint256 id)
        external
        view
        returns (Stage stage, uint8 turn, uint64[2] memory clock, uint64 turnStart, uint64 index, uint64 height)
    {
        Game storage g = _games[id];
        return (g.stage, g.turn, g.clock, g.turnStart, g.index, g.height);
    }

    /// @notice The disputed step (level 1's end) and application (level 2's end) of game `id`,
    /// and its start state root (the interval's start hash until the defender opens it).
    function disputed(uint256 id) external view returns (uint64 step, uint64 app, bytes32 startState) {
        Game storage g = _games[id];
        return (g.step, g.app, g.state);
    }

    // --- internals -------------------------------------------------------------------------

    function _checkSetup(Setup calldata s) private pure {
        if (s.defender == address(0) || s.defender == s.challenger) revert StepSetupInvalid(0);
        if (s.challenger == address(0)) revert StepSetupInvalid(1);
        if (s.entries == 0 || s.entries >> 32 != 0) revert StepSetupInvalid(4);
        if (s.layout.length == 0 || s.layout.length > MAX_STATE) revert StepSetupInvalid(5);
        for (uint256 k = 0; k < s.layout.length; ++k) {
            if (s.layout[k] > s.entries) revert StepSetupInvalid(5);
        }
        if (s.steps == 0 || s.steps >> 32 != 0) revert StepSetupInvalid(8);
        if (s.defenderEndHash == s.challengerEndHash) revert StepSetupInvalid(10);
        if (s.clock == 0 || s.clock > MAX_CLOCK) revert StepSetupInvalid(11);
        if (s.firstBatch >> 32 != 0) revert StepSetupInvalid(12);
    }

    /// @dev Check that game `id` is at `stage` and the caller is the party to move with time
    /// left; charge the elapsed blocks to its clock and start the next turn.
    function _move(uint256 id, Stage stage) private returns (Game storage g) {
        g = _games[id];
        if (g.stage != stage) revert StepStageInvalid(id, g.stage);
        uint8 p = g.turn;
        if (msg.sender != g.party[p]) revert StepNotYourTurn(g.party[p]);
        uint256 elapsed = block.number - g.turnStart;
        if (elapsed > g.clock[p]) revert StepClockExpired(elapsed, g.clock[p]);
        g.clock[p] -= uint64(elapsed);
        g.turnStart = uint64(block.number);
    }

    /// @dev The start's preimage: it must hash to the agreed start; the game starts from its
    /// state root, and the ends' step, rng key and layout follow from it.
    function _openStart(Game storage g, uint256 id, Checkpoint calldata s) private {
        bytes32 h = keccak256(abi.encode(s));
        if (h != g.state) revert StepPreimageInvalid(g.state, h);
        g.state = s.tensorsRoot;
        g.endStep = s.step + g.steps;
        g.rngKey = s.rngKey;
        g.tensorsLayout = s.layoutHash;
        emit StartOpened(id, s.step, s.rngKey, s.layoutHash, s.tensorsRoot);
    }

    /// @dev Start a two-sided descent over `size` leaves from the parties' roots.
    function _descend(Game storage g, uint256 id, Stage stage, uint256 size) private {
        g.stage = stage;
        g.turn = DEFENDER;
        g.index = 0;
        g.size = uint64(size);
        g.height = uint64(TensorMerkle.ceilLog2(size));
        if (g.height == 0) _levelEnded(g, id);
    }

    /// @dev A two-sided descent reached its leaf: level 1 goes to the step's traces, level 2
    /// to the application's output.
    function _levelEnded(Game storage g, uint256 id) private {
        if (g.stage == Stage.StepDescent) {
            g.step = g.index;
            g.stage = Stage.Trace;
            emit LevelEnded(id, 1, g.index);
        } else {
            g.app = g.index;
            g.stage = Stage.Output;
            emit LevelEnded(id, 2, g.index);
        }
    }

    /// @dev The state root after the step that `c` implies (each tensor the start's, or its
    /// update entry's output root proven in the trace).
    function _nextState(TraceClaim calldata c) private pure returns (bytes32) {
        uint256 n = c.layout.length;
        bytes32[] memory next = new bytes32[](n);
        uint256 u;
        for (uint256 s = 0; s < n; ++s) {
            uint256 at = c.layout[s];
            if (at == 0) {
                next[s] = c.prev[s];
                continue;
            }
            if (u == c.updated.length) revert StepLayoutInvalid();
            MerkleCommitment.requireValid(c.root, at - 1, keccak256(abi.encode(at - 1, c.updated[u])), c.proofs[u]);
            next[s] = c.updated[u++];
        }
        if (u != c.updated.length) revert StepLayoutInvalid();
        return StepTrees.rootOf(next);
    }

    /// @dev The entry's input descriptors, each root opened against what the game agreed
    /// (an earlier entry against the defender's trace root, a state tensor against the
    /// step's start, a batch tensor against the step's batch root), then one empty one.
    function _inputs(Game storage g, StepEntry.Entry memory e, OneStepClaim calldata c)
        private
        view
        returns (OneStepGemm.Tensor[] memory t)
    {
        uint256 n = e.inputs.length;
        if (c.inputs.length != n || e.dims.length != 2 * n) revert StepInputInvalid(n);
        t = new OneStepGemm.Tensor[](n + 1);
        bool batchOpened;
        for (uint256 k = 0; k < n; ++k) {
            uint256 source = e.inputs[k] >> 32;
            uint256 index = e.inputs[k] & 0xFFFFFFFF;
            bytes32 root = c.inputs[k].root;
            bytes32 leaf = root;
            bytes32 against = g.state;
            if (source == 0) {
                if (index >= g.app) revert StepInputInvalid(k);
                leaf = keccak256(abi.encode(index, root));
                against = g.rootD;
            } else if (source == 2) {
                if (!batchOpened) {
                    MerkleCommitment.requireValid(g.batches, g.firstBatch + g.step, c.batchRoot, c.batchProof);
                    batchOpened = true;
                }
                against = c.batchRoot;
            } else if (source != 1) {
                revert StepInputInvalid(k);
            }
            MerkleCommitment.requireValid(against, index, leaf, c.inputs[k].proof);
            t[k] = OneStepGemm.Tensor(root, e.dims[2 * k], e.dims[2 * k + 1]);
        }
    }

    function _checkChunk(Game storage g, bytes calldata chunk) private view {
        bytes32 leaf = chunk.length == TensorMerkle.CHUNK_BYTES ? MerkleCommitment.leafNode(keccak256(chunk)) : bytes32(0);
        if (leaf != g.node[DEFENDER]) revert StepOpeningInvalid(g.node[DEFENDER], leaf);
    }

    function _decode(bytes calldata entry) private pure returns (StepEntry.Entry memory e) {
        (e.kind, e.output, e.words, e.shape, e.inputs, e.attributes, e.dims) =
            abi.decode(entry, (bytes32, uint256, uint256, uint256[], uint256[], uint256[], uint256[]));
        if ((e.words != 1 && e.words != 2) || e.shape.length > MAX_DIMS) revert StepEntryInvalid();
    }

    /// @dev The game ends here whatever its receiver does with the verdict: a receiver that
    /// refuses it (a revert, or a mover who sent too little gas for it) leaves the verdict
    /// undelivered, and `deliver` hands it over again, so no move is ever blocked by settlement.
    function _resolve(Game storage g, uint256 id, uint256 winner, Reason reason, uint256 value) private {
        g.stage = Stage.Done;
        g.turn = uint8(winner);
        emit GameResolved(id, g.party[winner], g.party[1 - winner], reason, value);
        if (g.receiver == address(0)) return;
        try IStepGameReceiver(g.receiver).stepGameResolved(id, g.party[winner], g.party[1 - winner]) {}
        catch {
            g.undelivered = true;
            emit VerdictUndelivered(id);
        }
    }
}
