// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IJobMarket} from "../interfaces/IJobMarket.sol";
import {TaskIds} from "./TaskIds.sol";
import {Escrow} from "./Escrow.sol";
import {FutureRandomness} from "./FutureRandomness.sol";
import {MarketStore, MarketDeps, JobRecord, TaskFlow} from "./TaskFlow.sol";

/// @title TaskRecovery: what happens when a task or job leaves the happy path
/// @notice Timeouts (who was late pays, and the task moves on), closing tasks of a stopped
/// job, cancel and expiry refunds, and moving a task on after its dispute game. An external
/// library: JobMarket calls it with DELEGATECALL (its storage, its events), which keeps the
/// market's bytecode well under the EIP-170 limit. Callers check roles and reentrancy.
library TaskRecovery {
    /// @dev The distinct workers that may decline one task (`decline`) before its job ends
    /// for unavailable inputs: bounds the decliners' loop and their repayment.
    uint256 internal constant MAX_DECLINES = 3;

    /// @notice See IJobMarket.timeoutTask.
    function timeout(MarketStore storage s, MarketDeps memory d, uint256 id) external {
        IJobMarket.Task storage t = s.tasks[id];
        IJobMarket.TaskStatus st = t.status;
        if (
            st != IJobMarket.TaskStatus.Offered && st != IJobMarket.TaskStatus.Running
                && st != IJobMarket.TaskStatus.Committed && st != IJobMarket.TaskStatus.Revealed
        ) revert IJobMarket.TaskNotTimeoutable(id, st);
        if (block.number <= t.deadline) revert IJobMarket.TaskDeadlineNotPassed(id, t.deadline);
        uint256 jobId = TaskIds.jobOf(id);
        JobRecord storage j = s.jobs[jobId];
        address worker = t.worker;
        address auditor = t.auditor;
        uint8 flags = t.flags;
        if (st == IJobMarket.TaskStatus.Committed && auditor != address(0) && flags & TaskFlow.FLAG_AUDIT_COMMITTED == 0) {
            // The auditor never committed (it had seen nothing yet, and may not have got the
            // inputs): its penalty, burned (a submitter withholding them must gain nothing),
            // then another auditor is drawn from the future, as the first one was.
            uint256 taken = d.stakeManager.forfeit(auditor, d.auditorPenalty);
            emit IJobMarket.TaskTimedOut(id, auditor, st, taken);
            d.registry.recordTimeout(auditor);
            d.pool.release(auditor, d.auditorCollateral - taken);
            uint64 ticket = FutureRandomness.ticket();
            t.auditor = address(0);
            t.flags = TaskFlow.FLAG_AUDIT_DUE;
            t.deadline = ticket + j.revealWindow;
            emit IJobMarket.AuditRequested(id, ticket);
            d.pool.holdDraws(ticket);
        } else if (st == IJobMarket.TaskStatus.Revealed) {
            // The auditor committed and then stayed silent (it may have seen the worker's root
            // differ from its own): silence costs it what losing the audit's game would.
            uint256 taken = d.stakeManager.slash(auditor, d.auditorCollateral, j.submitter, new address[](0));
            emit IJobMarket.TaskTimedOut(id, auditor, st, taken);
            d.registry.recordTimeout(auditor);
            d.pool.release(auditor, d.auditorCollateral - taken);
            // The worker's root is public now, so a new auditor could copy it: the result
            // stands unaudited (challengeable) instead.
            t.auditor = address(0);
            t.flags = 0;
            TaskFlow.openWindow(t, id, j.challengeWindow);
        } else if (_stalledStage(s, d, j, jobId, id, st)) {
            return;
        } else {
            // The worker missed accept, commit or reveal. After a commitment (it may know the
            // audit draw went against it) silence costs the whole collateral, as losing would;
            // the winner's share goes to the auditor that committed, else the submitter. Before
            // it (offered or running: the submitter's inputs may be what it lacked) the penalty
            // is burned: no party that can cause a timeout is paid for it.
            uint256 collateral = j.workerCollateral;
            uint256 taken;
            if (st == IJobMarket.TaskStatus.Committed) {
                address winner = flags & TaskFlow.FLAG_AUDIT_COMMITTED != 0 ? auditor : j.submitter;
                taken = d.stakeManager.slash(worker, collateral, winner, new address[](0));
            } else {
                uint256 bps = st == IJobMarket.TaskStatus.Offered ? d.acceptPenaltyBps : d.timeoutPenaltyBps;
                // INVARIANT: a timeout the submitter could cause by withholding data pays nobody.
                taken = d.stakeManager.forfeit(worker, Escrow.share(collateral, bps));
            }
            emit IJobMarket.TaskTimedOut(id, worker, st, taken);
            d.registry.recordTimeout(worker);
            if (auditor != address(0)) d.pool.release(auditor, d.auditorCollateral);
            d.pool.release(worker, collateral - taken);
            // A stage that never started leaves its group waiting (TaskFlow.alignStages); one
            // that ran may have sent messages its replacement will not: the group runs again.
            if (st != IJobMarket.TaskStatus.Offered) _resetGroup(s, d, j, jobId, id);
            TaskFlow.sendBack(s, d, j, jobId, id);
        }
    }

    /// @notice See IJobMarket.reportStalled.
    function reportStalled(MarketStore storage s, uint256 id) external {
        IJobMarket.Task storage t = s.tasks[id];
        if (t.status != IJobMarket.TaskStatus.Running) revert IJobMarket.TaskNotRunning(id);
        if (msg.sender != t.worker) revert IJobMarket.TaskNotWorker(id, msg.sender);
        if (block.number > t.deadline) revert IJobMarket.TaskDeadlinePassed(id, t.deadline);
        JobRecord storage j = s.jobs[TaskIds.jobOf(id)];
        if (!TaskFlow.isStage(j, id) || t.flags & TaskFlow.FLAG_STALLED != 0) {
            revert IJobMarket.TaskNotStage(id);
        }
        t.flags |= TaskFlow.FLAG_STALLED;
        emit IJobMarket.StageStalled(id, msg.sender);
    }

    /// @notice See IJobMarket.closeTask.
    function close(MarketStore storage s, MarketDeps memory d, uint256 id) external {
        IJobMarket.Task storage t = s.tasks[id];
        uint256 jobId = TaskIds.jobOf(id);
        JobRecord storage j = s.jobs[jobId];
        IJobMarket.TaskStatus st = t.status;
        if (j.status == IJobMarket.JobStatus.Active) revert IJobMarket.TaskNotClosable(id);
        if (st == IJobMarket.TaskStatus.ChallengeWindow) {
            _closeStage(s, d, j, jobId, id);
            return;
        }
        if (st != IJobMarket.TaskStatus.Pending && st != IJobMarket.TaskStatus.Offered) revert IJobMarket.TaskNotClosable(id);
        address worker = t.worker;
        TaskFlow.close(s, j, jobId, t, id);
        if (st == IJobMarket.TaskStatus.Offered) d.pool.release(worker, j.workerCollateral);
    }

    /// @dev Close stage task `id` of a stopped job, past its challenge window, whose group can
    /// never be whole: a stage of it was never drawn, or is Pending, Offered or Closed (a
    /// stopped job draws and starts nothing). It is not paid: a stage cannot finish without
    /// every other stage of its attempt, and a stage that ran and failed sends its group back,
    /// so its result was fed by no partner (and no challenge can check it). Its worker loses
    /// nothing: its whole collateral and pool slot come back; the cost goes to the submitter.
    function _closeStage(MarketStore storage s, MarketDeps memory d, JobRecord storage j, uint256 jobId, uint256 id)
        private
    {
        IJobMarket.Task storage t = s.tasks[id];
        // INVARIANT: a stage is paid only with its whole group (TaskFlow.stageBlocker); one
        // that can never be paid leaves its window unpaid instead of holding its collateral.
        if (block.number <= t.deadline || !TaskFlow.isStage(j, id)) revert IJobMarket.TaskNotClosable(id);
        uint256 missing = _unheldStage(s, id, j.stages);
        if (missing == 0) revert IJobMarket.TaskNotClosable(id);
        // (Released while still in its window: its slot went at its reveal, its collateral now.)
        _releaseStage(s, d, j, id, missing);
        TaskFlow.close(s, j, jobId, t, id);
    }

    /// @dev The first other stage of task `id`'s group that nobody holds (never drawn,
    /// Pending, Offered or Closed: on a stopped job, one that will never run); 0 if none.
    function _unheldStage(MarketStore storage s, uint256 id, uint8 stages) private view returns (uint256) {
        uint256[] memory ids = TaskFlow.siblings(id, stages);
        for (uint256 i = 0; i < ids.length; ++i) {
            IJobMarket.TaskStatus st = s.tasks[ids[i]].status;
            if (st <= IJobMarket.TaskStatus.Offered || st == IJobMarket.TaskStatus.Closed) return ids[i];
        }
        return 0;
    }

    /// @notice See IJobMarket.cancelJob (`expired` false) and expireJob (true).
    function stop(MarketStore storage s, uint256 jobId, bool expired) external {
        JobRecord storage j = TaskFlow.activeJob(s, jobId);
        if (expired) {
            if (block.number <= j.expiryBlock) revert IJobMarket.JobNotExpired(jobId, j.expiryBlock);
        } else if (msg.sender != j.submitter) {
            revert IJobMarket.JobNotSubmitter(jobId, msg.sender);
        }
        uint256 refund = _halt(s, j, expired ? IJobMarket.JobStatus.Expired : IJobMarket.JobStatus.Cancelled);
        TaskFlow.credit(s, j.submitter, refund);
        if (expired) emit IJobMarket.JobExpired(jobId, refund);
        else emit IJobMarket.JobCancelled(jobId, refund);
        TaskFlow.emitRefund(jobId, j.submitter, refund);
    }

    /// @notice See IJobMarket.declineTask.
    function decline(MarketStore storage s, MarketDeps memory d, uint256 id) external {
        IJobMarket.Task storage t = s.tasks[id];
        if (t.status != IJobMarket.TaskStatus.Offered) revert IJobMarket.TaskNotOffered(id);
        if (msg.sender != t.worker) revert IJobMarket.TaskNotWorker(id, msg.sender);
        if (block.number > t.deadline) revert IJobMarket.TaskDeadlinePassed(id, t.deadline);
        uint256 jobId = TaskIds.jobOf(id);
        // A stopped job's offer is closed free (closeTask): declining it would only cost.
        JobRecord storage j = TaskFlow.activeJob(s, jobId);
        // INVARIANT: declining costs what silence would (no cheaper exit), and pays nobody.
        uint256 collateral = j.workerCollateral;
        uint256 taken = d.stakeManager.forfeit(msg.sender, Escrow.share(collateral, d.acceptPenaltyBps));
        emit IJobMarket.TaskDeclined(id, msg.sender, taken);
        d.pool.release(msg.sender, collateral - taken);
        address[] storage by = s.declinedBy[id];
        uint256 n = by.length;
        bool seen;
        for (uint256 i = 0; i < n; ++i) {
            if (by[i] == msg.sender) seen = true;
        }
        if (!seen) {
            by.push(msg.sender);
            ++n;
        }
        // Sent back with its worker kept: the redraw excludes the decliner.
        if (n < MAX_DECLINES) TaskFlow.sendBack(s, d, j, jobId, id);
        else _inputsUnavailable(s, d, j, jobId, id, by);
    }

    /// @dev MAX_DECLINES distinct workers declined task `id`: nobody can fetch its inputs, so
    /// its job stops (Cancelled; tasks in flight finish or are closed as on cancel) and the
    /// task is closed. Out of what leaves escrow (the never-drawn tasks, the surplus and this
    /// task's cost) each decliner is paid back what its decline cost (capped at what is left),
    /// the rest goes to the submitter: its bad data costs it its decliners' penalties.
    function _inputsUnavailable(
        MarketStore storage s,
        MarketDeps memory d,
        JobRecord storage j,
        uint256 jobId,
        uint256 id,
        address[] storage by
    ) private {
        uint256 amount = _halt(s, j, IJobMarket.JobStatus.Cancelled);
        uint128 cost = uint128(Escrow.taskCost(j.rewardPerTask, j.auditFee));
        s.tasks[id].status = IJobMarket.TaskStatus.Closed;
        j.escrow -= cost;
        s.totalEscrow -= cost;
        emit IJobMarket.TaskClosed(id, cost);
        amount += cost;
        uint256 owed = Escrow.share(j.workerCollateral, d.acceptPenaltyBps);
        for (uint256 i = 0; i < by.length; ++i) {
            uint256 repaid = owed < amount ? owed : amount;
            amount -= repaid;
            TaskFlow.credit(s, by[i], repaid);
            emit IJobMarket.DeclineRepaid(id, by[i], repaid);
        }
        TaskFlow.credit(s, j.submitter, amount);
        emit IJobMarket.JobInputsUnavailable(jobId, id, amount);
        TaskFlow.emitRefund(jobId, j.submitter, amount);
    }

    /// @dev Stop job `j` (status `status`): the never-drawn tasks' cost and the surplus leave
    /// its escrow (credited to nobody yet: the caller does); tasks in flight finish. Returns
    /// the amount taken out.
    function _halt(MarketStore storage s, JobRecord storage j, IJobMarket.JobStatus status) private returns (uint256 amount) {
        j.status = status;
        uint256 unspent =
            Escrow.taskCount(j.shards, j.rounds) - Escrow.materialized(j.shards, j.currentRound, j.nextIndex);
        amount = unspent * Escrow.taskCost(j.rewardPerTask, j.auditFee) + j.surplus;
        j.surplus = 0;
        j.escrow -= uint128(amount);
        s.totalEscrow -= uint128(amount);
    }

    /// @notice See IJobMarket.resolveDispute (`verdict` 1: worker won, 2: worker lost) and
    /// voidDispute (`verdict` 0: no verdict).
    function resolve(MarketStore storage s, MarketDeps memory d, uint256 id, uint8 verdict) external {
        IJobMarket.Task storage t = s.tasks[id];
        if (t.status != IJobMarket.TaskStatus.Disputed) revert IJobMarket.TaskNotDisputed(id);
        uint256 jobId = TaskIds.jobOf(id);
        JobRecord storage j = s.jobs[jobId];
        address worker = t.worker;
        address auditor = t.auditor;
        bool workerWon = verdict == 1;
        if (verdict == 0) emit IJobMarket.DisputeVoided(id);
        else emit IJobMarket.DisputeResolved(id, workerWon);
        if (t.flags & TaskFlow.FLAG_CHALLENGED != 0) {
            if (workerWon && t.flags & TaskFlow.FLAG_GROUP_RESET == 0) {
                // The result stood: its challenge window resumes with the blocks it had left.
                t.flags &= ~TaskFlow.FLAG_CHALLENGED;
                TaskFlow.openWindow(t, id, t.deadline);
                return;
            }
            if (workerWon) {
                // It stood, but its group was sent back meanwhile (another stage failed), or
                // for an aggregation task a shard result it read was discarded: its result is
                // of no use; it goes back unpaid and unpenalised.
                if (TaskFlow.isStage(j, id)) _releaseStage(s, d, j, id, id);
                else TaskFlow.releaseAggregation(d, j, t, id, id);
                TaskFlow.sendBack(s, d, j, jobId, id);
                return;
            }
            // Pool slots were held through the challenge. Lost: the game slashed the
            // collateral (and that of an auditor that had confirmed the result). No verdict:
            // nobody is paid or slashed, the collaterals come back. Either way a stage's
            // group runs again: its other stages ran on this stage's messages.
            bool voided = verdict == 0;
            if (t.flags & TaskFlow.FLAG_GROUP_RESET == 0) _resetGroup(s, d, j, jobId, id); // else: reset already
            // (The worker's slot was freed at its reveal; the auditor's is held through the challenge.)
            if (voided) d.pool.unlock(worker, j.workerCollateral);
            if (auditor != address(0)) d.pool.release(auditor, voided ? d.auditorCollateral : 0);
        } else if (workerWon) {
            if (uint32(id) == j.shards && _aggregationWaits(s, d, j, t, id)) return;
            t.status = IJobMarket.TaskStatus.Finalized;
            TaskFlow.pay(s, d, j, jobId, t, id, false);
            TaskFlow.recordCompleted(d, j, worker);
            return;
        }
        TaskFlow.sendBack(s, d, j, jobId, id);
    }

    /// @dev Aggregation task `id` won the game on its audit, which released its worker's and
    /// auditor's pool slots and stakes (FLAG_RELEASED; the auditor lost, so it is cleared
    /// with FLAG_AUDITOR: no fee). It is paid only on its round's final shard results: if a shard
    /// result it read was discarded meanwhile, it goes back unpaid (`AggregationReset`); if a
    /// shard is not finalized yet, it waits for them in a challenge window already over
    /// (nobody can challenge it, a finalize pays it once they are). True when it is not paid now.
    function _aggregationWaits(
        MarketStore storage s,
        MarketDeps memory d,
        JobRecord storage j,
        IJobMarket.Task storage t,
        uint256 id
    ) private returns (bool) {
        t.flags = (t.flags & ~TaskFlow.FLAG_AUDITOR) | TaskFlow.FLAG_RELEASED;
        t.auditor = address(0);
        if (t.flags & TaskFlow.FLAG_GROUP_RESET != 0) {
            TaskFlow.releaseAggregation(d, j, t, id, id);
            TaskFlow.sendBack(s, d, j, TaskIds.jobOf(id), id);
            return true;
        }
        if (j.finalizedInRound == j.shards) return false;
        uint64 over = uint64(block.number) - 1;
        t.status = IJobMarket.TaskStatus.ChallengeWindow;
        t.deadline = over;
        emit IJobMarket.ChallengeWindowOpened(id, over);
        return true;
    }

    /// @dev A running stage whose worker reported it blocked on another stage
    /// (`reportStalled`) and whose group shows a stage it could really be waiting on
    /// (`_excused`) is not the late one: its deadline passing costs it nothing. It goes back
    /// unpaid and unpenalised, its collateral released. True when that is the case; a report
    /// the group does not bear out is a false stall, and the stage pays as a silent one.
    function _stalledStage(
        MarketStore storage s,
        MarketDeps memory d,
        JobRecord storage j,
        uint256 jobId,
        uint256 id,
        IJobMarket.TaskStatus st
    ) private returns (bool) {
        if (st != IJobMarket.TaskStatus.Running || s.tasks[id].flags & TaskFlow.FLAG_STALLED == 0) return false;
        // INVARIANT: a stall is free only when confirmed: a false one costs the running timeout.
        if (!_excused(s, id, j.stages)) return false;
        _releaseStage(s, d, j, id, id);
        // The group it waited with runs again (a stage that said nothing is left to its own
        // timeout, and pays it).
        _resetGroup(s, d, j, jobId, id);
        TaskFlow.sendBack(s, d, j, jobId, id);
        return true;
    }

    /// @dev Stage task `id` failed after it started: send every other stage of its group that
    /// is offered or under way (running, committed, revealed, in its challenge window) back
    /// too, unpaid and unpenalised, its collateral released; on a stopped job they are closed
    /// (TaskFlow.sendBack). A running stage past its deadline is not sent back free: one that
    /// reported nothing is left to its own timeout, one whose stall report the group does not
    /// bear out (`_excused`) pays its running timeout here. A stage in its own dispute is left
    /// to its game (which sends it back if its group was reset, see `resolve`); Finalized
    /// never happens first (a group is paid together, TaskFlow.stageBlocker). At most
    /// MAX_STAGES - 1 tasks (and `_excused` for each reported one).
    function _resetGroup(MarketStore storage s, MarketDeps memory d, JobRecord storage j, uint256 jobId, uint256 id)
        private
    {
        if (!TaskFlow.isStage(j, id)) return;
        uint256[] memory ids = TaskFlow.siblings(id, j.stages);
        // A running stage past its deadline that reported being blocked is judged on the group
        // as it stands now, before any stage of it moves (a stage sent back here would
        // otherwise excuse it): the order in which a keeper times stages out changes nothing.
        bool[] memory excused = new bool[](ids.length);
        for (uint256 i = 0; i < ids.length; ++i) {
            IJobMarket.Task storage t = s.tasks[ids[i]];
            if (t.status == IJobMarket.TaskStatus.Running && block.number > t.deadline && t.flags & TaskFlow.FLAG_STALLED != 0) {
                excused[i] = _excused(s, ids[i], j.stages);
            }
        }
        for (uint256 i = 0; i < ids.length; ++i) {
            uint256 sibling = ids[i];
            IJobMarket.Task storage t = s.tasks[sibling];
            IJobMarket.TaskStatus st = t.status;
            if (st == IJobMarket.TaskStatus.Disputed) t.flags |= TaskFlow.FLAG_GROUP_RESET;
            if (st < IJobMarket.TaskStatus.Offered || st > IJobMarket.TaskStatus.ChallengeWindow) continue;
            if (st == IJobMarket.TaskStatus.Running && block.number > t.deadline) {
                // The silent one (it never reported being blocked) is left to its own timeout
                // and its penalty, which resets the rest.
                if (t.flags & TaskFlow.FLAG_STALLED == 0) continue;
                // A false stall pays as its own timeout would.
                if (!excused[i]) {
                    _chargeRunningTimeout(s, d, j, jobId, sibling);
                    continue;
                }
            }
            _releaseStage(s, d, j, sibling, id);
            TaskFlow.sendBack(s, d, j, jobId, sibling);
        }
    }

    /// @dev Whether the group of running stage task `id` (past its deadline, its worker having
    /// reported it blocked) shows a stage `id` could really be waiting on: one nobody holds
    /// (never drawn, Pending, Offered or Closed; or in a dispute whose group was sent back: its
    /// stage cannot run until the game ends), one running with a later deadline than `id`'s
    /// (drawn or accepted after `id` was due, when nobody held it: the group's running stages
    /// are otherwise kept at one deadline, TaskFlow.alignStages), or one running past its
    /// deadline that reported nothing (the silent one: it pays its own timeout). A stage that
    /// committed or revealed finished its part, so it blocked nobody; two stages that both
    /// reported cannot be told apart on chain, and both pay. At most MAX_STAGES - 1 tasks.
    function _excused(MarketStore storage s, uint256 id, uint8 stages) private view returns (bool) {
        uint64 due = s.tasks[id].deadline;
        uint256[] memory ids = TaskFlow.siblings(id, stages);
        for (uint256 i = 0; i < ids.length; ++i) {
            IJobMarket.Task storage t = s.tasks[ids[i]];
            IJobMarket.TaskStatus st = t.status;
            if (st <= IJobMarket.TaskStatus.Offered || st == IJobMarket.TaskStatus.Closed) return true;
            if (st == IJobMarket.TaskStatus.Disputed && t.flags & TaskFlow.FLAG_GROUP_RESET != 0) return true;
            if (
                st == IJobMarket.TaskStatus.Running
                    && (t.deadline > due || (block.number > t.deadline && t.flags & TaskFlow.FLAG_STALLED == 0))
            ) return true;
        }
        return false;
    }

    /// @dev Running stage task `id` missed its deadline with a false stall report: the
    /// running timeout's penalty (burned, as for a silent running stage), the timeout in its history, and it is
    /// sent back with its worker kept, so that the redraw excludes it.
    function _chargeRunningTimeout(MarketStore storage s, MarketDeps memory d, JobRecord storage j, uint256 jobId, uint256 id)
        private
    {
        address worker = s.tasks[id].worker;
        uint256 collateral = j.workerCollateral;
        uint256 taken = d.stakeManager.forfeit(worker, Escrow.share(collateral, d.timeoutPenaltyBps));
        emit IJobMarket.TaskTimedOut(id, worker, IJobMarket.TaskStatus.Running, taken);
        d.registry.recordTimeout(worker);
        d.pool.release(worker, collateral - taken);
        TaskFlow.sendBack(s, d, j, jobId, id);
    }

    /// @dev Stage task `id` goes back through no fault of its worker (cause `cause`): its
    /// whole collateral comes back and it may be drawn for the stage again (a task sent back
    /// otherwise keeps its worker, whom the redraw excludes).
    function _releaseStage(MarketStore storage s, MarketDeps memory d, JobRecord storage j, uint256 id, uint256 cause)
        private
    {
        IJobMarket.Task storage t = s.tasks[id];
        // INVARIANT: a reset stage's worker loses nothing: its whole collateral comes back.
        TaskFlow.returnCollateral(d, t, j.workerCollateral);
        t.worker = address(0);
        emit IJobMarket.StageReset(id, cause);
    }
}
