// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {SortitionSumTree} from "../libraries/SortitionSumTree.sol";

/// @title SortitionHarness
/// @notice Test harness: one SortitionSumTree exposed for tests and the gas bench.
contract SortitionHarness {
    using SortitionSumTree for SortitionSumTree.Tree;

    SortitionSumTree.Tree private _tree;

    function set(address id, uint256 weight) external {
        _tree.set(id, weight);
    }

    /// @notice Set `count` members with ids `firstId, firstId+1, …` (as addresses) to `weight`
    /// (the bench's way to build large trees in few transactions).
    function setRange(uint160 firstId, uint256 count, uint256 weight) external {
        for (uint256 i = 0; i < count; ++i) {
            _tree.set(address(firstId + uint160(i)), weight);
        }
    }

    function draw(uint256 random) external view returns (address) {
        return _tree.draw(random);
    }

    /// @notice Draw and return the gas the library's draw used (storage cold, as in a fresh call).
    function drawGas(uint256 random) external view returns (address drawn, uint256 gasUsed) {
        uint256 before = gasleft();
        drawn = _tree.draw(random);
        gasUsed = before - gasleft();
    }

    /// @notice Draw once per random in `randoms` (tests sample distributions in one call).
    function drawMany(uint256[] calldata randoms) external view returns (address[] memory drawn) {
        drawn = new address[](randoms.length);
        for (uint256 i = 0; i < randoms.length; ++i) {
            drawn[i] = _tree.draw(randoms[i]);
        }
    }

    function weightOf(address id) external view returns (uint256) {
        return _tree.weightOf(id);
    }

    function total() external view returns (uint256) {
        return _tree.total();
    }

    function size() external view returns (uint256) {
        return _tree.size();
    }

    /// @notice Raw node value and length, for structural checks (every internal node = sum of children).
    function nodeAt(uint256 index) external view returns (uint256) {
        return _tree.nodeValue(index);
    }

    function nodeCount() external view returns (uint256) {
        return _tree.nodeCount();
    }
}
