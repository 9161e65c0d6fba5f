// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IJobMarket} from "../interfaces/IJobMarket.sol";
import {IIdentityRegistry} from "../interfaces/IIdentityRegistry.sol";
import {IStakeManager} from "../interfaces/IStakeManager.sol";
import {IWorkerPool} from "../interfaces/IWorkerPool.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @title AuditPeeker: a deliberately cheating worker that is a contract (tests only)
/// @notice Finding 1 of issue 12: a worker contract that commits a wrong result and, in the
/// same transaction, tries to learn whether it will be audited, undoing the commitment when
/// it would be. With the audit settled from a future block hash, everything it can try in
/// its own transaction reverts `RandomnessUnavailable`, so it must commit blind.
contract AuditPeeker {
    IJobMarket public immutable market;

    constructor(IJobMarket market_) {
        market = market_;
    }

    /// @notice Register as a worker, stake `amount` (held by this contract) and join the pool.
    function enlist(IIdentityRegistry registry, IStakeManager stakes, IWorkerPool pool, IERC20 token, uint256 amount)
        external
    {
        registry.register(1, "bafyattacker", keccak256("attacker"), IIdentityRegistry.Capability(1, 24_576, 1_000, 3, 4));
        token.approve(address(stakes), amount);
        stakes.stake(amount);
        pool.joinPool();
    }

    function accept(uint256 id) external {
        market.acceptTask(id);
    }

    /// @notice Commit, then try to settle the audit draw in the same transaction (to revert
    /// the commitment when it audits): the try reverts, and so does the whole call.
    function commitAndPeekBySettling(uint256 id, bytes32 commitment) external {
        market.commitResult(id, commitment);
        market.settleAudit(id);
    }

    /// @notice Commit, then try to reveal at once (a reveal settles an unaudited draw).
    function commitAndPeekByRevealing(uint256 id, bytes32 commitment, bytes32 root, string calldata cid, bytes32 salt)
        external
    {
        market.commitResult(id, commitment);
        market.revealResult(id, root, cid, salt);
    }

    /// @notice What is left to the attacker: commit blind.
    function commit(uint256 id, bytes32 commitment) external {
        market.commitResult(id, commitment);
    }

    function reveal(uint256 id, bytes32 root, string calldata cid, bytes32 salt) external {
        market.revealResult(id, root, cid, salt);
    }
}
