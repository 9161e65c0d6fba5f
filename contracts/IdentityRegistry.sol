// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {
    IIdentityRegistry, ROLE_WORKER, ROLE_ALL, MAX_FETCH_KIBPS, MAX_RPC_RTT_MS
} from "./interfaces/IIdentityRegistry.sol";

/// @title IdentityRegistry ("CHAIN")
/// @notice One non-transferable identity per address; history and reputation are written
/// only by RECORDER_ROLE holders (the market contracts). The deployer is DEFAULT_ADMIN and
/// grants RECORDER_ROLE.
contract IdentityRegistry is AccessControl, IIdentityRegistry {
    /// @inheritdoc IIdentityRegistry
    bytes32 public constant RECORDER_ROLE = keccak256("RECORDER_ROLE");
    /// @inheritdoc IIdentityRegistry
    uint32 public constant INITIAL_REPUTATION = 5_000;
    /// @inheritdoc IIdentityRegistry
    uint32 public constant MAX_REPUTATION = 10_000;
    /// @inheritdoc IIdentityRegistry
    uint256 public constant MAX_PROFILE_CID_BYTES = 128;
    /// @inheritdoc IIdentityRegistry
    uint64 public constant MAX_NETWORK_DECLARE_DELAY = 256;

    /// @dev Storage layout of an Identity, packed so that one completed task (tasksDone,
    /// computeContributed, reputation) reads and writes ONE slot that is already non-zero
    /// (`registered`). identityOf rebuilds the interface's Identity from it.
    struct Record {
        // slot 0: what recordTaskCompleted and hasParticipantRole touch
        bool registered;
        uint8 roles;
        uint32 reputation;
        uint64 tasksDone;
        uint128 computeContributed;
        // slot 1: what a pool draw or refresh reads (liveness and the flattened Capability)
        uint64 registeredAtBlock;
        uint64 lastSeenBlock;
        uint8 deviceClass;
        uint32 memoryMiB;
        uint64 throughput;
        uint16 region;
        uint8 maxConcurrent;
        // slot 2
        uint64 tasksFailed;
        uint64 tasksTimedOut;
        uint64 disputesWon;
        uint64 disputesLost;
        // slot 3
        uint128 amountSlashed;
        bytes32 profileHash;
        string profileCid;
        // last slot: what a draw for a job with network terms reads besides slot 1 (a job
        // without them never reads it), and what declareNetwork and recordTimeout write
        uint32 fetchKiBps;
        uint32 rpcRttMs;
        uint64 networkMeasuredAt;
        uint64 lastTimeoutBlock;
    }

    mapping(address account => Record) private _identities;

    constructor() {
        _grantRole(DEFAULT_ADMIN_ROLE, msg.sender);
    }

    // ---------------------------------------------------------------- participant calls

    /// @inheritdoc IIdentityRegistry
    function register(uint8 roles, string calldata profileCid, bytes32 profileHash, Capability calldata capability)
        external
    {
        Record storage id = _identities[msg.sender];
        // INVARIANT: one identity per address, never re-created (history cannot be reset).
        if (id.registered) revert IdentityAlreadyRegistered(msg.sender);
        _validateRoles(roles);
        _validateProfile(profileCid, profileHash);
        if (roles & ROLE_WORKER != 0) _validateWorkerCapability(capability);

        uint64 nowBlock = uint64(block.number);
        id.registered = true;
        id.roles = roles;
        id.reputation = INITIAL_REPUTATION;
        id.registeredAtBlock = nowBlock;
        id.lastSeenBlock = nowBlock;
        id.profileHash = profileHash;
        id.profileCid = profileCid;
        _setCapability(id, capability);
        emit IdentityRegistered(msg.sender, roles, profileCid, profileHash, capability);
    }

    /// @inheritdoc IIdentityRegistry
    function updateProfile(string calldata profileCid, bytes32 profileHash, Capability calldata capability) external {
        Record storage id = _registered(msg.sender);
        _validateProfile(profileCid, profileHash);
        // INVARIANT: a worker's stored capability is always valid.
        if (id.roles & ROLE_WORKER != 0) _validateWorkerCapability(capability);

        id.profileHash = profileHash;
        id.profileCid = profileCid;
        _setCapability(id, capability);
        id.lastSeenBlock = uint64(block.number);
        emit ProfileUpdated(msg.sender, profileCid, profileHash, capability);
    }

    /// @inheritdoc IIdentityRegistry
    function setRoles(uint8 roles) external {
        Record storage id = _registered(msg.sender);
        _validateRoles(roles);
        // INVARIANT: a worker's stored capability is always valid.
        if (roles & ROLE_WORKER != 0) _validateWorkerCapability(_capability(id));

        uint8 oldRoles = id.roles;
        id.roles = roles;
        id.lastSeenBlock = uint64(block.number);
        emit RolesChanged(msg.sender, oldRoles, roles);
    }

    /// @inheritdoc IIdentityRegistry
    function heartbeat() external {
        Record storage id = _registered(msg.sender);
        uint64 nowBlock = uint64(block.number);
        id.lastSeenBlock = nowBlock;
        emit HeartbeatRecorded(msg.sender, nowBlock);
    }

    /// @inheritdoc IIdentityRegistry
    function declareNetwork(NetworkFigures calldata figures) external {
        Record storage id = _registered(msg.sender);
        if (figures.fetchKiBps > MAX_FETCH_KIBPS || figures.rpcRttMs > MAX_RPC_RTT_MS) {
            revert IdentityNetworkOutOfRange(figures.fetchKiBps, figures.rpcRttMs);
        }
        uint64 nowBlock = uint64(block.number);
        uint64 measuredAt = figures.measuredAt;
        // INVARIANT: stored figures name a past block, at most MAX_NETWORK_DECLARE_DELAY before their declaration.
        if (measuredAt == 0 || measuredAt > nowBlock || measuredAt + MAX_NETWORK_DECLARE_DELAY < nowBlock) {
            revert IdentityNetworkMeasuredAtInvalid(measuredAt, nowBlock);
        }
        id.fetchKiBps = figures.fetchKiBps;
        id.rpcRttMs = figures.rpcRttMs;
        id.networkMeasuredAt = measuredAt;
        id.lastSeenBlock = nowBlock;
        emit NetworkDeclared(msg.sender, figures.fetchKiBps, figures.rpcRttMs, measuredAt);
    }

    // ---------------------------------------------------------------- market calls

    /// @inheritdoc IIdentityRegistry
    function recordTaskCompleted(address account, uint128 compute) external onlyRole(RECORDER_ROLE) {
        _recordCompleted(account, 1, compute);
    }

    /// @inheritdoc IIdentityRegistry
    function recordTasksCompleted(address account, uint32 count, uint128 compute) external onlyRole(RECORDER_ROLE) {
        _recordCompleted(account, count, compute);
    }

    /// @inheritdoc IIdentityRegistry
    function recordTaskFailed(address account) external onlyRole(RECORDER_ROLE) {
        Record storage id = _registered(account);
        uint64 tasksFailed = id.tasksFailed + 1;
        id.tasksFailed = tasksFailed;
        emit TaskFailureRecorded(account, tasksFailed);
        _setReputation(account, id, _lower(id.reputation, 4));
    }

    /// @inheritdoc IIdentityRegistry
    function recordTimeout(address account) external onlyRole(RECORDER_ROLE) {
        Record storage id = _registered(account);
        uint64 tasksTimedOut = id.tasksTimedOut + 1;
        id.tasksTimedOut = tasksTimedOut;
        id.lastTimeoutBlock = uint64(block.number);
        emit TimeoutRecorded(account, tasksTimedOut);
        _setReputation(account, id, _lower(id.reputation, 10));
    }

    /// @inheritdoc IIdentityRegistry
    function recordDispute(address account, bool won, uint128 amountSlashed) external onlyRole(RECORDER_ROLE) {
        Record storage id = _registered(account);
        if (won) id.disputesWon += 1;
        else id.disputesLost += 1;
        id.amountSlashed += amountSlashed;
        emit DisputeRecorded(account, won, amountSlashed);
        _setReputation(account, id, won ? _raise(id.reputation, 10) : _lower(id.reputation, 2));
    }

    // ---------------------------------------------------------------- views

    /// @inheritdoc IIdentityRegistry
    function identityOf(address account) external view returns (Identity memory) {
        Record storage r = _identities[account];
        return Identity({
            registered: r.registered,
            roles: r.roles,
            reputation: r.reputation,
            registeredAtBlock: r.registeredAtBlock,
            lastSeenBlock: r.lastSeenBlock,
            profileHash: r.profileHash,
            profileCid: r.profileCid,
            capability: _capability(r),
            history: History({
                tasksDone: r.tasksDone,
                tasksFailed: r.tasksFailed,
                tasksTimedOut: r.tasksTimedOut,
                disputesWon: r.disputesWon,
                disputesLost: r.disputesLost,
                amountSlashed: r.amountSlashed,
                computeContributed: r.computeContributed
            })
        });
    }

    /// @inheritdoc IIdentityRegistry
    function isRegistered(address account) external view returns (bool) {
        return _identities[account].registered;
    }

    /// @inheritdoc IIdentityRegistry
    function hasParticipantRole(address account, uint8 role) external view returns (bool) {
        Record storage id = _identities[account];
        return id.registered && role != 0 && (id.roles & role) == role;
    }

    /// @inheritdoc IIdentityRegistry
    function reputationOf(address account) external view returns (uint32) {
        return _identities[account].reputation;
    }

    /// @inheritdoc IIdentityRegistry
    function lastSeenBlock(address account) external view returns (uint64) {
        return _identities[account].lastSeenBlock;
    }

    /// @inheritdoc IIdentityRegistry
    function capabilityOf(address account) external view returns (Capability memory) {
        return _capability(_identities[account]);
    }

    /// @inheritdoc IIdentityRegistry
    function networkOf(address account) external view returns (NetworkFigures memory figures, uint64 lastTimeoutBlock) {
        Record storage id = _identities[account];
        return (NetworkFigures(id.fetchKiBps, id.rpcRttMs, id.networkMeasuredAt), id.lastTimeoutBlock);
    }

    /// @inheritdoc IIdentityRegistry
    function poolViewOf(address account)
        external
        view
        returns (uint8 roles, uint64 lastSeen, uint32 reputation, Capability memory capability)
    {
        Record storage id = _identities[account];
        return (id.registered ? id.roles : 0, id.lastSeenBlock, id.reputation, _capability(id));
    }

    // ---------------------------------------------------------------- internals

    /// @dev `count` completions in one store: the slot holds tasksDone, compute and reputation.
    function _recordCompleted(address account, uint32 count, uint128 compute) private {
        Record storage id = _registered(account);
        uint64 tasksDone = id.tasksDone + count;
        id.tasksDone = tasksDone;
        id.computeContributed += compute;
        emit TaskCompletionRecorded(account, compute, tasksDone);
        uint32 reputation = id.reputation;
        for (uint256 i = 0; i < count; ++i) {
            uint32 raised = _raise(reputation, 20);
            if (raised == reputation) break; // the rule has reached its fixed point
            reputation = raised;
        }
        _setReputation(account, id, reputation);
    }

    function _registered(address account) private view returns (Record storage id) {
        id = _identities[account];
        if (!id.registered) revert IdentityNotRegistered(account);
    }

    function _setCapability(Record storage id, Capability calldata c) private {
        id.deviceClass = c.deviceClass;
        id.memoryMiB = c.memoryMiB;
        id.throughput = c.throughput;
        id.region = c.region;
        id.maxConcurrent = c.maxConcurrent;
    }

    function _capability(Record storage id) private view returns (Capability memory) {
        return Capability(id.deviceClass, id.memoryMiB, id.throughput, id.region, id.maxConcurrent);
    }

    function _setReputation(address account, Record storage id, uint32 newReputation) private {
        uint32 oldReputation = id.reputation;
        id.reputation = newReputation;
        emit ReputationChanged(account, oldReputation, newReputation);
    }

    /// @dev Close 1/divisor of the gap to MAX_REPUTATION: never exceeds the bound.
    function _raise(uint32 reputation, uint32 divisor) private pure returns (uint32) {
        return reputation + (MAX_REPUTATION - reputation) / divisor;
    }

    /// @dev Remove 1/divisor of the current score: never goes below zero.
    function _lower(uint32 reputation, uint32 divisor) private pure returns (uint32) {
        return reputation - reputation / divisor;
    }

    function _validateRoles(uint8 roles) private pure {
        if (roles == 0 || roles & ~ROLE_ALL != 0) revert IdentityInvalidRoles(roles);
    }

    function _validateProfile(string calldata profileCid, bytes32 profileHash) private pure {
        uint256 length = bytes(profileCid).length;
        if (length == 0 || length > MAX_PROFILE_CID_BYTES) revert IdentityInvalidProfileCid(length);
        if (profileHash == bytes32(0)) revert IdentityZeroProfileHash();
    }

    function _validateWorkerCapability(Capability memory capability) private pure {
        if (capability.memoryMiB == 0 || capability.maxConcurrent == 0) {
            revert IdentityInvalidCapability(capability.memoryMiB, capability.maxConcurrent);
        }
    }
}
