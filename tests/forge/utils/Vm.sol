// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @title Vm: the forge cheatcodes the project's forge tests use
/// @notice A minimal, hand-written subset of forge's cheatcode interface (forge-std's `Vm`),
/// because the `forge-std` package on npm is an old unofficial copy and nothing can be
/// fetched from GitHub here. Signatures match forge 1.x exactly (the selector is all that
/// matters); add a cheatcode here when a test needs one.
interface Vm {
    /// One log recorded by `recordLogs` (forge-std's `Vm.Log`).
    struct Log {
        bytes32[] topics;
        bytes data;
        address emitter;
    }

    // ------------------------------------------------------------ callers
    /// Next call (only) is made with msg.sender = `sender`.
    function prank(address sender) external;
    /// Every following call is made with msg.sender = `sender`, until stopPrank.
    function startPrank(address sender) external;
    function stopPrank() external;

    // ------------------------------------------------------------ block environment
    function roll(uint256 newHeight) external;
    function warp(uint256 newTimestamp) external;
    /// Sets block.prevrandao (post-merge blocks; evm_version cancun).
    function prevrandao(bytes32 newPrevrandao) external;

    /// Sets the hash `blockhash(blockNumber)` returns (one of the last 256 blocks).
    function setBlockhash(uint256 blockNumber, bytes32 blockHash) external;
    function getBlockNumber() external view returns (uint256 height);
    function getBlockTimestamp() external view returns (uint256 timestamp);

    // ------------------------------------------------------------ state
    /// Set the ETH balance of `account`.
    function deal(address account, uint256 newBalance) external;
    function load(address target, bytes32 slot) external view returns (bytes32 data);
    function store(address target, bytes32 slot, bytes32 value) external;
    function snapshotState() external returns (uint256 snapshotId);
    function revertToState(uint256 snapshotId) external returns (bool success);
    /// Revert to the snapshot and free it (a snapshot copies the state: free the ones done with).
    function revertToStateAndDelete(uint256 snapshotId) external returns (bool success);

    // ------------------------------------------------------------ environment
    function setEnv(string calldata name, string calldata value) external;
    function envOr(string calldata name, uint256 defaultValue) external view returns (uint256 value);

    // ------------------------------------------------------------ logs
    /// Record every log emitted from now on (clears what was recorded before).
    function recordLogs() external;
    /// The logs recorded since `recordLogs`, consumed (a second call returns only newer ones).
    function getRecordedLogs() external returns (Log[] memory logs);

    // ------------------------------------------------------------ expectations
    /// The next call must revert (with any data).
    function expectRevert() external;
    /// The next call must revert with exactly this 4-byte error selector (no arguments).
    function expectRevert(bytes4 revertData) external;
    /// The next call must revert with exactly these bytes (e.g. abi.encodeWithSelector(...)).
    function expectRevert(bytes calldata revertData) external;
    /// Fuzzing: discard this input if `condition` is false.
    function assume(bool condition) external pure;

    // ------------------------------------------------------------ helpers
    function addr(uint256 privateKey) external pure returns (address keyAddr);
    function label(address account, string calldata newLabel) external;
    function toString(uint256 value) external pure returns (string memory stringifiedValue);
    function toString(int256 value) external pure returns (string memory stringifiedValue);
    function toString(address value) external pure returns (string memory stringifiedValue);
    function toString(bytes32 value) external pure returns (string memory stringifiedValue);
    function toString(bool value) external pure returns (string memory stringifiedValue);
    function toString(bytes calldata value) external pure returns (string memory stringifiedValue);
}
