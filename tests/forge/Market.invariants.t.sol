// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {MarketModel} from "./utils/MarketModel.sol";
import {MarketHandler} from "./handlers/MarketHandler.sol";
import {TaskActions} from "./handlers/TaskActions.sol";
import {GameActions} from "./handlers/GameActions.sol";
import {IJobMarket} from "contracts/interfaces/IJobMarket.sol";
import {IDisputeGame} from "contracts/interfaces/IDisputeGame.sol";
import {IWorkerPool} from "contracts/interfaces/IWorkerPool.sol";
import {IStakeManager} from "contracts/interfaces/IStakeManager.sol";
import {IIdentityRegistry, ROLE_WORKER, ROLE_VERIFIER} from "contracts/interfaces/IIdentityRegistry.sol";

/// @title Market invariants (forge): the whole stack under honest and dishonest actors
/// @notice The fuzzer calls only MarketHandler (every action in `setUp`'s selector list, some
/// weighted): staking, identities, jobs, draws, commits, reveals, audits, challenges,
/// bisection moves, referee draws and votes, verdicts, every timeout and exit, finalizations,
/// withdrawals, donations and the clock. After every call each `_assert*` below must hold
/// (properties T1, S1, M1-M4, M6, M10, M12, M13, D1, D2, C5, C6 of contracts/PROPERTIES.md).
/// They are checked by one invariant, so one campaign of `runs` x `depth` calls (foundry.toml
/// and `make test`: 256 x 64; `make fuzz`: 10,000 x 64) tests them all: as five invariants
/// (five campaigns) with a fixed seed they drew nearly the same call sequences five times,
/// for five times the CPU. Model computations (what live work holds, what an exit is) are
/// in MarketModel.
/// Run: `forge test --match-path tests/forge/Market.invariants.t.sol` (make forge-test); add
/// -vv for the coverage log (protocol events seen, all campaigns of the process together).
/// The handler only makes calls its model of the protocol says must succeed, or discards
/// the call; so every revert is a failure (the model's, or the contracts').
/// forge-config: default.invariant.fail-on-revert = true
/// forge-config: deep.invariant.fail-on-revert = true
contract MarketInvariants is MarketModel {
    function setUp() public {
        vm.roll(1_000);
        _deployMarketStack();
        handler = new MarketHandler(token, registry, stakeManager, pool, market, game);
        token.transferOwnership(address(handler)); // the handler mints (ghost-counted)
        handler.init();

        targetContract(address(handler));
        bytes4[] memory s = new bytes4[](56);
        // the clock (weighted: phases need blocks to pass) and keepers
        s[0] = MarketHandler.roll.selector;
        s[1] = MarketHandler.roll.selector;
        s[2] = MarketHandler.roll.selector;
        s[3] = MarketHandler.rollFar.selector;
        s[4] = MarketHandler.heartbeat.selector;
        s[5] = MarketHandler.refresh.selector;
        // stakes, identities, the pool, money out
        s[6] = MarketHandler.stake.selector;
        s[7] = MarketHandler.requestUnstake.selector;
        s[8] = MarketHandler.withdrawUnstaked.selector;
        s[9] = MarketHandler.withdrawStakeCredits.selector;
        s[10] = MarketHandler.withdrawMarketCredits.selector;
        s[11] = MarketHandler.donate.selector;
        s[12] = MarketHandler.register.selector;
        s[13] = MarketHandler.togglePool.selector;
        // jobs and tasks: one step of any task (weighted up: it drives tasks deep), and each call alone
        s[14] = TaskActions.createJob.selector;
        s[15] = TaskActions.progressTask.selector;
        s[16] = TaskActions.cancelJob.selector;
        s[17] = TaskActions.expireJob.selector;
        s[18] = TaskActions.refundSurplus.selector;
        s[19] = TaskActions.drawTask.selector;
        s[20] = TaskActions.drawTasks.selector;
        s[21] = TaskActions.progressTask.selector;
        s[22] = TaskActions.progressTask.selector;
        s[23] = TaskActions.progressTask.selector;
        s[24] = TaskActions.progressTask.selector;
        s[25] = TaskActions.progressTask.selector;
        s[26] = TaskActions.progressTask.selector;
        s[27] = TaskActions.progressTask.selector;
        s[28] = TaskActions.progressTask.selector;
        s[29] = TaskActions.acceptTask.selector;
        s[30] = TaskActions.commitResult.selector;
        s[31] = TaskActions.settleAudit.selector;
        s[32] = TaskActions.commitAudit.selector;
        s[33] = TaskActions.revealResult.selector;
        s[34] = TaskActions.revealAudit.selector;
        s[35] = TaskActions.finalize.selector;
        s[36] = TaskActions.timeoutTask.selector;
        s[37] = TaskActions.closeTask.selector;
        // disputes: one step of any game (weighted up), and each call alone
        s[38] = GameActions.progressGame.selector;
        s[39] = GameActions.progressGame.selector;
        s[40] = GameActions.progressGame.selector;
        s[41] = GameActions.progressGame.selector;
        s[42] = GameActions.challenge.selector;
        s[43] = GameActions.openAuditDispute.selector;
        s[44] = GameActions.move.selector;
        s[45] = GameActions.drawReferees.selector;
        s[46] = GameActions.commitVotes.selector;
        s[47] = GameActions.revealVotes.selector;
        s[48] = GameActions.resolve.selector;
        s[49] = GameActions.gameTimeout.selector;
        s[50] = MarketHandler.setRoles.selector;
        s[51] = MarketHandler.declareNetwork.selector;
        // stake moved once a draw's hash is public, to steer it (issue 27, findings 1, 2, 7a)
        s[52] = TaskActions.grindAuditDraw.selector;
        s[53] = GameActions.grindCommittee.selector;
        s[54] = TaskActions.grindOffer.selector;
        // an offer declined for inputs that cannot be fetched (issue 30)
        s[55] = TaskActions.declineTask.selector;
        targetSelector(FuzzSelector({addr: address(handler), selectors: s}));
    }

    /// The invariant runs at the handler's block and first asserts the handler's per-call
    /// checks (a refresh sets the model weight; finalizeMany pays a due task).
    modifier atHandlerBlock() {
        vm.roll(handler.currentBlock());
        assertEq(bytes(handler.violation()).length, 0, string.concat("per-call check: ", handler.violation()));
        _;
    }

    /// Every property below, after every call. The drawn tasks, their states and what their
    /// live work holds are read once for all. The draw-weight check comes last: it refreshes
    /// each member, which the checks before it must not see (forge discards it after the call).
    function invariant_everyPropertyHolds() public atHandlerBlock {
        uint256[] memory ids = handler.allTasks();
        IJobMarket.Task[] memory tasks = _tasksOf(ids);
        (uint256[] memory locked, uint256[] memory slots) = _liveWork(ids, tasks);
        _assertTokenConservation();
        _assertSolvency(ids, tasks, locked);
        _assertOnePayoutPerTaskAndGame(ids, tasks);
        _assertEveryOverdueStateHasAnExit(ids);
        _assertDrawWeightsFollowFreeStake(slots);
    }

    // ================================================================ (1) conservation

    /// Σ balances of every holder (actors, keeper, handler, this, every contract of the
    /// stack) + totalBurned == totalMinted == what the handler minted; Σ == totalSupply
    /// (so no other address holds a token).
    function _assertTokenConservation() internal view {
        uint256 sum = _balance(address(market)) + _balance(address(stakeManager)) + _balance(address(pool))
            + _balance(address(game)) + _balance(address(registry)) + _balance(address(timelock))
            + _balance(address(token)) + _balance(address(handler)) + _balance(address(this))
            + _balance(handler.KEEPER());
        for (uint256 i = 0; i < handler.ACTORS(); ++i) {
            sum += _balance(handler.actor(i));
        }
        assertEq(sum, token.totalSupply(), "T1: sum of balances != totalSupply");
        assertEq(sum + token.totalBurned(), token.totalMinted(), "T1: balances + burned != minted");
        assertEq(token.totalMinted(), handler.ghostMinted(), "T1: totalMinted != minted by the handler");
    }

    // ================================================================ (2) solvency

    /// Each contract holds at least what it owes, by its own accounting:
    /// StakeManager: balance == totalStaked + totalCredits + donations (S1), and those totals
    /// are the sums over accounts (S3). JobMarket: balance == totalEscrow + totalCredits +
    /// donations (M2); Σ job escrow == totalEscrow; Σ credits == totalCredits; each job's
    /// escrow == (its tasks neither paid, closed nor refunded) x (reward + audit fee) +
    /// surplus (M6). DisputeGame: holds only donations, owes nothing: its bonds are locked
    /// stake, and every account's locked stake == Σ of the collaterals, auditor collaterals,
    /// challenge bonds and referee stakes its live tasks and games hold (M12, D2): so every
    /// bond a game can slash is held, and nothing stays locked after its task or game ended.
    function _assertSolvency(uint256[] memory ids, IJobMarket.Task[] memory tasks, uint256[] memory locked)
        internal
        view
    {
        uint256 staked;
        uint256 stakeCredits;
        uint256 marketCredits;
        for (uint256 i = 0; i < handler.ACTORS(); ++i) {
            address who = handler.actor(i);
            IStakeManager.StakeInfo memory info = stakeManager.stakeOf(who);
            staked += info.active + info.unbonding;
            stakeCredits += stakeManager.credits(who);
            marketCredits += market.credits(who);
            assertEq(
                info.locked, locked[i], string.concat("D2/M12: locked stake != live bonds of actor ", vm.toString(i))
            );
        }
        uint256 smOwed = stakeManager.totalStaked() + stakeManager.totalCredits();
        assertGe(_balance(address(stakeManager)), smOwed, "S1: StakeManager balance < staked + credits");
        assertEq(
            _balance(address(stakeManager)),
            smOwed + handler.ghostDonated(address(stakeManager)),
            "S1: StakeManager balance != owed + donations"
        );
        assertEq(stakeManager.totalStaked(), staked, "S3: totalStaked != sum of active + unbonding");
        assertEq(stakeManager.totalCredits(), stakeCredits, "S3: totalCredits != sum of credits");

        uint256 marketOwed = market.totalEscrow() + market.totalCredits();
        assertGe(_balance(address(market)), marketOwed, "M2: market balance < escrow + credits");
        assertEq(
            _balance(address(market)),
            marketOwed + handler.ghostDonated(address(market)),
            "M2: market balance != owed + donations"
        );
        assertEq(market.totalCredits(), marketCredits, "M2: market totalCredits != sum of credits");
        assertEq(market.totalEscrow(), _checkJobEscrows(ids, tasks), "M2: totalEscrow != sum of job escrows");
        assertEq(_balance(address(game)), handler.ghostDonated(address(game)), "D1: the game holds tokens");
    }

    // ================================================================ (3) one payout

    /// At most one payout per task (TaskFinalized) and per game (DisputeSettled), counted
    /// from every action's logs; a task is paid or refunded (TaskClosed), not both; a game is
    /// settled or voided, not both; Finalized, Closed, Resolved and Voided are terminal and
    /// reached by exactly that one event (M4, D2).
    function _assertOnePayoutPerTaskAndGame(uint256[] memory ids, IJobMarket.Task[] memory tasks) internal view {
        for (uint256 i = 0; i < ids.length; ++i) {
            uint256 id = ids[i];
            uint256 paid = handler.finalizedCount(id);
            uint256 closed = handler.closedCount(id);
            assertLe(paid + closed, 1, string.concat("M4: task paid or refunded twice: ", vm.toString(id)));
            IJobMarket.TaskStatus s = tasks[i].status;
            assertEq(s == IJobMarket.TaskStatus.Finalized, paid == 1, "M4: Finalized without exactly one payout");
            assertEq(s == IJobMarket.TaskStatus.Closed, closed == 1, "M4: Closed without exactly one refund");
        }
        for (uint256 gameId = 1; gameId <= game.gameCount(); ++gameId) {
            uint256 settled = handler.settledCount(gameId);
            uint256 voided = handler.voidedCount(gameId);
            assertLe(settled + voided, 1, string.concat("D2: game settled twice: ", vm.toString(gameId)));
            IDisputeGame.GameStatus s = game.gameOf(gameId).status;
            assertEq(s == IDisputeGame.GameStatus.Resolved, settled == 1, "D2: Resolved without exactly one settlement");
            assertEq(s == IDisputeGame.GameStatus.Voided, voided == 1, "D2: Voided without exactly one void");
        }
    }

    // ================================================================ (4) exits

    /// No state older than its deadline without an available exit (M10, C5, the exits table
    /// of PROPERTIES.md): for every task, game and job past its deadline, the permissionless
    /// exit, sent by a keeper in a snapshot of the state, succeeds. Pending (job stopped or
    /// expired): [expireJob +] closeTask; Offered / Running / Committed / Revealed: timeoutTask;
    /// ChallengeWindow: finalize; Disputed by an audit without a game: openAuditDispute (always);
    /// Bisecting past the mover's clock, Committing past its window, AwaitingReferees past the
    /// ticket + 256: timeout; AwaitingReferees past its ticket: drawReferees; Revealing past
    /// its window: resolve; an Active job past its expiry: expireJob.
    function _assertEveryOverdueStateHasAnExit(uint256[] memory ids) internal {
        for (uint256 i = 0; i < ids.length; ++i) {
            _checkTaskExit(ids[i]);
        }
        for (uint256 gameId = 1; gameId <= game.gameCount(); ++gameId) {
            _checkGameExit(gameId);
        }
        for (uint256 jobId = 1; jobId <= market.jobCount(); ++jobId) {
            IJobMarket.Job memory j = market.jobOf(jobId);
            if (j.status == IJobMarket.JobStatus.Active && block.number > j.expiryBlock) {
                _exitWorks(address(market), abi.encodeCall(market.expireJob, (jobId)), "", "expireJob");
            }
        }
    }

    // ================================================================ (5) draw weights

    /// Draw weights follow free stake. The pool stores, per member and tree, the weight of its
    /// last refresh: W = min(freeStake x reputation, 2^100) while joined, holding the tree's
    /// role (as cached), live and under its concurrency limit, else 0 (MarketHandlerBase.
    /// modelWeight). What the code guarantees, asserted for every actor and both trees:
    /// (a) tree weight == 0 whenever the member is not joined, lacks the role as the pool
    ///     cached it, or is at its limit (exact at every step: assign zeroes it at the limit);
    /// (b) tree weight == W exactly after `refresh` (checked for every actor; forge discards it);
    /// (c) tree weight == W exactly for every live member that no event has touched since its
    ///     last full refresh (`handler.mayLag` false: no lock, unlock, slash, penalty,
    ///     forfeit or reputation change of it since its last stake, unstake, refresh, join or
    ///     leave). Against the weight a refresh would give now, the tree may lag ABOVE after a
    ///     draw's lock (assign leaves the weight: each draw keeps a candidate with probability
    ///     now / tree, WorkerPool._candidate), a challenge bond's lock, a reputation loss, a
    ///     lapsed heartbeat or a role dropped in the registry (cached until the next join or
    ///     refresh); and BELOW after the game unlocks a bond or referee stake, or a reputation
    ///     gain, none of which refresh the pool (by design: "a weight left too low only costs
    ///     the member");
    /// (d) Σ member weights == the tree's total; (e) each member's active-task count == the
    ///     live tasks holding a pool slot of it (as worker or auditor; an audit-mismatch
    ///     dispute frees both slots, a challenge holds them) (M13).
    function _assertDrawWeightsFollowFreeStake(uint256[] memory slots) internal {
        uint256[2] memory totals;
        uint256[2] memory treeTotals = [pool.totalWeight(false), pool.totalWeight(true)];
        for (uint256 i = 0; i < handler.ACTORS(); ++i) {
            address who = handler.actor(i);
            Pooled memory p = _pooled(who);
            assertEq(
                p.member.active,
                slots[i],
                string.concat("M13: pool active count != live slots of actor ", vm.toString(i))
            );
            bool lag = handler.mayLag(who);
            for (uint256 tree = 0; tree < 2; ++tree) {
                uint8 role = tree == 0 ? ROLE_WORKER : ROLE_VERIFIER;
                uint256 stored = pool.weightOf(who, tree == 1);
                // (a weight change a hold deferred lags until the member's next refresh)
                if ((!p.member.joined || p.member.roles & role == 0 || !p.underLimit) && !lag) {
                    assertEq(stored, 0, "C6 (a): weight of a member that cannot be drawn");
                }
                if (p.live && !lag) {
                    assertEq(
                        stored,
                        _model(p, p.member.roles, role),
                        "C6 (c): untouched member's weight != free stake x reputation"
                    );
                }
                totals[tree] += stored;
            }
            // (b): forge discards what an invariant function changes, so this refresh changes
            // nothing the next call sees (and refreshing one member moves no other's model)
            pool.refresh(who);
            for (uint256 tree = 0; tree < 2; ++tree) {
                if (tree == 0 ? pool.workersHeld() : pool.verifiersHeld()) continue;
                uint8 role = tree == 0 ? ROLE_WORKER : ROLE_VERIFIER;
                assertEq(
                    pool.weightOf(who, tree == 1), _model(p, p.roles, role), "C6 (b): weight after refresh != model"
                );
            }
        }
        assertEq(treeTotals[0], totals[0], "L1 (d): worker tree total != sum of member weights");
        assertEq(treeTotals[1], totals[1], "L1 (d): verifier tree total != sum of member weights");
    }

    /// What the pool's refresh reads of a member (MarketHandlerBase.modelWeight, in one pass).
    struct Pooled {
        IWorkerPool.Member member;
        uint8 roles; // the registry's worker / verifier roles (what a refresh caches)
        bool live;
        bool underLimit;
        uint256 base; // min(free stake x reputation, 2^100)
    }

    function _pooled(address who) internal view returns (Pooled memory p) {
        p.member = pool.memberOf(who);
        (uint8 roles, uint64 lastSeen, uint32 reputation, IIdentityRegistry.Capability memory cap) =
            registry.poolViewOf(who);
        p.roles = roles & (ROLE_WORKER | ROLE_VERIFIER);
        p.live = lastSeen + LIVENESS_WINDOW_BLOCKS >= block.number;
        p.underLimit = p.member.active < (cap.maxConcurrent == 0 ? 1 : cap.maxConcurrent);
        p.base = stakeManager.freeStake(who) * reputation;
        if (p.base > pool.MAX_MEMBER_WEIGHT()) p.base = pool.MAX_MEMBER_WEIGHT();
    }

    /// The weight a refresh gives the member in `role`'s tree with `roles` cached.
    function _model(Pooled memory p, uint8 roles, uint8 role) internal pure returns (uint256) {
        return p.member.joined && roles & role != 0 && p.live && p.underLimit ? p.base : 0;
    }

    // ================================================================ coverage

    /// After each run: add the run's protocol events to this forge process's running totals
    /// (kept in environment variables, the only state that outlives a run) and log them
    /// (`forge test -vv` prints the last run's log: the totals of every campaign so far).
    function afterInvariant() public {
        _logCoverage();
    }

    function _balance(address who) internal view returns (uint256) {
        return token.balanceOf(who);
    }
}
