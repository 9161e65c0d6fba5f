// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {TaskActions} from "./TaskActions.sol";
import {Traces} from "../utils/Traces.sol";
import {IJobMarket} from "contracts/interfaces/IJobMarket.sol";
import {IDisputeGame} from "contracts/interfaces/IDisputeGame.sol";
import {FutureRandomness} from "contracts/libraries/FutureRandomness.sol";
import {IWorkerPool} from "contracts/interfaces/IWorkerPool.sol";

/// @title GameActions: the market handler's dispute actions
/// @notice Challenges (C0 and V0 challenge only wrong results, with the true trace; C1
/// challenges any result with a made-up one), audit disputes, bisection moves (every party
/// plays its own trace, proofs and all, as truetrain/dispute/planner.py plans them; the
/// quitter never moves, so its clock runs out), referee draws, votes (honest referees vote
/// for whichever side's hash at the disputed position is the true one, or neither; the
/// colluding verifier votes the other way; a seat may stay silent), verdicts and every
/// game timeout.
abstract contract GameActions is TaskActions {
    using Traces for Traces.Trace;

    uint256 private constant C0 = 10;
    uint256 private constant C1 = 11;
    uint256 private constant V0 = 6;

    /// Challenge a result in its window. A wrong result is challenged by an honest challenger
    /// (C0 or V0) two times in three, else by the liar C1; a true one only by C1. The
    /// challenger stakes the bond it lacks first.
    function challenge(uint256 seed, uint256 who, uint256 lieSeed) external step {
        (uint256 id, IJobMarket.Task memory t) = _pickTask(seed, _challengeable);
        _challenge(id, t, who, lieSeed);
    }

    function openAuditDispute(uint256 seed) external step {
        (uint256 id,) = _pickTask(seed, _auditMismatch);
        _keeper(address(game), abi.encodeCall(game.openAuditDispute, (id)));
    }

    /// The party on turn moves by its own trace (the quitter never does).
    function move(uint256 seed) external step {
        (uint256 gameId, IDisputeGame.Game memory g) = _pickGame(seed, _movable);
        _move(gameId, g);
    }

    function drawReferees(uint256 seed) external step {
        (uint256 gameId,) = _pickGame(seed, _drawableCommittee);
        _keeper(address(game), abi.encodeCall(game.drawReferees, (gameId)));
    }

    /// A staker tops up or cuts its stake once a committee draw's hash is public, to steer its
    /// seats: every seat other than the mover's own stays with a verifier the draw seated
    /// before the move (issue 27, finding 2). Then the committee is drawn.
    function grindCommittee(uint256 seed, uint256 moverSeed, uint256 amount) external step {
        (uint256 gameId, IDisputeGame.Game memory g) = _pickGame(seed, _drawableCommittee);
        bytes32 random = keccak256(abi.encode(blockhash(g.deadline), bytes32(gameId)));
        bytes32 draw = keccak256(abi.encode(random, g.committee + 1));
        IWorkerPool.Requirements memory req = IWorkerPool.Requirements(0, 0, 0, game.refereeStake(), g.worker, 0, 0);
        address[] memory before = pool.drawCommittee(draw, game.committeeSize(), req, g.challenger);
        address mover = _moveStake(moverSeed, amount);
        address[] memory afterMove = pool.drawCommittee(draw, game.committeeSize(), req, g.challenger);
        // The draw's candidates come in one order fixed by the hash: a move decides only
        // whether the mover is seated. A mover that made itself ineligible leaves its seat to
        // the next candidate in that order (one newcomer); any other newcomer was steered.
        uint256 newcomers;
        for (uint256 i = 0; i < afterMove.length; ++i) {
            if (afterMove[i] != mover && !_seated(before, afterMove[i])) ++newcomers;
        }
        bool moverLeft = _seated(before, mover) && !_seated(afterMove, mover);
        _check(newcomers <= (moverLeft ? 1 : 0), "M21: a stake move steered a committee seat");
        _keeper(address(game), abi.encodeCall(game.drawReferees, (gameId)));
    }

    function _seated(address[] memory committee, address who) private pure returns (bool) {
        for (uint256 i = 0; i < committee.length; ++i) {
            if (committee[i] == who) return true;
        }
        return false;
    }

    /// Seated referees commit their votes; a seat stays silent with probability ~15 %, and
    /// the whole committee one time in eight (`_silent`).
    function commitVotes(uint256 seed, uint256 silence) external step {
        (uint256 gameId, IDisputeGame.Game memory g) = _pickGame(seed, _committing);
        _commitVotes(gameId, g, silence);
    }

    /// Referees that committed reveal (each may stay silent, as in commitVotes).
    function revealVotes(uint256 seed, uint256 silence) external step {
        (uint256 gameId, IDisputeGame.Game memory g) = _pickGame(seed, _revealing);
        _revealVotes(gameId, g, silence);
    }

    function resolve(uint256 seed) external step {
        (uint256 gameId,) = _pickGame(seed, _resolvable);
        _keeper(address(game), abi.encodeCall(game.resolve, (gameId)));
    }

    /// A game phase whose time ran out: a clock, the commit window, a lapsed referee draw.
    function gameTimeout(uint256 seed) external step {
        (uint256 gameId,) = _pickGame(seed, _gameTimeoutable);
        _keeper(address(game), abi.encodeCall(game.timeout, (gameId)));
    }

    // ================================================================ one step of any game

    /// Whatever the game at (or after) `seed` needs next: a move, the committee's draw, the
    /// votes (`aux`: which seats stay silent), the verdict, a timeout.
    function progressGame(uint256 seed, uint256 aux) external step {
        uint256 n = game.gameCount();
        for (uint256 k = 0; k < n; ++k) {
            uint256 gameId = 1 + (seed % n + k) % n;
            IDisputeGame.Game memory g = game.gameOf(gameId);
            if (_movable(gameId, g)) _move(gameId, g);
            else if (_drawableCommittee(gameId, g)) _keeper(address(game), abi.encodeCall(game.drawReferees, (gameId)));
            else if (_committing(gameId, g) && _uncommitted(gameId, aux)) _commitVotes(gameId, g, aux);
            else if (_resolvable(gameId, g)) _keeper(address(game), abi.encodeCall(game.resolve, (gameId)));
            else if (_revealing(gameId, g) && _unrevealed(gameId, aux)) _revealVotes(gameId, g, aux);
            else if (_gameTimeoutable(gameId, g)) _keeper(address(game), abi.encodeCall(game.timeout, (gameId)));
            else continue;
            return;
        }
        _skip();
    }

    // ================================================================ the steps

    /// A wrong result is challenged by an honest challenger (C0 or V0) two times in three,
    /// else by the liar C1; a true one only by C1. The challenger stakes the bond it lacks.
    function _challenge(uint256 id, IJobMarket.Task memory t, uint256 who, uint256 lieSeed) internal override {
        address challenger;
        bytes32 root;
        if (!_isTrue(t.result) && who % 3 != 0) {
            challenger = _actors[who % 3 == 1 ? C0 : V0];
            root = _truth(id);
        } else {
            challenger = _actors[C1];
            root = _lie(id, challenger, lieSeed);
        }
        uint256 bond = _jobInfo[id >> 64].collateral;
        uint256 free = stakeManager.freeStake(challenger);
        if (free < bond) _stake(challenger, bond - free);
        IDisputeGame.Claim[] memory claims =
            _isAggregation(id) ? new IDisputeGame.Claim[](0) : Traces.opening(_traceOf[root]);
        vm.prank(challenger);
        game.challenge(id, root, claims);
    }

    function _move(uint256 gameId, IDisputeGame.Game memory g) internal {
        bool byWorker = g.turn == IDisputeGame.Party.Worker;
        Traces.Trace memory trace = _traceOf[byWorker ? g.workerRoot : g.challengerRoot];
        IDisputeGame.Claim[] memory claims = Traces.claims(g, trace, byWorker);
        vm.prank(byWorker ? g.worker : g.challenger);
        game.move(gameId, claims);
    }

    function _commitVotes(uint256 gameId, IDisputeGame.Game memory g, uint256 silence) internal {
        IDisputeGame.Seat[] memory seats = game.committeeOf(gameId);
        uint256 sent;
        for (uint256 i = 0; i < seats.length; ++i) {
            if (_silent(silence, i) || seats[i].commitment != 0) continue;
            address referee = seats[i].referee;
            uint8 vote = _vote(g, referee);
            vm.prank(referee);
            game.commitVote(gameId, i, keccak256(abi.encode(gameId, vote, _voteSalt(gameId, g.committee, i), referee)));
            sent += 1;
        }
        if (sent == 0) _skip();
    }

    function _revealVotes(uint256 gameId, IDisputeGame.Game memory g, uint256 silence) internal {
        IDisputeGame.Seat[] memory seats = game.committeeOf(gameId);
        uint256 sent;
        for (uint256 i = 0; i < seats.length; ++i) {
            if (_silent(silence, i) || seats[i].commitment == 0 || seats[i].vote != IDisputeGame.Vote.None) continue;
            address referee = seats[i].referee;
            vm.prank(referee);
            game.revealVote(gameId, i, IDisputeGame.Vote(_vote(g, referee)), _voteSalt(gameId, g.committee, i));
            sent += 1;
        }
        if (sent == 0) _skip();
    }

    /// Whether some seat that is not silent under `silence` has not committed yet.
    function _uncommitted(uint256 gameId, uint256 silence) internal view returns (bool) {
        IDisputeGame.Seat[] memory seats = game.committeeOf(gameId);
        for (uint256 i = 0; i < seats.length; ++i) {
            if (!_silent(silence, i) && seats[i].commitment == 0) return true;
        }
        return false;
    }

    /// Whether some seat that is not silent under `silence` committed and has not revealed.
    function _unrevealed(uint256 gameId, uint256 silence) internal view returns (bool) {
        IDisputeGame.Seat[] memory seats = game.committeeOf(gameId);
        for (uint256 i = 0; i < seats.length; ++i) {
            if (!_silent(silence, i) && seats[i].commitment != 0 && seats[i].vote == IDisputeGame.Vote.None) {
                return true;
            }
        }
        return false;
    }

    // ================================================================ internals

    /// Seat `seat` stays silent: byte `seat` of hash(`silence`) below 40 (~15 %), or the whole
    /// committee when its top byte is below 32 (1/8: a committee that cannot judge).
    function _silent(uint256 silence, uint256 seat) internal pure returns (bool) {
        uint256 h = uint256(keccak256(abi.encode(silence))); // small fuzz values spread out
        return (h >> (8 * seat)) & 0xff < 40 || h >> 248 < 32;
    }

    function _voteSalt(uint256 gameId, uint8 committee, uint256 seat) internal pure returns (bytes32) {
        return keccak256(abi.encode("vote", gameId, committee, seat));
    }

    /// An honest referee's vote on the disputed position hi (leaf hi - 1): 1 when the
    /// worker's hash there is the true one, 2 when the challenger's is, else 3 (neither); the
    /// colluding verifier votes the other way.
    function _vote(IDisputeGame.Game memory g, address referee) internal view returns (uint8 vote) {
        uint256 at = g.hi - 1;
        if (_traceOf[g.workerRoot].trueAt(at)) vote = 1;
        else vote = _traceOf[g.challengerRoot].trueAt(at) ? 2 : 3;
        if (kindOf(referee) == Kind.ColludingVerifier) vote = vote == 1 ? 2 : 1;
    }

    function _clockLeft(IDisputeGame.Game memory g) internal pure returns (uint256) {
        return g.lastMoveBlock + (g.turn == IDisputeGame.Party.Worker ? g.workerClock : g.challengerClock);
    }

    // -------- game predicates

    function _movable(uint256, IDisputeGame.Game memory g) internal view returns (bool) {
        if (g.status != IDisputeGame.GameStatus.Bisecting || block.number > _clockLeft(g)) return false;
        address mover = g.turn == IDisputeGame.Party.Worker ? g.worker : g.challenger;
        return kindOf(mover) != Kind.QuittingWorker;
    }

    function _drawableCommittee(uint256, IDisputeGame.Game memory g) internal view returns (bool) {
        return g.status == IDisputeGame.GameStatus.AwaitingReferees && block.number > g.deadline
            && !FutureRandomness.lapsed(g.deadline);
    }

    function _committing(uint256, IDisputeGame.Game memory g) internal view returns (bool) {
        return g.status == IDisputeGame.GameStatus.Committing && block.number <= g.deadline;
    }

    function _revealing(uint256, IDisputeGame.Game memory g) internal view returns (bool) {
        return g.status == IDisputeGame.GameStatus.Revealing && block.number <= g.deadline;
    }

    function _resolvable(uint256, IDisputeGame.Game memory g) internal view returns (bool) {
        return g.status == IDisputeGame.GameStatus.Revealing && (g.revealed >= g.committed || block.number > g.deadline);
    }

    function _gameTimeoutable(uint256, IDisputeGame.Game memory g) internal view returns (bool) {
        if (g.status == IDisputeGame.GameStatus.Bisecting) return block.number > _clockLeft(g);
        if (g.status == IDisputeGame.GameStatus.Committing) return block.number > g.deadline;
        return g.status == IDisputeGame.GameStatus.AwaitingReferees && FutureRandomness.lapsed(g.deadline);
    }
}
