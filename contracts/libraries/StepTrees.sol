// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {MerkleCommitment} from "./MerkleCommitment.sol";

/// @title StepTrees
/// @notice MerkleCommitment's trees as the step game walks them: a whole tree's root from its
/// leaves, the node of an all-padding subtree, and where a node's leaves begin.
library StepTrees {
    /// @notice Most leaves `rootOf` takes (a step's state tensors).
    uint256 internal constant MAX_LEAVES = 4096;

    /// @notice `rootOf` was given `count` leaves: none, or more than MAX_LEAVES.
    error StepTreeSizeInvalid(uint256 count);

    /// @notice MerkleCommitment's root over `leaves` (leaf hashes; padded with zero nodes to
    /// a power of two), as truetrain/training/merkle.py's `merkle_root`.
    function rootOf(bytes32[] memory leaves) internal pure returns (bytes32) {
        uint256 n = leaves.length;
        if (n == 0 || n > MAX_LEAVES) revert StepTreeSizeInvalid(n);
        uint256 width = 1;
        while (width < n) width <<= 1;
        bytes32[] memory level = new bytes32[](width);
        for (uint256 k = 0; k < n; ++k) {
            level[k] = MerkleCommitment.leafNode(leaves[k]);
        }
        for (; width > 1; width >>= 1) {
            for (uint256 k = 0; k < width / 2; ++k) {
                level[k] = MerkleCommitment.parentNode(level[2 * k], level[2 * k + 1]);
            }
        }
        return level[0];
    }

    /// @notice The node of a subtree of `height` levels holding padding only: 0 for a leaf,
    /// then the parent of two such nodes.
    function padding(uint256 height) internal pure returns (bytes32 node) {
        for (uint256 h = 0; h < height; ++h) {
            node = MerkleCommitment.parentNode(node, node);
        }
    }
}
