// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IJobMarket} from "../interfaces/IJobMarket.sol";
import {IDisputeGame} from "../interfaces/IDisputeGame.sol";
import {IIdentityRegistry} from "../interfaces/IIdentityRegistry.sol";
import {IStakeManager} from "../interfaces/IStakeManager.sol";
import {IWorkerPool} from "../interfaces/IWorkerPool.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @title StakeGrinder: a staker that steers draws by moving its stake once their hash is public (tests only)
/// @notice Issue 27, findings 1 and 2. Once a draw's ticket block exists, anyone can compute
/// the draw; if the pool weights it is applied to could still move, a staker would search
/// (off-chain, here with `eth_call` on the `try…` functions) for a top-up of a few wei that
/// sends the draw where it wants, then send it with the settlement in one transaction: a
/// worker that committed a wrong result and holds verifier stake makes every attempt of its
/// own audit draw land on itself (excluded) and gets it waived; a sybil verifier tops up
/// until it holds the seats of a committee; a worker tops up until a job's next offer is its
/// own, or draws offers only when one lands on it (finding 7a: offers were seeded from
/// prevrandao inside the draw's own call). With the weights held from the ticket on
/// (WorkerPool.holdDraws, holdOffers), every top-up leaves the draw where the hash put it.
contract StakeGrinder {
    IJobMarket public immutable market;
    IStakeManager public immutable stakes;
    IERC20 public immutable token;

    constructor(IJobMarket market_, IStakeManager stakes_, IERC20 token_) {
        market = market_;
        stakes = stakes_;
        token = token_;
        token_.approve(address(stakes_), type(uint256).max);
    }

    /// @notice Register with `roles`, stake `amount` (held by this contract) and join the pool.
    function enlist(IIdentityRegistry registry, IWorkerPool pool, uint8 roles, uint256 amount) external {
        registry.register(roles, "bafygrinder", keccak256("grinder"), IIdentityRegistry.Capability(1, 24_576, 1_000, 3, 4));
        stakes.stake(amount);
        pool.joinPool();
    }

    function accept(uint256 id) external {
        market.acceptTask(id);
    }

    function commit(uint256 id, bytes32 commitment) external {
        market.commitResult(id, commitment);
    }

    function reveal(uint256 id, bytes32 root, string calldata cid, bytes32 salt) external {
        market.revealResult(id, root, cid, salt);
    }

    function leave(IWorkerPool pool) external {
        pool.leavePool();
    }

    /// @notice Top up by `topUp` wei, then settle task `id`'s audit draw; returns the auditor
    /// drawn (address(0): no audit, or waived). Searched with `eth_call`, then sent.
    function topUpAndSettle(uint256 id, uint256 topUp) external returns (address auditor) {
        if (topUp != 0) stakes.stake(topUp);
        market.settleAudit(id);
        auditor = market.taskOf(id).auditor;
    }

    /// @notice Top up by `topUp` wei, then draw game `gameId`'s committee; returns its seats.
    function topUpAndDraw(IDisputeGame game, uint256 gameId, uint256 topUp) external returns (address[] memory seated) {
        if (topUp != 0) stakes.stake(topUp);
        game.drawReferees(gameId);
        IDisputeGame.Seat[] memory seats = game.committeeOf(gameId);
        seated = new address[](seats.length);
        for (uint256 i = 0; i < seats.length; ++i) {
            seated[i] = seats[i].referee;
        }
    }

    /// @notice Top up by `topUp` wei, then draw job `jobId`'s next offer; returns the worker
    /// it went to (address(0): the call asked for the offer ticket).
    function topUpAndDrawOffer(uint256 jobId, uint256 topUp) external returns (address worker) {
        if (topUp != 0) stakes.stake(topUp);
        uint256 id = market.drawTask(jobId);
        if (id != 0) worker = market.taskOf(id).worker;
    }

    /// @notice Draw job `jobId`'s next offer, and revert unless it went to `wanted`.
    function pickOffer(uint256 jobId, address wanted) external returns (uint256 id) {
        id = market.drawTask(jobId);
        if (id == 0 || market.taskOf(id).worker != wanted) revert NotPicked(id);
    }

    /// @notice The draw did not offer the task to the worker the picker wanted.
    error NotPicked(uint256 taskId);
}
