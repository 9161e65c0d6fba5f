// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @dev Role bits of an identity (a bitmask: an account may hold several).
uint8 constant ROLE_WORKER = 1;
uint8 constant ROLE_VERIFIER = 2;
uint8 constant ROLE_SUBMITTER = 4;
/// @dev All role bits together; any bit above these is invalid.
uint8 constant ROLE_ALL = 7;
/// @dev Bounds of declared network figures (file-level: JobMarket checks a job's network
/// terms against the same numbers). 2^24 KiB/s is 16 GiB/s (128 Gbit/s); 60 s of RPC
/// round-trip is far past any deadline a job can set in blocks.
uint32 constant MAX_FETCH_KIBPS = 16_777_216;
uint32 constant MAX_RPC_RTT_MS = 60_000;

/// @title IIdentityRegistry: the market's "CHAIN" of participant identities
/// @notice Every participant (worker, verifier, submitter) holds at most one identity per
/// address. An identity is non-transferable: there is no function that moves it. It carries
/// the participant's roles, a profile (a CID of the hardware profile JSON on IPFS plus the
/// keccak256 hash of that JSON, so a reader can check what it fetched), a declared
/// capability, liveness (the last block the account itself sent a transaction here),
/// history counters and a reputation score.
///
/// Only accounts holding `RECORDER_ROLE` (the market contracts) may write history and
/// reputation. Every `record*` function reverts with `IdentityNotRegistered` for an
/// account without an identity, so a caller that records an optional party (for example an
/// unregistered challenger) must check `isRegistered` first.
///
/// Reputation is an integer in [0, 10_000]; a new identity starts at 5_000. It rises with
/// verified work and falls faster with faults (integer division, rounding toward zero):
///   task completed:  rep += (10_000 - rep) / 20
///   dispute won:     rep += (10_000 - rep) / 10
///   timeout:         rep -= rep / 10
///   task failed:     rep -= rep / 4
///   dispute lost:    rep -= rep / 2
/// Rises close a fraction of the gap to 10_000 and falls remove a fraction of the current
/// score, so the score can never leave [0, 10_000].
///
/// Network figures: an identity declares its measured shard-fetch throughput and RPC
/// round-trip with the block it measured them (`declareNetwork`), within
/// `MAX_NETWORK_DECLARE_DELAY` blocks of that block. The registry also keeps the block of
/// the identity's last recorded timeout; WorkerPool counts figures for a job with network
/// terms only when they were measured within its liveness window and, after a timeout, no
/// earlier than one liveness window after it (see IWorkerPool).
interface IIdentityRegistry {
    /// @notice What a worker declares it can do. `deviceClass` is the market's device code
    /// (compared numerically against a job's requirement), `memoryMiB` the device memory,
    /// `throughput` a measured benchmark figure, `region` a region code and `maxConcurrent`
    /// how many tasks the worker runs at once.
    struct Capability {
        uint8 deviceClass;
        uint32 memoryMiB;
        uint64 throughput;
        uint16 region;
        uint8 maxConcurrent;
    }

    /// @notice Network figures an identity measured and declared: `fetchKiBps` its shard-fetch
    /// throughput from IPFS in KiB/s (≤ MAX_FETCH_KIBPS), `rpcRttMs` its JSON-RPC round-trip
    /// in ms (≤ MAX_RPC_RTT_MS), `measuredAt` the block they were measured (0: never declared).
    struct NetworkFigures {
        uint32 fetchKiBps;
        uint32 rpcRttMs;
        uint64 measuredAt;
    }

    /// @notice Counters written by the market. `amountSlashed` is in token units,
    /// `computeContributed` in the market's compute units (as reported on completion).
    struct History {
        uint64 tasksDone;
        uint64 tasksFailed;
        uint64 tasksTimedOut;
        uint64 disputesWon;
        uint64 disputesLost;
        uint128 amountSlashed;
        uint128 computeContributed;
    }

    /// @notice One account's identity. `registered` is false for an account that never
    /// registered (every other field is then zero).
    struct Identity {
        bool registered;
        uint8 roles;
        uint32 reputation;
        uint64 registeredAtBlock;
        uint64 lastSeenBlock;
        bytes32 profileHash;
        string profileCid;
        Capability capability;
        History history;
    }

    /// @notice The account has no identity.
    error IdentityNotRegistered(address account);
    /// @notice The account already has an identity (one per address).
    error IdentityAlreadyRegistered(address account);
    /// @notice `roles` is zero or has a bit outside `ROLE_ALL`.
    error IdentityInvalidRoles(uint8 roles);
    /// @notice A worker's capability must declare memory (`memoryMiB > 0`) and run at
    /// least one task at a time (`maxConcurrent >= 1`).
    error IdentityInvalidCapability(uint32 memoryMiB, uint8 maxConcurrent);
    /// @notice The profile CID is empty or longer than `MAX_PROFILE_CID_BYTES`.
    error IdentityInvalidProfileCid(uint256 length);
    /// @notice The profile hash is zero (a reader could not check the profile it fetched).
    error IdentityZeroProfileHash();
    /// @notice A declared network figure is above its bound (`fetchKiBps > MAX_FETCH_KIBPS`
    /// or `rpcRttMs > MAX_RPC_RTT_MS`).
    error IdentityNetworkOutOfRange(uint32 fetchKiBps, uint32 rpcRttMs);
    /// @notice The declared measurement block is 0, in the future, or more than
    /// `MAX_NETWORK_DECLARE_DELAY` blocks before `currentBlock`.
    error IdentityNetworkMeasuredAtInvalid(uint64 measuredAt, uint64 currentBlock);

    /// @notice `account` registered an identity; its reputation starts at 5_000 and its
    /// registration and last-seen block are this block.
    event IdentityRegistered(
        address indexed account, uint8 roles, string profileCid, bytes32 profileHash, Capability capability
    );
    /// @notice `account` replaced its profile and capability.
    event ProfileUpdated(address indexed account, string profileCid, bytes32 profileHash, Capability capability);
    /// @notice `account` changed its roles from `oldRoles` to `newRoles`.
    event RolesChanged(address indexed account, uint8 oldRoles, uint8 newRoles);
    /// @notice `account` proved liveness; `lastSeenBlock` is now `atBlock`.
    event HeartbeatRecorded(address indexed account, uint64 atBlock);
    /// @notice `account` declared network figures measured at block `measuredAt`; its
    /// `lastSeenBlock` is now this block.
    event NetworkDeclared(address indexed account, uint32 fetchKiBps, uint32 rpcRttMs, uint64 measuredAt);
    /// @notice `account`'s reputation moved from `oldReputation` to `newReputation`
    /// (emitted on every record, also when the value did not change, e.g. at a bound).
    event ReputationChanged(address indexed account, uint32 oldReputation, uint32 newReputation);
    /// @notice The market recorded a completed task; `tasksDone` is the new total.
    event TaskCompletionRecorded(address indexed account, uint128 compute, uint64 tasksDone);
    /// @notice The market recorded a failed task; `tasksFailed` is the new total.
    event TaskFailureRecorded(address indexed account, uint64 tasksFailed);
    /// @notice The market recorded a timeout; `tasksTimedOut` is the new total (and this
    /// block is the account's `lastTimeoutBlock`).
    event TimeoutRecorded(address indexed account, uint64 tasksTimedOut);
    /// @notice The market recorded a dispute outcome for `account`.
    event DisputeRecorded(address indexed account, bool won, uint128 amountSlashed);

    /// @notice Register the caller's identity with `roles` (bitmask of ROLE_*), its profile
    /// and capability. Reverts `IdentityAlreadyRegistered` if the caller has one,
    /// `IdentityInvalidRoles`, `IdentityInvalidProfileCid`, `IdentityZeroProfileHash`, and,
    /// when `roles` includes ROLE_WORKER, `IdentityInvalidCapability`.
    function register(uint8 roles, string calldata profileCid, bytes32 profileHash, Capability calldata capability)
        external;

    /// @notice Replace the caller's profile and capability (validated as in `register`
    /// against the caller's current roles). Also counts as a heartbeat.
    function updateProfile(string calldata profileCid, bytes32 profileHash, Capability calldata capability) external;

    /// @notice Replace the caller's roles. Adding ROLE_WORKER requires the stored
    /// capability to be valid for a worker. Also counts as a heartbeat.
    function setRoles(uint8 roles) external;

    /// @notice Record that the caller is alive: `lastSeenBlock` becomes this block.
    function heartbeat() external;

    /// @notice Replace the caller's network figures with `figures`, measured at block
    /// `figures.measuredAt`. Also counts as a heartbeat. Reverts `IdentityNotRegistered`,
    /// `IdentityNetworkOutOfRange`, and `IdentityNetworkMeasuredAtInvalid` when `measuredAt`
    /// is 0, after this block or more than `MAX_NETWORK_DECLARE_DELAY` blocks before it.
    function declareNetwork(NetworkFigures calldata figures) external;

    /// @notice `account`'s declared network figures (all zero if never declared) and the
    /// block of its last recorded timeout (0: none).
    function networkOf(address account) external view returns (NetworkFigures memory figures, uint64 lastTimeoutBlock);

    /// @notice The full identity of `account` (all zero with `registered == false` if none).
    function identityOf(address account) external view returns (Identity memory);

    /// @notice Whether `account` has an identity.
    function isRegistered(address account) external view returns (bool);

    /// @notice Whether `account` is registered and holds every bit of `role` (false for
    /// `role == 0`).
    function hasParticipantRole(address account, uint8 role) external view returns (bool);

    /// @notice `account`'s reputation in [0, 10_000] (0 if unregistered).
    function reputationOf(address account) external view returns (uint32);

    /// @notice The last block in which `account` itself registered, updated its profile or
    /// roles, or sent a heartbeat (0 if unregistered).
    function lastSeenBlock(address account) external view returns (uint64);

    /// @notice `account`'s declared capability (all zero if unregistered).
    function capabilityOf(address account) external view returns (Capability memory);

    /// @notice What the WorkerPool reads for a draw or a weight refresh, in one call: the
    /// roles (0 if unregistered), lastSeenBlock, reputation and capability.
    function poolViewOf(address account)
        external
        view
        returns (uint8 roles, uint64 lastSeen, uint32 reputation, Capability memory capability);

    /// @notice RECORDER_ROLE only: `account` completed a verified task worth `compute`
    /// units. tasksDone += 1, computeContributed += compute, rep += (10_000 - rep) / 20.
    function recordTaskCompleted(address account, uint128 compute) external;

    /// @notice RECORDER_ROLE only: `count` completed tasks at once, `compute` in all (a market
    /// settling a batch). The same as `count` calls of `recordTaskCompleted` whose computes
    /// add up to `compute`: tasksDone grows by `count` and the reputation rule is applied
    /// `count` times; one `TaskCompletionRecorded` (the batch's compute, the new tasksDone)
    /// and one `ReputationChanged` are emitted.
    function recordTasksCompleted(address account, uint32 count, uint128 compute) external;

    /// @notice RECORDER_ROLE only: `account` failed a task (for example a failed audit).
    /// tasksFailed += 1, rep -= rep / 4.
    function recordTaskFailed(address account) external;

    /// @notice RECORDER_ROLE only: `account` let a deadline pass (offer, run or audit).
    /// tasksTimedOut += 1, rep -= rep / 10, lastTimeoutBlock = this block (its network
    /// figures stop counting for the pool until it declares figures measured a liveness
    /// window later).
    function recordTimeout(address account) external;

    /// @notice RECORDER_ROLE only: `account` won or lost a dispute and lost
    /// `amountSlashed` tokens (0 for a winner). Won: disputesWon += 1,
    /// rep += (10_000 - rep) / 10. Lost: disputesLost += 1, rep -= rep / 2. Either way
    /// amountSlashed is added to the history.
    function recordDispute(address account, bool won, uint128 amountSlashed) external;

    /// @notice The AccessControl role that may call the `record*` functions.
    function RECORDER_ROLE() external view returns (bytes32);

    /// @notice Reputation of a new identity (5_000).
    function INITIAL_REPUTATION() external view returns (uint32);

    /// @notice Upper bound of reputation (10_000).
    function MAX_REPUTATION() external view returns (uint32);

    /// @notice Longest accepted profile CID, in bytes.
    function MAX_PROFILE_CID_BYTES() external view returns (uint256);

    /// @notice Most blocks between a network measurement and its declaration (256).
    function MAX_NETWORK_DECLARE_DELAY() external view returns (uint64);
}
