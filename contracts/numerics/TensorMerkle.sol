// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {MerkleCommitment} from "../libraries/MerkleCommitment.sol";

/// @title TensorMerkle
/// @notice Opens a contiguous range of a float32 tensor's elements against the tensor's root
/// (truetrain/numerics/tensor_merkle.py builds the same roots and proofs).
///
/// The canonical layout: the tensor flattened row-major, each element its IEEE-754 bit pattern
/// as 4 bytes big-endian (every NaN written as 0x7FC00000), cut into chunks of CHUNK = 64
/// elements (256 bytes; the last chunk zero-padded). Leaf hash = keccak256(chunk bytes); the
/// tree over the leaves is MerkleCommitment's (leaf node H(0x00 ‖ leafHash), inner node
/// H(0x01 ‖ left ‖ right), zero padding nodes up to a power of two). The shape is not in the
/// root: the program (the operator's attributes) fixes it, and with it the tree's depth.
///
/// A range proof for leaves [lo, hi) lists, level by level from the bottom, the left sibling
/// of the range's first node when that node is a right child, then the right sibling of its
/// last node when that is a left child: at most two nodes a level, ⌈log2 leaves⌉ levels.
library TensorMerkle {
    uint256 internal constant CHUNK = 64;
    uint256 internal constant CHUNK_BYTES = 256;

    /// @notice The chunks and siblings given do not hash to `root`.
    error TensorOpeningInvalid(bytes32 root, uint256 firstLeaf, uint256 leafCount);
    /// @notice The opening's sizes do not fit the range: `chunkBytes` of chunks (expected
    /// `expectedBytes`), `siblings` proof nodes (expected `expectedSiblings`).
    error TensorOpeningMalformed(uint256 chunkBytes, uint256 expectedBytes, uint256 siblings, uint256 expectedSiblings);
    /// @notice Elements [start, start + count) are not all inside a tensor of `numel` elements.
    error TensorRangeOutOfBounds(uint256 start, uint256 count, uint256 numel);

    /// @notice Check that `chunks` (the leaves covering elements [start, start + count) of a
    /// tensor of `numel` elements, whole) with `proof` open against `root`; returns the
    /// calldata offset of element `start` (4 bytes big-endian each from there).
    function open(
        bytes32 root,
        uint256 numel,
        uint256 start,
        uint256 count,
        bytes calldata chunks,
        bytes32[] calldata proof
    ) internal pure returns (uint256 ptr) {
        if (count == 0 || start + count > numel) revert TensorRangeOutOfBounds(start, count, numel);
        uint256 lo = start / CHUNK;
        uint256 hi = (start + count + CHUNK - 1) / CHUNK;
        uint256 depth = ceilLog2((numel + CHUNK - 1) / CHUNK);
        uint256 siblings = siblingCount(lo, hi, depth);
        if (chunks.length != (hi - lo) * CHUNK_BYTES || proof.length != siblings) {
            revert TensorOpeningMalformed(chunks.length, (hi - lo) * CHUNK_BYTES, proof.length, siblings);
        }
        if (_root(lo, hi - lo, depth, chunks, proof) != root) revert TensorOpeningInvalid(root, lo, hi - lo);
        assembly ("memory-safe") {
            ptr := chunks.offset
        }
        ptr += (start - lo * CHUNK) * 4;
    }

    /// @notice Smallest `d` with 2**d >= n (0 for n <= 1).
    function ceilLog2(uint256 n) internal pure returns (uint256 d) {
        while ((uint256(1) << d) < n) ++d;
    }

    /// @notice How many proof nodes a range of leaves [lo, hi) needs in a tree of `depth` levels.
    function siblingCount(uint256 lo, uint256 hi, uint256 depth) internal pure returns (uint256 n) {
        uint256 last = hi - 1;
        for (uint256 level = 0; level < depth; ++level) {
            if (lo & 1 == 1) ++n;
            if (last & 1 == 0) ++n;
            lo >>= 1;
            last >>= 1;
        }
    }

    function _root(uint256 lo, uint256 width, uint256 depth, bytes calldata chunks, bytes32[] calldata proof)
        private
        pure
        returns (bytes32)
    {
        // nodes[1 .. width]: the range's nodes at the current level; slots 0 and width + 1
        // take its siblings
        bytes32[] memory nodes = _leaves(chunks, width);
        uint256 used;
        uint256 last = lo + width - 1;
        for (; depth > 0; --depth) {
            bool left = lo & 1 == 1;
            if (left) nodes[0] = proof[used++];
            uint256 end = width + 1; // one past the last node in use
            if (last & 1 == 0) nodes[end++] = proof[used++];
            width = _pair(nodes, left ? 0 : 1, end);
            lo >>= 1;
            last >>= 1;
        }
        return nodes[1];
    }

    /// @dev The leaf nodes of `width` chunks, in slots 1 .. width of a width + 2 array.
    function _leaves(bytes calldata chunks, uint256 width) private pure returns (bytes32[] memory nodes) {
        nodes = new bytes32[](width + 2);
        for (uint256 t = 0; t < width; ++t) {
            bytes32 leaf;
            assembly ("memory-safe") {
                let buf := mload(0x40)
                calldatacopy(buf, add(chunks.offset, mul(t, 256)), 256)
                leaf := keccak256(buf, 256)
            }
            nodes[t + 1] = MerkleCommitment.leafNode(leaf);
        }
    }

    /// @dev Parents of nodes[first .. end) (an even count) into nodes[1 ..]; returns their number.
    function _pair(bytes32[] memory nodes, uint256 first, uint256 end) private pure returns (uint256 count) {
        for (uint256 t = first; t < end; t += 2) {
            nodes[++count] = MerkleCommitment.parentNode(nodes[t], nodes[t + 1]);
        }
    }
}
