// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @title SortitionSumTree: weighted random draws over addresses in O(log n)
/// @notice A K-ary sum tree (Kleros' SortitionSumTreeFactory is the reference design; this
/// is an independent, address-keyed implementation with a packed layout). Node 0 is the
/// root; the children of node i are K*i+1 .. K*i+K; every internal node holds the sum of its
/// children; members sit in leaves. Setting a weight walks one leaf-to-root path
/// (O(log_K n) writes); a draw walks one root-to-leaf path (O(log_K n) reads).
///
/// Layout, chosen for cheap draws (a cold storage read costs 2,100 gas, far more than the
/// arithmetic): weights are uint128 and the non-root nodes are packed two to a slot, so the
/// K = 4 children of a node fill exactly two slots, and a draw reads one or two slots per
/// level. The root (the total), the node count and the owner's `tag` share the header slot.
///
/// Removing a member zeroes its leaf and remembers the slot in `vacant`; the next insert
/// reuses it, so the tree never grows beyond the largest number of members it ever held.
/// When an insert must append a node that is the first child of an existing leaf, that
/// leaf's member moves down into the new node and the old leaf becomes its parent (the sum
/// is unchanged), so members always stay in leaves.
///
/// K = 4 was chosen by measurement against K = 2, 8 and 16 (tests/contracts/
/// test_sortition_tree.py::test_drawGas_table prints the table; numbers in
/// contracts/PROPERTIES.md): a draw transaction at 1,000 members costs 1.43x one at 10.
library SortitionSumTree {
    /// @notice Children per internal node (the packing assumes an even K).
    uint256 internal constant K = 4;
    /// @notice Largest total weight the tree holds (weights and sums are uint128).
    uint256 internal constant MAX_TOTAL_WEIGHT = type(uint128).max;

    uint256 private constant LOW_MASK = type(uint128).max;

    /// @notice The zero address cannot be a member (it marks "no member").
    error SortitionZeroId();
    /// @notice A draw was asked of a tree whose total weight is zero.
    error SortitionEmpty();
    /// @notice Setting `id` to `weight` would take the total above MAX_TOTAL_WEIGHT.
    error SortitionWeightOverflow(address id, uint256 weight);

    struct Tree {
        /// @dev The root's value: the sum of all weights.
        uint128 totalWeight;
        /// @dev Number of nodes including the root (0 before the first insert). 48 bits: an
        /// insert appends at most two nodes and writes fresh storage (> 40,000 gas), so 2^48
        /// nodes would take > 5 × 10^18 gas of inserts.
        uint48 nodesUsed;
        /// @dev The tree owner's own bits, in the header slot that every weight change and
        /// every draw reads anyway (WorkerPool keeps its draw holds here, so that checking
        /// them costs no extra cold read). The library never reads or writes them.
        uint80 tag;
        /// @dev Number of members with a nonzero weight.
        uint256 memberCount;
        /// @dev Non-root node j (j >= 1) lives in pairs[(j - 1) / 2]: low 128 bits when j is
        /// odd, high 128 bits when j is even.
        mapping(uint256 pairIndex => uint256 packed) pairs;
        /// @dev Leaf indices freed by removals, reused by later inserts.
        uint256[] vacant;
        /// @dev Leaf index of each member; 0 means "not a member" (0 is the root, never a leaf).
        mapping(address id => uint256 nodeIndex) indexOf;
        mapping(uint256 nodeIndex => address id) idAt;
    }

    /// @notice Set `id`'s weight: insert it (weight > 0, not a member), update it, or remove
    /// it (weight == 0). Setting a non-member to 0 does nothing.
    function set(Tree storage tree, address id, uint256 weight) internal {
        if (id == address(0)) revert SortitionZeroId();
        uint256 index = tree.indexOf[id];
        uint256 old = index == 0 ? 0 : _node(tree, index);
        if (weight == old) return;
        // INVARIANT: every node (a sum of weights) fits in 128 bits because the root does.
        if (weight > old && weight - old > MAX_TOTAL_WEIGHT - tree.totalWeight) {
            revert SortitionWeightOverflow(id, weight);
        }
        if (index == 0) {
            index = _insertLeaf(tree, id);
            tree.memberCount += 1;
        } else if (weight == 0) {
            delete tree.indexOf[id];
            delete tree.idAt[index];
            tree.vacant.push(index);
            tree.memberCount -= 1;
        }
        _setNode(tree, index, weight);
        if (weight > old) _addToAncestors(tree, index, weight - old);
        else _subFromAncestors(tree, index, old - weight);
    }

    /// @notice Draw a member with probability weight / total, from `random` (any 256-bit
    /// value; reduced modulo the total, whose bias is negligible for random 256-bit inputs).
    function draw(Tree storage tree, uint256 random) internal view returns (address id) {
        (id,) = drawWithWeight(tree, random);
    }

    /// @notice `draw`, also returning the drawn member's weight (read on the way down, so
    /// it costs no extra storage read).
    function drawWithWeight(Tree storage tree, uint256 random) internal view returns (address id, uint256 weight) {
        uint256 totalWeight = tree.totalWeight;
        if (totalWeight == 0) revert SortitionEmpty();
        (id, weight,) = drawAt(tree, random % totalWeight);
    }

    /// @notice The member whose interval holds `target` (< total): members own consecutive
    /// intervals [start, start + weight) in leaf order. Returns it, its weight and `start`,
    /// so a caller can draw without replacement by skipping the intervals already drawn.
    function drawAt(Tree storage tree, uint256 target) internal view returns (address, uint256 weight, uint256 start) {
        uint256 count = tree.nodesUsed;
        uint256 index = 0;
        uint256 offset = target;
        weight = tree.totalWeight;
        // Each pass descends one level into the child whose subtree holds `target`
        // (target < the current node's sum holds throughout), so the loop runs once per
        // level: O(log_K n). Children that were never written read as weight 0.
        for (uint256 first = 1; first < count; first = K * index + 1) {
            uint256 pairIndex = (first - 1) >> 1;
            uint256 child = first;
            for (uint256 p = 0; p < K / 2; ++p) {
                uint256 packed = tree.pairs[pairIndex + p];
                uint256 w = packed & LOW_MASK;
                if (target < w) {
                    weight = w;
                    break;
                }
                target -= w;
                ++child;
                w = packed >> 128;
                if (target < w) {
                    weight = w;
                    break;
                }
                target -= w;
                ++child;
            }
            index = child;
        }
        return (tree.idAt[index], weight, offset - target);
    }

    /// @notice `id`'s weight (0 if not a member).
    function weightOf(Tree storage tree, address id) internal view returns (uint256) {
        uint256 index = tree.indexOf[id];
        return index == 0 ? 0 : _node(tree, index);
    }

    /// @notice Sum of all members' weights.
    function total(Tree storage tree) internal view returns (uint256) {
        return tree.totalWeight;
    }

    /// @notice Number of members (accounts with a nonzero weight).
    function size(Tree storage tree) internal view returns (uint256) {
        return tree.memberCount;
    }

    /// @notice Value of node `index` (0 is the root; tests check the sum-tree invariant).
    function nodeValue(Tree storage tree, uint256 index) internal view returns (uint256) {
        return index == 0 ? tree.totalWeight : _node(tree, index);
    }

    /// @notice Number of nodes, root included.
    function nodeCount(Tree storage tree) internal view returns (uint256) {
        return tree.nodesUsed;
    }

    /// @dev Place a new member in a leaf (weight still 0) and return the leaf's index.
    function _insertLeaf(Tree storage tree, address id) private returns (uint256 index) {
        uint256 vacantCount = tree.vacant.length;
        if (vacantCount != 0) {
            index = tree.vacant[vacantCount - 1];
            tree.vacant.pop();
        } else {
            uint256 count = tree.nodesUsed;
            if (count == 0) count = 1; // the root
            index = count;
            // With no vacant leaf, a node appended as the first child of its parent turns
            // that parent (an occupied leaf; the root excepted) into an internal node: move
            // the parent's member down into the new node, then append the new member after it.
            if (index != 1 && (index - 1) % K == 0) {
                uint256 parent = (index - 1) / K;
                address moved = tree.idAt[parent];
                _setNode(tree, index, _node(tree, parent));
                delete tree.idAt[parent];
                tree.indexOf[moved] = index;
                tree.idAt[index] = moved;
                index += 1;
            }
            tree.nodesUsed = uint48(index + 1);
        }
        tree.indexOf[id] = index;
        tree.idAt[index] = id;
    }

    function _addToAncestors(Tree storage tree, uint256 index, uint256 delta) private {
        while (index != 0) {
            index = (index - 1) / K;
            if (index == 0) tree.totalWeight += uint128(delta);
            else _setNode(tree, index, _node(tree, index) + delta);
        }
    }

    function _subFromAncestors(Tree storage tree, uint256 index, uint256 delta) private {
        while (index != 0) {
            index = (index - 1) / K;
            if (index == 0) tree.totalWeight -= uint128(delta);
            else _setNode(tree, index, _node(tree, index) - delta);
        }
    }

    /// @dev Non-root node value.
    function _node(Tree storage tree, uint256 index) private view returns (uint256) {
        uint256 packed = tree.pairs[(index - 1) >> 1];
        return (index - 1) & 1 == 0 ? packed & LOW_MASK : packed >> 128;
    }

    /// @dev Write a non-root node value (callers guarantee it fits 128 bits).
    function _setNode(Tree storage tree, uint256 index, uint256 value) private {
        uint256 pairIndex = (index - 1) >> 1;
        uint256 packed = tree.pairs[pairIndex];
        if ((index - 1) & 1 == 0) packed = (packed & ~LOW_MASK) | value;
        else packed = (packed & LOW_MASK) | (value << 128);
        tree.pairs[pairIndex] = packed;
    }
}
