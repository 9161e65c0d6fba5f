// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {MarketHandlerBase} from "./MarketHandlerBase.sol";
import {IJobMarket} from "contracts/interfaces/IJobMarket.sol";
import {IWorkerPool} from "contracts/interfaces/IWorkerPool.sol";
import {Stages} from "../utils/Stages.sol";
import {FutureRandomness} from "contracts/libraries/FutureRandomness.sol";

/// @title TaskActions: the market handler's job and task actions
/// @notice Submitters create, cancel and expire jobs; a keeper draws tasks, settles audit
/// draws, finalizes, times out and closes; workers accept, commit (honest workers the true
/// root, liars a wrong one) and reveal (the quitter stays silent once audited); auditors
/// commit (honest: the true root; colluding: a copy of the worker's root) and reveal. There
/// is no decline call: a worker declines an offer by letting it time out (the accept penalty).
/// Each action first picks a job or task in the state its call needs (see MarketHandlerBase).
abstract contract TaskActions is MarketHandlerBase {
    uint8 private constant FLAG_AUDIT_COMMITTED = 1;
    uint8 private constant FLAG_AUDIT_REVEALED = 2;
    uint8 private constant FLAG_CHALLENGED = 4;
    uint8 private constant FLAG_AUDIT_SETTLED = 8;
    uint8 private constant FLAG_AUDIT_DUE = 16;

    // ================================================================ jobs

    /// A submitter creates a job: 1-2 shards x 1-2 rounds, 1-8 checkpoint leaves, audit rate
    /// 0, 50 % or 100 %, windows of 5-60 blocks (the floors up), expiry 100-1,600 blocks ahead.
    function createJob(uint256 who, uint256 shape, uint256 money, uint256 windows) external step {
        address submitter = _actors[who % 2];
        IJobMarket.JobParams memory p = _jobParams(shape, money, windows);
        uint256 escrow = (uint256(p.shards) + 1) * p.rounds * (uint256(p.rewardPerTask) + p.auditFee);
        _fund(submitter, escrow);
        vm.startPrank(submitter);
        token.approve(address(market), escrow);
        uint256 jobId = market.createJob(p);
        vm.stopPrank();
        _jobInfo[jobId] = JobInfo(p.shards, p.checkpointLeaves, p.auditRateBps, p.revealWindow, p.workerCollateral);
    }

    /// The submitter cancels an active job (one call in eight: a cancel ends a whole job).
    function cancelJob(uint256 seed) external step {
        if (seed % 8 != 0) _skip();
        (uint256 jobId, IJobMarket.Job memory j) = _pickJob(seed >> 3, _active);
        vm.prank(j.submitter);
        market.cancelJob(jobId);
    }

    function expireJob(uint256 seed) external step {
        (uint256 jobId,) = _pickJob(seed, _expired);
        vm.prank(KEEPER);
        market.expireJob(jobId);
    }

    /// A keeper draws the next task of a job some worker could take. Offers are drawn from the
    /// future: with no live offer ticket the call asks for one and draws nothing; before the
    /// ticket's next block the keeper waits (the handler rolls past it). The draw samples at
    /// most MAX_DRAW_ATTEMPTS members and rejects stale ones (WorkerPool._candidate), so it
    /// may still find nobody: that JobNoEligibleWorker is the protocol's answer, not a failed
    /// call, and is discarded (and counted for the coverage log); any other revert fails.
    function drawTask(uint256 seed) external step {
        (uint256 jobId,) = _pickJob(seed, _drawable);
        if (!_offersReady(jobId)) return;
        _draw(jobId, 1);
    }

    /// A keeper draws up to 1-4 tasks of a job in one call (the daemons' keeper path): what
    /// it drew stays drawn when it stops early; a call that draws nothing has asked for a
    /// ticket; nobody eligible for the first is discarded as for drawTask.
    function drawTasks(uint256 seed) external step {
        (uint256 jobId,) = _pickJob(seed, _drawable);
        if (!_offersReady(jobId)) return;
        _draw(jobId, 1 + (seed >> 128) % 4);
    }

    /// A staker tops up or cuts its stake once an offer ticket's hash is public, to steer the
    /// job's next offer: the worker the draw offers the task to stays the same unless the
    /// mover itself was reached by the draw (issue 27, finding 7a). Then the keeper draws.
    function grindOffer(uint256 seed, uint256 moverSeed, uint256 amount) external step {
        (uint256 jobId, IJobMarket.Job memory j) = _pickJob(seed, _drawable);
        if (!_offersReady(jobId)) return;
        uint64 ticket = market.offerTicketOf(jobId);
        j = market.jobOf(jobId);
        // A split job's stage draw tries several seeds; a task sent back since the ticket waits.
        if (ticket == 0 || FutureRandomness.lapsed(ticket) || j.stages > 1 || j.pendingCount != 0) return;
        uint256 id = (jobId << 64) | (uint256(j.currentRound) << 32) | j.nextIndex;
        bytes32 draw = keccak256(abi.encode(keccak256(abi.encode(blockhash(ticket), bytes32(jobId))), id));
        IWorkerPool.Requirements memory req = IWorkerPool.Requirements(
            j.deviceClass, j.memoryMiB, j.preferredRegion, j.workerCollateral, address(0), j.minFetchKiBps, j.maxRpcRttMs
        );
        // An aggregation task sent back is drawn again never for the worker that failed it.
        if (j.nextIndex == j.shards) req.exclude = market.taskOf(id).worker;
        address before = pool.sample(draw, req, false);
        address mover = _moveStake(moverSeed, amount);
        address afterMove = pool.sample(draw, req, false);
        _check(afterMove == before || afterMove == mover || before == mover, "M21: a stake move steered an offer");
        _draw(jobId, 1);
        if (before != mover && afterMove != mover && market.offerTicketOf(jobId) != ticket) {
            _check(before == address(0) || market.taskOf(id).worker == before, "M21: the offer went elsewhere than drawn");
        }
    }

    function _draw(uint256 jobId, uint256 count) internal {
        uint64 ticket = market.offerTicketOf(jobId);
        vm.prank(KEEPER);
        try market.drawTasks(jobId, count) returns (uint256 drawn) {
            _check(drawn >= 1 || market.offerTicketOf(jobId) != ticket, "drawTasks: returned without drawing or asking");
        } catch (bytes memory reason) {
            if (bytes4(reason) != IJobMarket.JobNoEligibleWorker.selector) _bubble(reason);
            _countEnv("drawTask found no eligible worker (discarded)");
            _skip();
        }
    }

    /// Roll past the job's live offer ticket when its block is not mined yet (a keeper waits
    /// for it); false when that passes the job's expiry.
    function _offersReady(uint256 jobId) internal returns (bool) {
        uint64 ticket = market.offerTicketOf(jobId);
        if (ticket != 0 && block.number <= ticket) {
            currentBlock = ticket + 1;
            vm.roll(currentBlock);
        }
        return block.number <= market.jobOf(jobId).expiryBlock;
    }

    function refundSurplus(uint256 seed) external step {
        (uint256 jobId,) = _pickJob(seed, _withSurplus);
        vm.prank(KEEPER);
        market.refundSurplus(jobId);
    }

    // ================================================================ workers and auditors

    function acceptTask(uint256 seed) external step {
        (uint256 id, IJobMarket.Task memory t) = _pickTask(seed, _acceptable);
        _accept(id, t);
    }

    /// The offered worker says it cannot fetch the task's inputs: its accept penalty is burned
    /// and the task redrawn; the third distinct decliner ends the job (JobInputsUnavailable).
    function declineTask(uint256 seed) external step {
        (uint256 id, IJobMarket.Task memory t) = _pickTask(seed, _acceptable);
        vm.prank(t.worker);
        market.declineTask(id);
    }

    /// Honest workers commit the true root, the others a lie diverging at a fuzzed leaf.
    function commitResult(uint256 seed, uint256 lieSeed) external step {
        (uint256 id, IJobMarket.Task memory t) = _pickTask(seed, _running);
        _commit(id, t, lieSeed);
    }

    function settleAudit(uint256 seed) external step {
        (uint256 id,) = _pickTask(seed, _settleable);
        _settle(id);
    }

    /// A staker tops up or cuts its stake once an audit draw's hash is public, to steer it:
    /// the auditor the draw would seat stays the same, unless the mover itself was reached by
    /// the draw (it may only seat or unseat itself: WorkerPool takes candidates out, never
    /// retries). Then the draw is settled (issue 27, finding 1).
    function grindAuditDraw(uint256 seed, uint256 moverSeed, uint256 amount) external step {
        (uint256 id, IJobMarket.Task memory t) = _pickTask(seed, _settleable);
        uint64 ticket = uint64(_ticket(id, t));
        if (FutureRandomness.lapsed(ticket) || !_drawsAudit(id, t)) return;
        bytes32 draw = keccak256(abi.encode(keccak256(abi.encode(blockhash(ticket), bytes32(id))), "auditor"));
        IJobMarket.Job memory j = market.jobOf(id >> 64);
        IWorkerPool.Requirements memory req =
            IWorkerPool.Requirements(j.deviceClass, j.memoryMiB, 0, market.auditorCollateral(), t.worker, 0, 0);
        address before = pool.sample(draw, req, true);
        address mover = _moveStake(moverSeed, amount);
        address afterMove = pool.sample(draw, req, true);
        _check(afterMove == before || afterMove == mover || before == mover, "M21: a stake move steered an audit draw");
        _settle(id);
    }

    /// A staker tops up its stake (even `amount`) or cuts it (odd `amount`, when it has free
    /// stake): the move a grinder makes once a draw's hash is public.
    function _moveStake(uint256 moverSeed, uint256 amount) internal returns (address mover) {
        mover = _staker(moverSeed);
        if (amount % 2 == 0 || stakeManager.freeStake(mover) == 0) {
            _stake(mover, bound(amount, 1, 500 ether));
        } else {
            uint256 cut = bound(amount, 1, stakeManager.freeStake(mover));
            vm.prank(mover);
            stakeManager.requestUnstake(cut);
        }
    }

    /// Honest auditors commit the true root; a colluding one copies the worker's.
    function commitAudit(uint256 seed) external step {
        (uint256 id, IJobMarket.Task memory t) = _pickTask(seed, _auditable);
        _commitAudit(id, t);
    }

    function revealResult(uint256 seed) external step {
        (uint256 id, IJobMarket.Task memory t) = _pickTask(seed, _revealable);
        _reveal(id, t);
    }

    function revealAudit(uint256 seed) external step {
        (uint256 id, IJobMarket.Task memory t) = _pickTask(seed, _auditRevealable);
        _revealAudit(id, t);
    }

    // ================================================================ keeper: settlement and exits

    /// Finalize one task past its window, or (one call in four) every such task at once.
    function finalize(uint256 seed) external step {
        (uint256 id,) = _pickTask(seed, _finalizable);
        _finalize(id, seed);
    }

    function timeoutTask(uint256 seed) external step {
        (uint256 id,) = _pickTask(seed, _timeoutable);
        _keeper(address(market), abi.encodeCall(market.timeoutTask, (id)));
    }

    function closeTask(uint256 seed) external step {
        (uint256 id,) = _pickTask(seed, _closable);
        _keeper(address(market), abi.encodeCall(market.closeTask, (id)));
    }

    // ================================================================ one step of any task

    /// Whatever the task at (or after) `seed` needs next, done by whoever must do it, the way
    /// the actor's kind does it: accept, commit, settle the audit draw, the audit's commit,
    /// the reveals, a challenge (one time in four of a wrong result, in sixteen of a true
    /// one), an audit dispute, finalize, a timeout, a close. Drives tasks deep far more often
    /// than the single actions, which the fuzzer interleaves with it.
    function progressTask(uint256 seed, uint256 aux) external step {
        uint256 n = _tasks.length;
        for (uint256 k = 0; k < n; ++k) {
            uint256 id = _tasks[(seed % n + k) % n];
            if (_progress(id, market.taskOf(id), aux)) return;
        }
        _skip();
    }

    function _progress(uint256 id, IJobMarket.Task memory t, uint256 aux) internal returns (bool) {
        if (_acceptable(id, t)) {
            _accept(id, t);
        } else if (_running(id, t)) {
            _commit(id, t, aux);
        } else if (_settleable(id, t)) {
            _settle(id);
        } else if (_auditable(id, t)) {
            _commitAudit(id, t);
        } else if (_revealable(id, t)) {
            _reveal(id, t);
        } else if (_auditRevealable(id, t)) {
            _revealAudit(id, t);
        } else if (_challengeable(id, t) && (!_isTrue(t.result) ? aux % 4 == 0 : aux % 16 == 0)) {
            _challenge(id, t, aux >> 8, aux >> 16);
        } else if (_auditMismatch(id, t)) {
            _keeper(address(game), abi.encodeCall(game.openAuditDispute, (id)));
        } else if (_finalizable(id, t)) {
            _finalize(id, aux);
        } else if (_timeoutable(id, t)) {
            _keeper(address(market), abi.encodeCall(market.timeoutTask, (id)));
        } else if (_closable(id, t)) {
            _keeper(address(market), abi.encodeCall(market.closeTask, (id)));
        } else {
            return false;
        }
        return true;
    }

    // ================================================================ the steps

    function _accept(uint256 id, IJobMarket.Task memory t) internal {
        vm.prank(t.worker);
        market.acceptTask(id);
    }

    function _commit(uint256 id, IJobMarket.Task memory t, uint256 lieSeed) internal {
        bytes32 root = _liar(t.worker) ? _lie(id, t.worker, lieSeed) : _truth(id);
        bytes32 salt = keccak256(abi.encode(id, currentBlock, lieSeed));
        _workerRoot[id] = root;
        _workerSalt[id] = salt;
        vm.prank(t.worker);
        market.commitResult(id, keccak256(abi.encode(id, root, CID, salt, t.worker)));
    }

    function _settle(uint256 id) internal {
        _keeper(address(market), abi.encodeCall(market.settleAudit, (id)));
    }

    function _commitAudit(uint256 id, IJobMarket.Task memory t) internal {
        bytes32 root = kindOf(t.auditor) == Kind.ColludingVerifier ? _workerRoot[id] : _truth(id);
        _auditRoot[id] = root;
        vm.prank(t.auditor);
        market.commitAudit(id, keccak256(abi.encode(id, root, _auditSalt(id), t.auditor)));
    }

    function _reveal(uint256 id, IJobMarket.Task memory t) internal {
        vm.prank(t.worker);
        market.revealResult(id, _workerRoot[id], CID, _workerSalt[id]);
    }

    function _revealAudit(uint256 id, IJobMarket.Task memory t) internal {
        vm.prank(t.auditor);
        market.revealAudit(id, _auditRoot[id], _auditSalt(id));
    }

    /// Challenge task `id` (implemented by GameActions).
    function _challenge(uint256 id, IJobMarket.Task memory t, uint256 who, uint256 lieSeed) internal virtual;

    /// A permissionless call by the keeper; bubbles up its revert.
    function _keeper(address target, bytes memory call) internal {
        vm.prank(KEEPER);
        (bool ok, bytes memory ret) = target.call(call);
        if (!ok) _bubble(ret);
    }

    function _finalize(uint256 id, uint256 seed) internal {
        vm.startPrank(KEEPER);
        if (seed % 4 != 0) {
            market.finalize(id);
        } else {
            // the picked task first, then the tasks after it (a task twice is skipped the second time)
            uint256[] memory ids = new uint256[](_tasks.length < 32 ? _tasks.length : 32);
            ids[0] = id;
            for (uint256 i = 1; i < ids.length; ++i) {
                ids[i] = _tasks[(seed % _tasks.length + i) % _tasks.length];
            }
            _check(market.finalizeMany(ids) >= 1, "finalizeMany: finalized none of a batch with a due task");
        }
        vm.stopPrank();
    }

    // ================================================================ internals

    function _jobParams(uint256 shape, uint256 money, uint256 windows)
        internal
        view
        returns (IJobMarket.JobParams memory p)
    {
        p.manifestCid = "bafymanifest";
        p.manifestHash = keccak256(abi.encode(shape));
        p.initialCheckpointCid = "bafyinit";
        p.initialCheckpointHash = keccak256(abi.encode(money));
        p.shards = uint32(1 + shape % 2);
        p.rounds = uint32(1 + (shape >> 8) % 2);
        p.checkpointLeaves = uint16(1 + (shape >> 16) % 8);
        p.auditRateBps = uint16(((shape >> 24) % 3) * 5_000);
        p.preferredRegion = (shape >> 32) % 3 == 0 ? 3 : 0;
        p.deviceClass = 1;
        p.memoryMiB = 16_000;
        p.computePerTask = 100;
        p.rewardPerTask = uint96(1 ether + money % 20 ether);
        p.auditFee = uint96((money >> 64) % 5 ether);
        // Within the market's bounds: at least MIN_COLLATERAL (20 TRAIN) and the reward, at most 100 × the reward.
        p.workerCollateral = 20 ether + p.rewardPerTask + uint96((money >> 128) % 40 ether);
        p.acceptWindow = uint32(5 + windows % 16);
        p.computeWindow = uint32(5 + (windows >> 8) % 26);
        p.revealWindow = uint32(5 + (windows >> 16) % 26);
        p.challengeWindow = p.computeWindow + uint32((windows >> 24) % 31);
        p.expiryBlock = uint64(currentBlock + 100 + (windows >> 32) % 1_500);
        if ((shape >> 40) % 4 == 0) (p.minFetchKiBps, p.maxRpcRttMs) = (1_024, 250);
        // two shards split into two stages now and then: the stage draw and deadline rules
        p.stages = p.shards == 2 && p.auditRateBps == 0 && (shape >> 48) % 2 == 0 ? 2 : 1;
    }

    function _auditSalt(uint256 id) internal pure returns (bytes32) {
        return keccak256(abi.encode("audit", id));
    }

    /// The block whose hash settles the task's audit draw (deadline - reveal window).
    function _ticket(uint256 id, IJobMarket.Task memory t) internal view returns (uint256) {
        return t.deadline - _jobInfo[id >> 64].revealWindow;
    }

    /// JobMarket._auditUnsettled: a Committed task whose audit draw is still to settle.
    function _unsettled(uint256 id, IJobMarket.Task memory t) internal view returns (bool) {
        return t.status == IJobMarket.TaskStatus.Committed && t.auditor == address(0)
            && t.flags & FLAG_AUDIT_SETTLED == 0
            && (_jobInfo[id >> 64].auditRateBps != 0 || t.flags & FLAG_AUDIT_DUE != 0);
    }

    /// JobMarket._auditDraw, read from the same block hash: whether the draw audits the task.
    function _drawsAudit(uint256 id, IJobMarket.Task memory t) internal view returns (bool) {
        bytes32 random = keccak256(abi.encode(blockhash(_ticket(id, t)), bytes32(id)));
        return t.flags & FLAG_AUDIT_DUE != 0 || uint256(random) % BPS < _jobInfo[id >> 64].auditRateBps;
    }

    function _open(IJobMarket.Task memory t) internal view returns (bool) {
        return block.number <= t.deadline;
    }

    // -------- job predicates

    function _active(uint256, IJobMarket.Job memory j) internal pure returns (bool) {
        return j.status == IJobMarket.JobStatus.Active;
    }

    function _expired(uint256, IJobMarket.Job memory j) internal view returns (bool) {
        return j.status == IJobMarket.JobStatus.Active && block.number > j.expiryBlock;
    }

    /// An active job, not expired, with a task to draw, and a worker that could take it (two,
    /// when the task is one sent back: its last worker is excluded).
    function _drawable(uint256, IJobMarket.Job memory j) internal view returns (bool) {
        if (j.status != IJobMarket.JobStatus.Active || block.number > j.expiryBlock) return false;
        bool sentBack = j.pendingCount != 0;
        if (!sentBack && !(j.nextIndex < j.shards || (j.nextIndex == j.shards && j.finalizedInRound == j.shards))) {
            return false;
        }
        IWorkerPool.Requirements memory req =
            IWorkerPool.Requirements(
            j.deviceClass, j.memoryMiB, j.preferredRegion, j.workerCollateral, address(0), j.minFetchKiBps, j.maxRpcRttMs
        );
        uint256 eligible;
        for (uint256 i = 2; i < 10; ++i) {
            if (pool.isEligible(_actors[i], req, false)) eligible += 1;
        }
        return eligible > (sentBack ? 1 : 0);
    }

    function _withSurplus(uint256, IJobMarket.Job memory j) internal pure returns (bool) {
        return j.surplus != 0;
    }

    // -------- task predicates

    function _acceptable(uint256 id, IJobMarket.Task memory t) internal view returns (bool) {
        return t.status == IJobMarket.TaskStatus.Offered && _open(t)
            && market.jobOf(id >> 64).status == IJobMarket.JobStatus.Active;
    }

    function _running(uint256, IJobMarket.Task memory t) internal view returns (bool) {
        return t.status == IJobMarket.TaskStatus.Running && _open(t);
    }

    function _settleable(uint256 id, IJobMarket.Task memory t) internal view returns (bool) {
        return _unsettled(id, t) && _open(t) && block.number > _ticket(id, t);
    }

    function _auditable(uint256, IJobMarket.Task memory t) internal view returns (bool) {
        return t.status == IJobMarket.TaskStatus.Committed && t.auditor != address(0)
            && t.flags & FLAG_AUDIT_COMMITTED == 0 && _open(t);
    }

    /// The worker may reveal: its auditor committed (or none was drawn), an unsettled draw is
    /// readable and draws no audit; the quitter never reveals once an auditor was drawn.
    function _revealable(uint256 id, IJobMarket.Task memory t) internal view returns (bool) {
        if (t.status != IJobMarket.TaskStatus.Committed || !_open(t)) return false;
        if (t.auditor != address(0)) {
            return t.flags & FLAG_AUDIT_COMMITTED != 0 && kindOf(t.worker) != Kind.QuittingWorker;
        }
        if (!_unsettled(id, t)) return true;
        return block.number > _ticket(id, t) && !FutureRandomness.lapsed(uint64(_ticket(id, t))) && !_drawsAudit(id, t);
    }

    function _auditRevealable(uint256, IJobMarket.Task memory t) internal view returns (bool) {
        return (t.status == IJobMarket.TaskStatus.Committed || t.status == IJobMarket.TaskStatus.Revealed)
            && t.flags & FLAG_AUDIT_COMMITTED != 0 && t.flags & FLAG_AUDIT_REVEALED == 0 && _open(t);
    }

    function _finalizable(uint256 id, IJobMarket.Task memory t) internal view returns (bool) {
        // a stage waits for its group (Stages.blocker)
        return t.status == IJobMarket.TaskStatus.ChallengeWindow && !_open(t) && Stages.blocker(market, id) == 0;
    }

    function _timeoutable(uint256, IJobMarket.Task memory t) internal view returns (bool) {
        IJobMarket.TaskStatus s = t.status;
        return (s == IJobMarket.TaskStatus.Offered
                || s == IJobMarket.TaskStatus.Running
                || s == IJobMarket.TaskStatus.Committed
                || s == IJobMarket.TaskStatus.Revealed) && !_open(t);
    }

    function _closable(uint256 id, IJobMarket.Task memory t) internal view returns (bool) {
        return (t.status == IJobMarket.TaskStatus.Pending || t.status == IJobMarket.TaskStatus.Offered)
            && market.jobOf(id >> 64).status != IJobMarket.JobStatus.Active;
    }

    function _challengeable(uint256 id, IJobMarket.Task memory t) internal view returns (bool) {
        return t.status == IJobMarket.TaskStatus.ChallengeWindow && _open(t) && !_gameLive(id);
    }

    function _auditMismatch(uint256 id, IJobMarket.Task memory t) internal view returns (bool) {
        return t.status == IJobMarket.TaskStatus.Disputed && t.flags & FLAG_CHALLENGED == 0 && !_gameLive(id);
    }
}
