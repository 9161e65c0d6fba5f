// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {IWorkerPool} from "./interfaces/IWorkerPool.sol";
import {IIdentityRegistry, ROLE_WORKER, ROLE_VERIFIER} from "./interfaces/IIdentityRegistry.sol";
import {IStakeManager, IStakeListener} from "./interfaces/IStakeManager.sol";
import {SortitionSumTree} from "./libraries/SortitionSumTree.sol";
import {FutureRandomness} from "./libraries/FutureRandomness.sol";

/// @title WorkerPool
/// @notice The market's scheduler: two sortition sum trees (workers, verifiers) and the
/// per-member active-task counts. See IWorkerPool for the draw rules.
contract WorkerPool is AccessControl, IWorkerPool {
    using SortitionSumTree for SortitionSumTree.Tree;

    /// @inheritdoc IWorkerPool
    bytes32 public constant MARKET_ROLE = keccak256("MARKET_ROLE");
    /// @inheritdoc IWorkerPool
    bytes32 public constant DRAW_ROLE = keccak256("DRAW_ROLE");
    /// @inheritdoc IWorkerPool
    uint256 public constant MAX_DRAW_ATTEMPTS = 16;
    /// @inheritdoc IWorkerPool
    uint256 public constant COMMITTEE_DRAWS_PER_SEAT = 4;
    /// @notice `Member.roles` bit: a verifier weight change waits for a refresh after a hold.
    uint8 public constant VERIFIER_DEFERRED = 0x80;
    /// @notice `Member.roles` bit: a worker weight change waits for a refresh after a hold.
    uint8 public constant WORKER_DEFERRED = 0x40;
    /// @dev Both deferral bits.
    uint8 private constant DEFERRED = VERIFIER_DEFERRED | WORKER_DEFERRED;
    /// @dev The role bits a member's cached `roles` keeps (ROLE_WORKER | ROLE_VERIFIER).
    uint8 private constant ROLES = ROLE_WORKER | ROLE_VERIFIER;
    /// @notice Largest weight one member gets (stake × reputation is clamped to it).
    uint256 public constant MAX_MEMBER_WEIGHT = 2 ** 100;

    IIdentityRegistry public immutable registry;
    IStakeManager public immutable stakeManager;
    /// @inheritdoc IWorkerPool
    uint64 public immutable livenessWindow;
    /// @inheritdoc IWorkerPool
    uint32 public immutable regionBoost;

    SortitionSumTree.Tree private _workers;
    SortitionSumTree.Tree private _verifiers;
    mapping(address account => Member) private _members;
    /// @dev Held tickets: each tree's `tag` (in the tree's header slot, which a weight change
    /// reads anyway) holds, for each epoch parity, the earliest ticket requested in an epoch of
    /// that parity (40 bits each, the even epoch's in the low bits): a ticket names its epoch,
    /// and requests reach at most into the next epoch, so two tickets per tree hold every live
    /// hold and a new epoch's first hold rewrites a used one. From the block after the ticket to
    /// the epoch's end, the tree is held. The verifier tree's holds come from holdDraws, the
    /// worker tree's from holdOffers.
    uint256 private constant HELD_BITS = 40;

    /// @param registry_ the IdentityRegistry (roles, capability, liveness, reputation)
    /// @param stakeManager_ the StakeManager (free stake, collateral locks; grant this pool MARKET_ROLE there)
    /// @param livenessWindow_ blocks a heartbeat stays valid (≥ 1)
    /// @param regionBoost_ preferred-region boost factor (≥ 1; 1 = no boost)
    constructor(IIdentityRegistry registry_, IStakeManager stakeManager_, uint64 livenessWindow_, uint32 regionBoost_) {
        if (livenessWindow_ == 0 || regionBoost_ == 0) revert PoolInvalidConfig(livenessWindow_, regionBoost_);
        registry = registry_;
        stakeManager = stakeManager_;
        livenessWindow = livenessWindow_;
        regionBoost = regionBoost_;
        _grantRole(DEFAULT_ADMIN_ROLE, msg.sender);
    }

    /// @inheritdoc IWorkerPool
    function joinPool() external {
        if (!registry.hasParticipantRole(msg.sender, ROLE_WORKER) && !registry.hasParticipantRole(msg.sender, ROLE_VERIFIER)) {
            revert PoolRoleMissing(msg.sender);
        }
        Member storage m = _members[msg.sender];
        if (m.joined) revert PoolAlreadyJoined(msg.sender);
        m.joined = true;
        emit PoolJoined(msg.sender);
        _refresh(msg.sender, true);
    }

    /// @inheritdoc IWorkerPool
    function leavePool() external {
        Member storage m = _members[msg.sender];
        if (!m.joined) revert PoolNotJoined(msg.sender);
        m.joined = false;
        emit PoolLeft(msg.sender);
        _refresh(msg.sender, true);
    }

    /// @inheritdoc IWorkerPool
    function refresh(address account) external {
        _refresh(account, true);
    }

    /// @inheritdoc IStakeListener
    /// @dev Anyone may call it (it only recomputes the weight from the chain's state); the
    /// StakeManager calls it after every change of a stake it did not get from this pool.
    function stakeChanged(address account) external {
        _refresh(account, false);
    }

    /// @inheritdoc IWorkerPool
    function holdDraws(uint64 ticket) external onlyRole(DRAW_ROLE) {
        _hold(ticket, true);
    }

    /// @inheritdoc IWorkerPool
    function holdOffers(uint64 ticket) external onlyRole(DRAW_ROLE) {
        _hold(ticket, false);
    }

    /// @inheritdoc IWorkerPool
    function verifiersHeld() public view returns (bool) {
        return _isHeld(_verifiers);
    }

    /// @inheritdoc IWorkerPool
    function workersHeld() public view returns (bool) {
        return _isHeld(_workers);
    }

    function _hold(uint64 ticket, bool verifier) private {
        uint256 epoch = FutureRandomness.epochOf(ticket);
        SortitionSumTree.Tree storage tree = verifier ? _verifiers : _workers;
        uint80 tag = tree.tag;
        uint256 held = _heldTicket(tag, epoch);
        if (held != 0 && held <= ticket) return;
        // A ticket is a block number: below 2^40 for 17,000 years of 0.5 s blocks.
        if (ticket >> HELD_BITS != 0) revert FutureRandomness.RandomnessUnavailable(ticket);
        uint256 shift = (epoch & 1) * HELD_BITS;
        tree.tag = uint80((tag & ~(uint256(type(uint40).max) << shift)) | (uint256(ticket) << shift));
        if (verifier) emit DrawsHeld(epoch, ticket);
        else emit OffersHeld(epoch, ticket);
    }

    function _isHeld(SortitionSumTree.Tree storage tree) private view returns (bool) {
        uint256 held = _heldTicket(tree.tag, FutureRandomness.epochOf(block.number));
        return held != 0 && held < block.number;
    }

    /// @dev The first ticket held in `epoch` by a tree whose tag is `tag`, 0 when none (its
    /// parity's bits are empty or hold another epoch's ticket).
    function _heldTicket(uint80 tag, uint256 epoch) private pure returns (uint256 held) {
        held = (uint256(tag) >> ((epoch & 1) * HELD_BITS)) & type(uint40).max;
        if (held != 0 && FutureRandomness.epochOf(held) != epoch) held = 0;
    }

    /// @inheritdoc IWorkerPool
    function assign(bytes32 seed, Requirements calldata req, bool verifier)
        external
        onlyRole(MARKET_ROLE)
        returns (address member)
    {
        uint256 limit;
        address[] memory stale;
        (member, limit, stale) = _pick(seed, req, verifier);
        // Members the draw passed over as stale (no heartbeat within the liveness window) leave
        // the tree now, so they stop taking attempts from later draws.
        for (uint256 i = 0; i < stale.length; ++i) {
            _refresh(stale[i], false);
        }
        if (member == address(0)) return address(0);

        Member storage m = _members[member];
        uint16 active = m.active + 1;
        m.active = active;
        emit MemberAssigned(member, verifier, req.collateral, active);
        stakeManager.lockCollateral(member, req.collateral);
        // The tree weight is left as it is until the task ends (it only overstates the free
        // stake by this lock, and every draw corrects for that, see _pick). Only a member now
        // at its concurrency limit leaves the trees.
        if (active >= limit) _setWeights(member, m.roles, 0);
    }

    /// @inheritdoc IWorkerPool
    function sample(bytes32 seed, Requirements calldata req, bool verifier) external view returns (address member) {
        (member,,) = _pick(seed, req, verifier);
    }

    /// @inheritdoc IWorkerPool
    function drawCommittee(bytes32 seed, uint256 size, Requirements calldata req, address alsoExclude)
        external
        view
        returns (address[] memory seated)
    {
        uint256 attempts = size * COMMITTEE_DRAWS_PER_SEAT;
        seated = new address[](size);
        // Every draw leaves out the intervals of the members drawn before it: nobody is drawn
        // twice, and the committee fills in `size` draws when everyone drawn is eligible.
        Drawn memory drawn;
        (drawn.total, drawn.capacity) = (_verifiers.total(), attempts);
        uint256 found;
        for (uint256 i = 0; i < attempts && found < size && drawn.removed < drawn.total; ++i) {
            (address candidate,) = _drawExcluding(_verifiers, drawn, _attempt(seed, i));
            if (candidate == alsoExclude) continue;
            if (_eligible(candidate, req, true).ok) seated[found++] = candidate;
        }
        assembly ("memory-safe") {
            mstore(seated, found)
        }
    }

    /// @inheritdoc IWorkerPool
    function release(address account, uint256 unlock) external onlyRole(MARKET_ROLE) {
        _release(account, 1, unlock);
    }

    /// @inheritdoc IWorkerPool
    function releaseMany(address account, uint256 count, uint256 unlock) external onlyRole(MARKET_ROLE) {
        _release(account, count, unlock);
    }

    /// @inheritdoc IWorkerPool
    function freeSlot(address account) external onlyRole(MARKET_ROLE) {
        Member storage m = _members[account];
        uint16 active = m.active;
        // INVARIANT: active counts exactly the assignments not yet released.
        if (active == 0) revert PoolNoActiveTask(account);
        m.active = active - 1;
        emit MemberReleased(account, 0, active - 1);
        // Below its limit the member kept its tree weight when it was assigned (`assign`);
        // one out of the worker tree (at its limit, or not drawable for another reason, which
        // the refresh keeps) gets its weight recomputed.
        if (_workers.weightOf(account) == 0) _refresh(account, false);
    }

    /// @inheritdoc IWorkerPool
    function unlock(address account, uint256 amount) external onlyRole(MARKET_ROLE) {
        if (amount != 0) stakeManager.unlockCollateral(account, amount);
        _refresh(account, false);
    }

    /// @inheritdoc IWorkerPool
    function isEligible(address account, Requirements calldata req, bool verifier) external view returns (bool ok) {
        ok = _eligible(account, req, verifier).ok;
    }

    /// @inheritdoc IWorkerPool
    function memberOf(address account) external view returns (Member memory) {
        return _members[account];
    }

    /// @inheritdoc IWorkerPool
    function weightOf(address account, bool verifier) external view returns (uint256) {
        return (verifier ? _verifiers : _workers).weightOf(account);
    }

    /// @inheritdoc IWorkerPool
    function totalWeight(bool verifier) external view returns (uint256) {
        return (verifier ? _verifiers : _workers).total();
    }

    function _release(address account, uint256 count, uint256 unlock) private {
        Member storage m = _members[account];
        uint16 active = m.active;
        // INVARIANT: active counts exactly the assignments not yet released.
        if (count == 0 || active < count) revert PoolNoActiveTask(account);
        active -= uint16(count);
        m.active = active;
        emit MemberReleased(account, unlock, active);
        if (unlock != 0) stakeManager.unlockCollateral(account, unlock);
        _refresh(account, false);
    }

    /// @dev Recompute weights; `readRoles` re-reads the registry roles (joinPool and the
    /// permissionless refresh), market touches use the roles cached at the last read (and the
    /// verifier tree too when a change of it was deferred by a hold).
    function _refresh(address account, bool readRoles) private {
        Member storage stored = _members[account];
        (uint8 registeredRoles, uint64 lastSeen, uint32 reputation, IIdentityRegistry.Capability memory cap) =
            registry.poolViewOf(account);
        if (readRoles) {
            uint8 roles = (registeredRoles & ROLES) | (stored.roles & DEFERRED);
            if (stored.roles != roles) stored.roles = roles;
        }
        Member memory m = stored;
        uint256 base;
        if (m.joined && m.roles & ROLES != 0 && lastSeen + livenessWindow >= block.number) {
            if (m.active < _limit(cap.maxConcurrent)) base = _weight(stakeManager.freeStake(account), reputation);
        }
        uint8 trees = readRoles || m.roles & DEFERRED != 0 ? ROLES : m.roles;
        _setWeights(account, trees, base);
    }

    /// @dev Set the weight in each tree named by `trees` (a role mask): `base` where the
    /// member holds the role (cached), else 0. A change of a tree's weight while that tree's
    /// draws are held is deferred: the member is marked (WORKER_DEFERRED, VERIFIER_DEFERRED)
    /// so that its next refresh after the hold makes it.
    function _setWeights(address account, uint8 trees, uint256 base) private {
        if (trees & ROLE_WORKER != 0) _setWeight(account, base, false);
        if (trees & ROLE_VERIFIER != 0) _setWeight(account, base, true);
    }

    function _setWeight(address account, uint256 base, bool verifier) private {
        Member storage m = _members[account];
        uint8 roles = m.roles;
        (SortitionSumTree.Tree storage tree, uint8 role, uint8 bit) =
            verifier ? (_verifiers, ROLE_VERIFIER, VERIFIER_DEFERRED) : (_workers, ROLE_WORKER, WORKER_DEFERRED);
        uint256 w = roles & role != 0 ? base : 0;
        bool changed = tree.weightOf(account) != w;
        if (changed && _isHeld(tree)) {
            // INVARIANT: no weight of a held tree moves between a draw's ticket and its settlement.
            // A member already marked changes nothing here (its refresh computes the weight
            // anew), so only the marking is announced.
            if (roles & bit != 0) return;
            m.roles = roles | bit;
            if (verifier) emit VerifierWeightDeferred(account, w);
            else emit WorkerWeightDeferred(account, w);
            return;
        }
        if (roles & bit != 0) m.roles = roles & ~bit;
        if (changed) {
            tree.set(account, w);
            emit WeightUpdated(account, verifier, w);
        }
    }

    /// @dev A draw without replacement (see IWorkerPool): up to MAX_DRAW_ATTEMPTS candidates,
    /// each drawn from the tree with the intervals of those drawn before it left out, so an
    /// excluded or ineligible member is taken out of the draw, never retried, and nobody's
    /// choice to be eligible or not moves the draw of anyone else. A worker whose tree weight
    /// is above its weight now (locks since its last refresh) is kept only with probability
    /// now / tree, and is taken out too when it is not (rejection sampling without retries:
    /// whether a member is rejected or ineligible leaves the same candidates after it, so a
    /// member moving its own stake decides only whether *it* is taken); when no candidate is
    /// kept, the first one rejected is taken (a pool of one such worker still draws it).
    /// Verifier draws follow the held tree weights as they are (they are drawn from weights
    /// fixed before their ticket, WorkerPool.holdDraws). Returns the member and its
    /// concurrency limit, or address(0), and the stale candidates passed over.
    function _pick(bytes32 seed, Requirements calldata req, bool verifier)
        private
        view
        returns (address member, uint256 limit, address[] memory stale)
    {
        SortitionSumTree.Tree storage tree = verifier ? _verifiers : _workers;
        uint256 staleCount; // `stale` is allocated at the first stale candidate (rare)
        Drawn memory drawn;
        (drawn.total, drawn.capacity) = (tree.total(), MAX_DRAW_ATTEMPTS);
        for (uint256 i = 0; i < MAX_DRAW_ATTEMPTS && drawn.removed < drawn.total; ++i) {
            uint256 random = _attempt(seed, i);
            (address candidate, uint256 stored) = _drawExcluding(tree, drawn, random);
            Candidate memory c = _eligible(candidate, req, verifier);
            if (c.stale) {
                if (staleCount == 0) stale = new address[](MAX_DRAW_ATTEMPTS);
                stale[staleCount++] = candidate;
            }
            if (!c.ok) continue;
            // INVARIANT: worker draws follow the weight now, never a stale (higher) tree weight.
            if (!verifier && c.weight < stored && uint256(keccak256(abi.encode(random))) % stored >= c.weight) {
                if (drawn.rejected == address(0)) (drawn.rejected, drawn.rejectedLimit) = (candidate, c.limit);
                continue;
            }
            // Outside the preferred region: take it now only with probability 1 / regionBoost.
            if (req.preferredRegion == 0 || c.region == req.preferredRegion || (random >> 128) % regionBoost == 0) {
                (member, limit) = (candidate, c.limit);
                break;
            }
            if (member == address(0)) (member, limit) = (candidate, c.limit);
        }
        if (member == address(0)) (member, limit) = (drawn.rejected, drawn.rejectedLimit);
        if (staleCount != 0) {
            assembly ("memory-safe") {
                mstore(stale, staleCount)
            }
        }
    }

    /// @dev The random of a draw's attempt `i`: keccak256(abi.encode(seed, i)), hashed in the
    /// scratch space (no memory allocated per attempt).
    function _attempt(bytes32 seed, uint256 i) private pure returns (uint256 random) {
        assembly ("memory-safe") {
            mstore(0x00, seed)
            mstore(0x20, i)
            random := keccak256(0x00, 0x40)
        }
    }

    /// @dev The tree intervals a draw has taken so far: those of the candidates before the
    /// last, sorted by start, and the last one's (kept aside until another candidate is drawn,
    /// so that a draw whose first candidate is taken allocates no arrays).
    struct Drawn {
        uint256 total;
        uint256 removed; // the width of every interval taken, the last one's included
        uint256[] starts; // allocated (`capacity` long) when a second candidate is drawn
        uint256[] widths;
        uint256 count; // intervals in `starts` and `widths`
        uint256 capacity; // the most candidates the draw takes
        uint256 lastStart; // the last candidate's interval (lastWidth 0: none yet)
        uint256 lastWidth;
        address rejected; // the first worker candidate the rejection step passed over
        uint256 rejectedLimit; // its concurrency limit
    }

    /// @dev Draw from `tree` with the intervals in `d` left out (so no member is drawn twice),
    /// and leave the drawn member's interval out from now on.
    function _drawExcluding(SortitionSumTree.Tree storage tree, Drawn memory d, uint256 random)
        private
        view
        returns (address candidate, uint256 stored)
    {
        if (d.lastWidth != 0) _takeOut(d, d.lastStart, d.lastWidth);
        uint256 target = random % (d.total - d.removed);
        for (uint256 at = 0; at < d.count && target >= d.starts[at]; ++at) {
            target += d.widths[at];
        }
        uint256 start;
        (candidate, stored, start) = tree.drawAt(target);
        (d.lastStart, d.lastWidth) = (start, stored);
        d.removed += stored;
    }

    /// @dev Insert interval [start, start + width) into `d`'s sorted intervals (it overlaps none).
    function _takeOut(Drawn memory d, uint256 start, uint256 width) private pure {
        if (d.count == 0) (d.starts, d.widths) = (new uint256[](d.capacity), new uint256[](d.capacity));
        uint256 at = d.count;
        for (; at > 0 && d.starts[at - 1] > start; --at) {
            (d.starts[at], d.widths[at]) = (d.starts[at - 1], d.widths[at - 1]);
        }
        (d.starts[at], d.widths[at]) = (start, width);
        d.count += 1;
    }

    /// @dev What a draw learns of a candidate: whether it may be drawn now, whether it is in
    /// the pool but stale (no heartbeat within the liveness window), its region, concurrency
    /// limit and weight now.
    struct Candidate {
        bool ok;
        bool stale;
        uint16 region;
        uint256 limit;
        uint256 weight;
    }

    /// @dev `account` as a candidate for `req` now.
    function _eligible(address account, Requirements calldata req, bool verifier)
        private
        view
        returns (Candidate memory c)
    {
        Member memory m = _members[account];
        if (!m.joined || account == req.exclude) return c;
        (uint8 roles, uint64 lastSeen, uint32 reputation, IIdentityRegistry.Capability memory cap) =
            registry.poolViewOf(account);
        if (roles & (verifier ? ROLE_VERIFIER : ROLE_WORKER) == 0) return c;
        if (lastSeen + livenessWindow < block.number) {
            c.stale = true;
            return c;
        }
        if (cap.deviceClass < req.deviceClass || cap.memoryMiB < req.memoryMiB) return c;
        if ((req.minFetchKiBps | req.maxRpcRttMs) != 0 && !_meetsNetwork(account, req)) return c;
        c.limit = _limit(cap.maxConcurrent);
        if (m.active >= c.limit) return c;
        uint256 free = stakeManager.freeStake(account);
        if (free < req.collateral) return c;
        (c.ok, c.region, c.weight) = (true, cap.region, _weight(free, reputation));
    }

    /// @dev Whether `account`'s declared network figures meet the job's network terms: measured
    /// within the liveness window, and at least a liveness window after its last timeout (a
    /// late member's figures stop counting until it re-measures after that cool-down).
    function _meetsNetwork(address account, Requirements calldata req) private view returns (bool) {
        (IIdentityRegistry.NetworkFigures memory f, uint64 lastTimeout) = registry.networkOf(account);
        if (f.measuredAt == 0 || f.measuredAt + livenessWindow < block.number) return false;
        if (lastTimeout != 0 && f.measuredAt < lastTimeout + livenessWindow) return false;
        return f.fetchKiBps >= req.minFetchKiBps && (req.maxRpcRttMs == 0 || f.rpcRttMs <= req.maxRpcRttMs);
    }

    /// @dev A member's draw weight: free stake × reputation, clamped so that 2^28 members at
    /// the cap still fit the tree's uint128 total.
    function _weight(uint256 free, uint32 reputation) private pure returns (uint256 w) {
        w = free * reputation;
        if (w > MAX_MEMBER_WEIGHT) w = MAX_MEMBER_WEIGHT;
    }

    /// @dev A verifier-only identity may declare maxConcurrent 0: it still audits one at a time.
    function _limit(uint8 maxConcurrent) private pure returns (uint256) {
        return maxConcurrent == 0 ? 1 : maxConcurrent;
    }
}
