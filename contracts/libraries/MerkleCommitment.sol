// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @title MerkleCommitment: positional Merkle proofs over checkpoint hashes
/// @notice The scheme (truetrain/training/merkle.py implements the same):
///   leaf node  = keccak256(0x00 ‖ leafHash)
///   inner node = keccak256(0x01 ‖ left ‖ right)
/// Leaves are padded to the next power of two with padding NODES equal to bytes32(0) (not
/// hashed); a single leaf's root is its leaf node. A proof lists the sibling nodes bottom-up,
/// one per level (length = log2 of the padded size); bit i of the index (LSB first) is 1
/// when the current node is the right child at level i. The 0x00/0x01 prefixes keep a leaf
/// from passing as an inner node, and no leaf node can equal the zero padding (that would be
/// a keccak preimage of zero).
library MerkleCommitment {
    /// @notice Deepest accepted proof: 2^32 leaves.
    uint256 internal constant MAX_PROOF_DEPTH = 32;

    /// @notice `leafHash` at `index` does not hash to `root` with the given proof.
    error MerkleProofInvalid(bytes32 root, uint256 index, bytes32 leafHash);
    /// @notice The proof has `depth` levels, more than MAX_PROOF_DEPTH.
    error MerkleProofTooDeep(uint256 depth);
    /// @notice `index` does not fit a tree of `depth` levels (index >= 2^depth).
    error MerkleIndexOutOfRange(uint256 index, uint256 depth);

    /// @notice The node of a leaf: keccak256(0x00 ‖ leafHash).
    function leafNode(bytes32 leafHash) internal pure returns (bytes32 node) {
        assembly ("memory-safe") {
            mstore(0x00, 0)
            mstore(0x01, leafHash)
            node := keccak256(0x00, 0x21)
        }
    }

    /// @notice The parent of two nodes: keccak256(0x01 ‖ left ‖ right).
    function parentNode(bytes32 left, bytes32 right) internal pure returns (bytes32) {
        return keccak256(abi.encodePacked(bytes1(0x01), left, right));
    }

    /// @notice The root that `leafHash` at `index` with sibling `proof` (bottom-up) implies.
    /// Reverts `MerkleProofTooDeep` or `MerkleIndexOutOfRange` for a malformed proof.
    function rootFromProof(uint256 index, bytes32 leafHash, bytes32[] memory proof) internal pure returns (bytes32) {
        uint256 depth = proof.length;
        if (depth > MAX_PROOF_DEPTH) revert MerkleProofTooDeep(depth);
        if (index >> depth != 0) revert MerkleIndexOutOfRange(index, depth);
        return _walk(index, leafHash, proof);
    }

    /// @notice Whether `leafHash` sits at `index` under `root`. Malformed proofs (too deep,
    /// index out of range) return false rather than revert.
    function verify(bytes32 root, uint256 index, bytes32 leafHash, bytes32[] memory proof)
        internal
        pure
        returns (bool)
    {
        uint256 depth = proof.length;
        if (depth > MAX_PROOF_DEPTH || index >> depth != 0) return false;
        return _walk(index, leafHash, proof) == root;
    }

    /// @notice Revert `MerkleProofInvalid` unless `verify` holds.
    function requireValid(bytes32 root, uint256 index, bytes32 leafHash, bytes32[] memory proof) internal pure {
        if (!verify(root, index, leafHash, proof)) revert MerkleProofInvalid(root, index, leafHash);
    }

    function _walk(uint256 index, bytes32 leafHash, bytes32[] memory proof) private pure returns (bytes32 node) {
        node = leafNode(leafHash);
        uint256 depth = proof.length;
        for (uint256 level = 0; level < depth; ++level) {
            node = (index >> level) & 1 == 1 ? parentNode(proof[level], node) : parentNode(node, proof[level]);
        }
    }
}
