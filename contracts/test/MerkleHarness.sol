// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {MerkleCommitment} from "../libraries/MerkleCommitment.sol";

/// @title MerkleHarness
/// @notice Test harness: exposes MerkleCommitment's functions so tests can call them on chain.
contract MerkleHarness {
    function leafNode(bytes32 leafHash) external pure returns (bytes32) {
        return MerkleCommitment.leafNode(leafHash);
    }

    function parentNode(bytes32 left, bytes32 right) external pure returns (bytes32) {
        return MerkleCommitment.parentNode(left, right);
    }

    function rootFromProof(uint256 index, bytes32 leafHash, bytes32[] calldata proof) external pure returns (bytes32) {
        return MerkleCommitment.rootFromProof(index, leafHash, proof);
    }

    function verify(bytes32 root, uint256 index, bytes32 leafHash, bytes32[] calldata proof)
        external
        pure
        returns (bool)
    {
        return MerkleCommitment.verify(root, index, leafHash, proof);
    }

    function requireValid(bytes32 root, uint256 index, bytes32 leafHash, bytes32[] calldata proof) external pure {
        MerkleCommitment.requireValid(root, index, leafHash, proof);
    }
}
