// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IDisputeGame} from "contracts/interfaces/IDisputeGame.sol";

/// @title Traces: the checkpoint traces the market suite's parties commit to, and their moves
/// @notice A task's true trace is `leaves` checkpoint hashes fixed by its id; a lie follows the
/// truth up to leaf `divergeAt` and then its own tagged hashes (each liar has its own tag, so
/// two lies never share a root). Roots and proofs follow contracts/libraries/MerkleCommitment.sol
/// (leaf node keccak(0x00 ‖ h), inner node keccak(0x01 ‖ l ‖ r), padded with zero nodes), and
/// `positions` is a port of truetrain/dispute/planner.py's plan_positions: the claims an honest
/// party owes the game, from the game as stored and its own trace.
library Traces {
    /// A trace: leaf i is the truth for i < divergeAt, else the liar's `tag`-ed hash.
    struct Trace {
        uint256 taskId;
        uint16 leaves;
        uint16 divergeAt;
        uint8 tag;
    }

    /// Leaf `i` (0-based) of `t`.
    function leaf(Trace memory t, uint256 i) internal pure returns (bytes32) {
        if (i < t.divergeAt) return keccak256(abi.encode("truth", t.taskId, i));
        return keccak256(abi.encode("lie", t.tag, t.taskId, i));
    }

    /// Whether leaf `i` of `t` is the true one.
    function trueAt(Trace memory t, uint256 i) internal pure returns (bool) {
        return i < t.divergeAt;
    }

    /// The Merkle root over the trace's leaves.
    function root(Trace memory t) internal pure returns (bytes32) {
        bytes32[] memory level = _leafNodes(t);
        while (level.length > 1) level = _up(level);
        return level[0];
    }

    /// The sibling nodes, bottom-up, proving leaf `index`.
    function proof(Trace memory t, uint256 index) internal pure returns (bytes32[] memory siblings) {
        bytes32[] memory level = _leafNodes(t);
        siblings = new bytes32[](depth(t.leaves));
        for (uint256 d = 0; d < siblings.length; ++d) {
            siblings[d] = level[index ^ 1];
            index >>= 1;
            level = _up(level);
        }
    }

    /// ceil(log2(leaves)) (0 for one leaf), as Bisection.depth.
    function depth(uint256 leaves) internal pure returns (uint256 d) {
        while ((uint256(1) << d) < leaves) ++d;
    }

    /// The claims the mover owes on its next move (see IDisputeGame), from its own trace.
    function claims(IDisputeGame.Game memory g, Trace memory t, bool byWorker)
        internal
        pure
        returns (IDisputeGame.Claim[] memory out)
    {
        uint16[] memory at = positions(g, t, byWorker);
        out = new IDisputeGame.Claim[](at.length);
        for (uint256 i = 0; i < at.length; ++i) {
            out[i] = IDisputeGame.Claim(leaf(t, at[i] - 1), proof(t, at[i] - 1), "bafyclaim");
        }
    }

    /// The challenger's opening claims: its hash at the result and at the first midpoint.
    function opening(Trace memory t) internal pure returns (IDisputeGame.Claim[] memory out) {
        uint256 n = t.leaves >= 2 ? 2 : 1;
        out = new IDisputeGame.Claim[](n);
        out[0] = IDisputeGame.Claim(leaf(t, t.leaves - 1), proof(t, t.leaves - 1), "bafyclaim");
        if (n == 2) {
            uint256 mid = t.leaves / 2;
            out[1] = IDisputeGame.Claim(leaf(t, mid - 1), proof(t, mid - 1), "bafyclaim");
        }
    }

    /// Positions (0 = inputs, p = leaf p - 1) the mover's next move claims, in order.
    function positions(IDisputeGame.Game memory g, Trace memory t, bool byWorker)
        internal
        pure
        returns (uint16[] memory out)
    {
        out = new uint16[](3);
        uint256 n;
        uint16 lo = g.lo;
        uint16 hi = g.hi;
        bool answer = g.moves >= 2;
        if (g.moves < 2) {
            out[n++] = g.leaves;
            if (byWorker && leaf(t, g.leaves - 1) == g.challengerHash) return _cut(out, n);
            answer = g.moves == 1 && hi - lo >= 2;
        }
        if (answer) {
            uint16 mid = lo + (hi - lo) / 2;
            out[n++] = mid;
            if (leaf(t, mid - 1) == g.pending) lo = mid;
            else hi = mid;
        }
        if (hi - lo >= 2) out[n++] = lo + (hi - lo) / 2;
        return _cut(out, n);
    }

    function _cut(uint16[] memory a, uint256 n) private pure returns (uint16[] memory) {
        assembly ("memory-safe") {
            mstore(a, n)
        }
        return a;
    }

    function _leafNodes(Trace memory t) private pure returns (bytes32[] memory nodes) {
        nodes = new bytes32[](uint256(1) << depth(t.leaves));
        for (uint256 i = 0; i < t.leaves; ++i) {
            nodes[i] = keccak256(abi.encodePacked(bytes1(0x00), leaf(t, i)));
        }
    }

    function _up(bytes32[] memory level) private pure returns (bytes32[] memory parents) {
        parents = new bytes32[](level.length / 2);
        for (uint256 i = 0; i < parents.length; ++i) {
            parents[i] = keccak256(abi.encodePacked(bytes1(0x01), level[2 * i], level[2 * i + 1]));
        }
    }
}
