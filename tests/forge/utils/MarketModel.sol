// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {MarketFixture} from "./MarketFixture.sol";
import {MarketHandler} from "../handlers/MarketHandler.sol";
import {IJobMarket} from "contracts/interfaces/IJobMarket.sol";
import {IDisputeGame} from "contracts/interfaces/IDisputeGame.sol";
import {IStakeManager} from "contracts/interfaces/IStakeManager.sol";
import {Stages} from "./Stages.sol";
import {FutureRandomness} from "contracts/libraries/FutureRandomness.sol";

/// @title MarketModel: what the market's state implies, for the market invariants
/// @notice Reads the stack's state and derives what it must hold: the stake every live task
/// and game keeps locked and the pool slots it keeps (`_liveWork`), what each job's escrow
/// must be (`_checkJobEscrows`), and, for every state past its deadline, which
/// permissionless exit must succeed (`_checkTaskExit`, `_checkGameExit`: tried in a
/// snapshot of the state, so nothing stays changed).
abstract contract MarketModel is MarketFixture {
    uint8 private constant FLAG_CHALLENGED = 4;
    /// TaskFlow.FLAG_RELEASED: an aggregation task that won its audit's game and waits for its
    /// round's shards holds nothing.
    uint8 private constant FLAG_RELEASED = 128;
    /// forge's console.log address (forge prints what is sent to it).
    address private constant CONSOLE = 0x000000000000000000636F6e736F6c652e6c6f67;

    MarketHandler internal handler;

    // ================================================================ locks and slots

    /// The state of every task the suite drew (`ids`, the handler's list), read once for all
    /// the checks of one call (`_liveWork`, `_checkJobEscrows` and the invariant's own):
    /// each check reading them again cost a large part of the campaign's time.
    function _tasksOf(uint256[] memory ids) internal view returns (IJobMarket.Task[] memory tasks) {
        tasks = new IJobMarket.Task[](ids.length);
        for (uint256 i = 0; i < ids.length; ++i) {
            tasks[i] = market.taskOf(ids[i]);
        }
    }

    /// Per actor (by index): the stake its live work holds locked, and the pool slots it holds.
    /// A task Offered .. ChallengeWindow or Disputed holds the worker's collateral and, with
    /// an auditor, the auditor's collateral; the worker holds a pool slot until it reveals,
    /// the auditor until the task ends, except in a dispute opened by an audit mismatch (the
    /// market released its slot). A live challenge game holds the
    /// challenger's bond (an audit game's bond is the auditor collateral, counted with the
    /// task); a committee that is voting holds each seated referee's stake.
    function _liveWork(uint256[] memory ids, IJobMarket.Task[] memory tasks)
        internal
        view
        returns (uint256[] memory locked, uint256[] memory slots)
    {
        uint256 actors = handler.ACTORS();
        locked = new uint256[](actors);
        slots = new uint256[](actors);
        uint256 auditorCollateral = market.auditorCollateral();
        uint256[] memory collateral = new uint256[](market.jobCount() + 1); // by job, read once
        for (uint256 i = 0; i < ids.length; ++i) {
            IJobMarket.Task memory t = tasks[i];
            if (!_holdsStake(t.status)) continue;
            uint256 jobId = ids[i] >> 64;
            if (t.flags & FLAG_RELEASED != 0 && _isAggregation(ids[i])) continue;
            if (collateral[jobId] == 0) collateral[jobId] = market.jobOf(jobId).workerCollateral;
            bool slotHeld = t.status != IJobMarket.TaskStatus.Disputed || t.flags & FLAG_CHALLENGED != 0;
            uint256 w = _index(t.worker);
            locked[w] += collateral[jobId];
            // A worker's slot is freed when it reveals (its compute is over).
            if (t.status < IJobMarket.TaskStatus.Revealed) slots[w] += 1;
            if (t.auditor != address(0)) {
                uint256 a = _index(t.auditor);
                locked[a] += auditorCollateral;
                if (slotHeld) slots[a] += 1;
            }
        }
        uint256 refereeStake = game.refereeStake();
        for (uint256 gameId = 1; gameId <= game.gameCount(); ++gameId) {
            IDisputeGame.Game memory g = game.gameOf(gameId);
            if (!_live(g.status)) continue;
            if (!g.audit) locked[_index(g.challenger)] += g.challengerStake;
            if (g.status == IDisputeGame.GameStatus.Committing || g.status == IDisputeGame.GameStatus.Revealing) {
                IDisputeGame.Seat[] memory seats = game.committeeOf(gameId);
                for (uint256 k = 0; k < seats.length; ++k) {
                    locked[_index(seats[k].referee)] += refereeStake;
                }
            }
        }
    }

    // ================================================================ escrow

    /// Assert every job's escrow is exactly what it still owes: (tasks given an id that are
    /// neither Finalized nor Closed, plus tasks never drawn unless the job was stopped and
    /// refunded them) x (reward + audit fee), plus its surplus. Returns Σ escrow.
    function _checkJobEscrows(uint256[] memory ids, IJobMarket.Task[] memory tasks)
        internal
        view
        returns (uint256 sum)
    {
        uint256 jobs = market.jobCount();
        uint256[] memory seen = new uint256[](jobs + 1); // tasks of the job the suite saw drawn
        uint256[] memory owed = new uint256[](jobs + 1); // of which neither Finalized nor Closed
        for (uint256 i = 0; i < ids.length; ++i) {
            IJobMarket.TaskStatus s = tasks[i].status;
            // An aggregation task sent back is undrawn again (it waits for its shards' results).
            if (s == IJobMarket.TaskStatus.None && _isAggregation(ids[i])) continue;
            assertTrue(s != IJobMarket.TaskStatus.None, "M6: a drawn task has no state");
            seen[ids[i] >> 64] += 1;
            if (s != IJobMarket.TaskStatus.Finalized && s != IJobMarket.TaskStatus.Closed) owed[ids[i] >> 64] += 1;
        }
        for (uint256 jobId = 1; jobId <= jobs; ++jobId) {
            IJobMarket.Job memory j = market.jobOf(jobId);
            uint256 perRound = uint256(j.shards) + 1;
            uint256 materialized = uint256(j.currentRound) * perRound + j.nextIndex;
            assertEq(seen[jobId], materialized, "M6: tasks drawn != tasks the job has given an id");
            bool stopped = j.status == IJobMarket.JobStatus.Cancelled || j.status == IJobMarket.JobStatus.Expired;
            uint256 unpaid = owed[jobId] + (stopped ? 0 : perRound * j.rounds - materialized);
            uint256 expected = unpaid * (uint256(j.rewardPerTask) + j.auditFee) + j.surplus;
            assertEq(
                j.escrow,
                expected,
                string.concat("M6: escrow != unpaid tasks x cost + surplus, job ", vm.toString(jobId))
            );
            sum += j.escrow;
        }
    }

    // ================================================================ exits

    function _checkTaskExit(uint256 id) internal {
        IJobMarket.Task memory t = market.taskOf(id);
        IJobMarket.Job memory j = market.jobOf(id >> 64);
        IJobMarket.TaskStatus s = t.status;
        bytes memory close = abi.encodeCall(market.closeTask, (id));
        if (s == IJobMarket.TaskStatus.Pending) {
            if (j.status != IJobMarket.JobStatus.Active) {
                _exitWorks(address(market), close, "", "closeTask (Pending, job stopped)");
            } else if (block.number > j.expiryBlock) {
                _exitWorks(
                    address(market), abi.encodeCall(market.expireJob, (id >> 64)), close, "expireJob + closeTask"
                );
            }
        } else if (
            s == IJobMarket.TaskStatus.Offered || s == IJobMarket.TaskStatus.Running
                || s == IJobMarket.TaskStatus.Committed || s == IJobMarket.TaskStatus.Revealed
        ) {
            if (block.number > t.deadline) {
                _exitWorks(address(market), abi.encodeCall(market.timeoutTask, (id)), "", "timeoutTask");
            }
        } else if (s == IJobMarket.TaskStatus.ChallengeWindow) {
            // A stage whose group is not settled waits for the stage that blocks it, whose own
            // exit this check covers in its turn (a timeout, a game, its window's end); on a
            // stopped job a stage whose group can never be whole (a stage nobody will run) is
            // closed instead (issue 27, finding 3).
            // An aggregation task waits for its round's shards, whose exits this check covers.
            bool waits = uint32(id) == j.shards && j.finalizedInRound != j.shards;
            if (block.number > t.deadline && Stages.blocker(market, id) == 0 && !waits) {
                _exitWorks(address(market), abi.encodeCall(market.finalize, (id)), "", "finalize");
            } else if (
                block.number > t.deadline && j.status != IJobMarket.JobStatus.Active && Stages.unheld(market, id) != 0
            ) {
                _exitWorks(address(market), close, "", "closeTask (stage, group never whole, job stopped)");
            }
        } else if (s == IJobMarket.TaskStatus.Disputed) {
            uint256 gameId = game.gameOfTask(id);
            if (gameId == 0 || !_live(game.gameOf(gameId).status)) {
                assertTrue(t.flags & FLAG_CHALLENGED == 0, "C5: a challenged task without a live game");
                _exitWorks(address(game), abi.encodeCall(game.openAuditDispute, (id)), "", "openAuditDispute");
            }
        }
    }

    function _checkGameExit(uint256 gameId) internal {
        IDisputeGame.Game memory g = game.gameOf(gameId);
        bytes memory timeout = abi.encodeCall(game.timeout, (gameId));
        if (g.status == IDisputeGame.GameStatus.Bisecting) {
            uint256 expiry = g.lastMoveBlock + (g.turn == IDisputeGame.Party.Worker ? g.workerClock : g.challengerClock);
            if (block.number > expiry) _exitWorks(address(game), timeout, "", "game timeout (clock)");
        } else if (g.status == IDisputeGame.GameStatus.AwaitingReferees) {
            if (FutureRandomness.lapsed(g.deadline)) {
                _exitWorks(address(game), timeout, "", "game timeout (referee draw lapsed)");
            } else if (block.number > g.deadline) {
                _exitWorks(address(game), abi.encodeCall(game.drawReferees, (gameId)), "", "drawReferees");
            }
        } else if (g.status == IDisputeGame.GameStatus.Committing) {
            if (block.number > g.deadline) _exitWorks(address(game), timeout, "", "game timeout (commit window)");
        } else if (g.status == IDisputeGame.GameStatus.Revealing) {
            if (block.number > g.deadline) {
                _exitWorks(address(game), abi.encodeCall(game.resolve, (gameId)), "", "resolve");
            }
        }
    }

    /// Send `first` (then `second`, if any) to `target` as the keeper in a snapshot; fail with
    /// the revert's selector when either reverts.
    function _exitWorks(address target, bytes memory first, bytes memory second, string memory what) internal {
        uint256 snapshot = vm.snapshotState();
        vm.prank(handler.KEEPER());
        (bool ok, bytes memory ret) = target.call(first);
        if (ok && second.length != 0) {
            vm.prank(handler.KEEPER());
            (ok, ret) = target.call(second);
        }
        vm.revertToStateAndDelete(snapshot);
        if (!ok) {
            fail(
                string.concat(
                    "C5/M10: exit ", what, " reverted at block ", vm.toString(block.number), ": ", vm.toString(ret)
                )
            );
        }
    }

    // ================================================================ coverage

    function _logCoverage() internal {
        _cover("runs", bytes32(0), 1);
        _cover("drawTask found no eligible worker (discarded)", bytes32(0), 0);
        _cover("TaskDrawn", IJobMarket.TaskDrawn.selector, 0);
        _cover("TaskAccepted", IJobMarket.TaskAccepted.selector, 0);
        _cover("ResultCommitted", IJobMarket.ResultCommitted.selector, 0);
        _cover("AuditorDrawn", IJobMarket.AuditorDrawn.selector, 0);
        _cover("AuditWaived", IJobMarket.AuditWaived.selector, 0);
        _cover("AuditCommitted", IJobMarket.AuditCommitted.selector, 0);
        _cover("ResultRevealed", IJobMarket.ResultRevealed.selector, 0);
        _cover("AuditRevealed", IJobMarket.AuditRevealed.selector, 0);
        _cover("TaskDisputed(audit mismatch)", IJobMarket.TaskDisputed.selector, 0);
        _cover("TaskChallenged", IJobMarket.TaskChallenged.selector, 0);
        _cover("TaskFinalized", IJobMarket.TaskFinalized.selector, 0);
        _cover("TaskTimedOut", IJobMarket.TaskTimedOut.selector, 0);
        _cover("TaskRequeued", IJobMarket.TaskRequeued.selector, 0);
        _cover("TaskClosed", IJobMarket.TaskClosed.selector, 0);
        _cover("RoundAdvanced", IJobMarket.RoundAdvanced.selector, 0);
        _cover("JobCompleted", IJobMarket.JobCompleted.selector, 0);
        _cover("JobCancelled", IJobMarket.JobCancelled.selector, 0);
        _cover("JobExpired", IJobMarket.JobExpired.selector, 0);
        _cover("DisputeOpened", IDisputeGame.DisputeOpened.selector, 0);
        _cover("DisputeBisected", IDisputeGame.DisputeBisected.selector, 0);
        _cover("BisectionEnded", IDisputeGame.BisectionEnded.selector, 0);
        _cover("ClockExpired", IDisputeGame.ClockExpired.selector, 0);
        _cover("RefereesDrawn", IDisputeGame.RefereesDrawn.selector, 0);
        _cover("VoteRevealed", IDisputeGame.VoteRevealed.selector, 0);
        _cover("RefereePenalized", IDisputeGame.RefereePenalized.selector, 0);
        _cover("CommitteeFailed", IDisputeGame.CommitteeFailed.selector, 0);
        _cover("DisputeSettled", IDisputeGame.DisputeSettled.selector, 0);
        _cover("AuditorSlashed", IDisputeGame.AuditorSlashed.selector, 0);
        _cover("DisputeVoided(game)", IDisputeGame.DisputeVoided.selector, 0);
        _cover("StakeSlashed", IStakeManager.StakeSlashed.selector, 0);
        _cover("StakeForfeited", IStakeManager.StakeForfeited.selector, 0);
        _cover("TaskDeclined", IJobMarket.TaskDeclined.selector, 0);
        _cover("JobInputsUnavailable", IJobMarket.JobInputsUnavailable.selector, 0);
        _cover("UnstakeWithdrawn", IStakeManager.UnstakeWithdrawn.selector, 0);
        _cover("CreditsWithdrawn(stake)", IStakeManager.CreditsWithdrawn.selector, 0);
        _cover("Withdrawn(market)", IJobMarket.Withdrawn.selector, 0);
    }

    /// Add this run's count of `topic0` (or `add`) to the process's total and log the total.
    function _cover(string memory name, bytes32 topic0, uint256 add) internal {
        string memory key = string.concat("TRUETRAIN_FORGE_COVERAGE_", name);
        uint256 total = vm.envOr(key, uint256(0)) + (topic0 == 0 ? add : handler.eventCount(topic0));
        vm.setEnv(key, vm.toString(total));
        (bool ok,) = CONSOLE.staticcall(abi.encodeWithSignature("log(string,uint256)", name, total));
        ok;
    }

    // ================================================================ internals

    function _isAggregation(uint256 id) internal view returns (bool) {
        return uint32(id) == market.jobOf(id >> 64).shards;
    }

    function _holdsStake(IJobMarket.TaskStatus s) internal pure returns (bool) {
        return s == IJobMarket.TaskStatus.Offered || s == IJobMarket.TaskStatus.Running
            || s == IJobMarket.TaskStatus.Committed || s == IJobMarket.TaskStatus.Revealed
            || s == IJobMarket.TaskStatus.ChallengeWindow || s == IJobMarket.TaskStatus.Disputed;
    }

    function _live(IDisputeGame.GameStatus s) internal pure returns (bool) {
        return s != IDisputeGame.GameStatus.None && s != IDisputeGame.GameStatus.Resolved
            && s != IDisputeGame.GameStatus.Voided;
    }

    /// The actor index of `who` (every party, auditor and referee is an actor).
    function _index(address who) internal view returns (uint256) {
        uint256 slot = handler.slotOf(who);
        assertGt(slot, 0, "model: stake held for an address that is no actor");
        return slot - 1;
    }
}
