// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Vm} from "./Vm.sol";

/// @title TestBase: `vm`, assertions and `bound`, for tests and for invariant handlers
/// @notice The project's forge tests do not use forge-std (see Vm.sol). Assertion helpers
/// revert with a clear message; forge reports a reverting test or invariant as failed and
/// prints the message.
abstract contract TestBase {
    /// forge's cheatcode address: address(uint160(uint256(keccak256("hevm cheat code")))).
    Vm internal constant vm = Vm(0x7109709ECfa91a80626fF3989D68f67F5b1DD12D);

    // ================================================================ assertions

    error AssertionFailed(string message);

    function fail(string memory message) internal pure {
        revert AssertionFailed(message);
    }

    function assertTrue(bool condition, string memory message) internal pure {
        if (!condition) fail(message);
    }

    function assertFalse(bool condition, string memory message) internal pure {
        if (condition) fail(message);
    }

    function assertEq(uint256 a, uint256 b, string memory message) internal pure {
        if (a != b) fail(string.concat(message, ": ", vm.toString(a), " != ", vm.toString(b)));
    }

    function assertEq(address a, address b, string memory message) internal pure {
        if (a != b) fail(string.concat(message, ": ", vm.toString(a), " != ", vm.toString(b)));
    }

    function assertEq(bytes32 a, bytes32 b, string memory message) internal pure {
        if (a != b) fail(string.concat(message, ": ", vm.toString(a), " != ", vm.toString(b)));
    }

    function assertEq(bool a, bool b, string memory message) internal pure {
        if (a != b) fail(string.concat(message, ": ", vm.toString(a), " != ", vm.toString(b)));
    }

    function assertLe(uint256 a, uint256 b, string memory message) internal pure {
        if (a > b) fail(string.concat(message, ": ", vm.toString(a), " > ", vm.toString(b)));
    }

    function assertGe(uint256 a, uint256 b, string memory message) internal pure {
        if (a < b) fail(string.concat(message, ": ", vm.toString(a), " < ", vm.toString(b)));
    }

    function assertLt(uint256 a, uint256 b, string memory message) internal pure {
        if (a >= b) fail(string.concat(message, ": ", vm.toString(a), " >= ", vm.toString(b)));
    }

    function assertGt(uint256 a, uint256 b, string memory message) internal pure {
        if (a <= b) fail(string.concat(message, ": ", vm.toString(a), " <= ", vm.toString(b)));
    }

    // ================================================================ fuzz inputs

    /// Map any `x` into [min, max] (inclusive), keeping small values as they are, like
    /// forge-std's `bound`, so that the fuzzer's edge values (0, 1, max) stay edges.
    function bound(uint256 x, uint256 min, uint256 max) internal pure returns (uint256 result) {
        require(min <= max, "bound: max is less than min");
        // In range: unchanged, so that dictionary values are not shifted.
        if (x >= min && x <= max) return x;
        uint256 size = max - min + 1; // no overflow: [0, 2^256-1] returned above
        // 0..3 map to min..min+3 and MAX-3..MAX to max-3..max, so edges stay covered.
        if (x <= 3 && size > x) return min + x;
        if (x >= type(uint256).max - 3 && size > type(uint256).max - x) return max - (type(uint256).max - x);
        if (x > max) {
            uint256 rem = (x - max) % size;
            return rem == 0 ? max : min + rem - 1;
        }
        uint256 remBelow = (min - x) % size;
        return remBelow == 0 ? min : max - remBelow + 1;
    }

}

/// @title Test: the base of a forge test contract (no forge-std)
/// @notice TestBase plus the invariant-target functions forge's invariant runner reads from a
/// test contract, with forge-std's StdInvariant ABI (names, struct layouts, return types).
abstract contract Test is TestBase {
    /// Marks the contract as a test for tools that look for it (forge-std's DSTest has it).
    bool public IS_TEST = true;

    // ================================================================ invariant targets
    // forge calls these view functions (when present) on an invariant test contract to learn
    // what to fuzz. Empty arrays mean "forge's default": every contract deployed in setUp()
    // except the test contract itself, every non-view function, random senders.

    /// One target contract and the selectors of it that the fuzzer may call.
    struct FuzzSelector {
        address addr;
        bytes4[] selectors;
    }

    /// One target artifact ("path:Contract") and the selectors of it to call.
    struct FuzzArtifactSelector {
        string artifact;
        bytes4[] selectors;
    }

    /// A target address called through the given artifacts' ABIs.
    struct FuzzInterface {
        address addr;
        string[] artifacts;
    }

    address[] private _targetedContracts;
    address[] private _excludedContracts;
    address[] private _targetedSenders;
    address[] private _excludedSenders;
    FuzzSelector[] private _targetedSelectors;
    FuzzSelector[] private _excludedSelectors;
    string[] private _targetedArtifacts;
    string[] private _excludedArtifacts;
    FuzzArtifactSelector[] private _targetedArtifactSelectors;
    FuzzInterface[] private _targetedInterfaces;

    function targetContract(address target) internal {
        _targetedContracts.push(target);
    }

    function excludeContract(address target) internal {
        _excludedContracts.push(target);
    }

    function targetSender(address sender) internal {
        _targetedSenders.push(sender);
    }

    function excludeSender(address sender) internal {
        _excludedSenders.push(sender);
    }

    function targetSelector(FuzzSelector memory selector) internal {
        _targetedSelectors.push(selector);
    }

    function excludeSelector(FuzzSelector memory selector) internal {
        _excludedSelectors.push(selector);
    }

    function targetArtifact(string memory artifact) internal {
        _targetedArtifacts.push(artifact);
    }

    function excludeArtifact(string memory artifact) internal {
        _excludedArtifacts.push(artifact);
    }

    function targetArtifactSelector(FuzzArtifactSelector memory selector) internal {
        _targetedArtifactSelectors.push(selector);
    }

    function targetInterface(FuzzInterface memory target) internal {
        _targetedInterfaces.push(target);
    }

    function targetContracts() public view returns (address[] memory) {
        return _targetedContracts;
    }

    function excludeContracts() public view returns (address[] memory) {
        return _excludedContracts;
    }

    function targetSenders() public view returns (address[] memory) {
        return _targetedSenders;
    }

    function excludeSenders() public view returns (address[] memory) {
        return _excludedSenders;
    }

    function targetSelectors() public view returns (FuzzSelector[] memory) {
        return _targetedSelectors;
    }

    function excludeSelectors() public view returns (FuzzSelector[] memory) {
        return _excludedSelectors;
    }

    function targetArtifacts() public view returns (string[] memory) {
        return _targetedArtifacts;
    }

    function excludeArtifacts() public view returns (string[] memory) {
        return _excludedArtifacts;
    }

    function targetArtifactSelectors() public view returns (FuzzArtifactSelector[] memory) {
        return _targetedArtifactSelectors;
    }

    function targetInterfaces() public view returns (FuzzInterface[] memory) {
        return _targetedInterfaces;
    }
}
