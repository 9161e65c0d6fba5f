// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Test} from "./Test.sol";
import {TrainToken} from "contracts/TrainToken.sol";
import {IdentityRegistry} from "contracts/IdentityRegistry.sol";
import {StakeManager} from "contracts/StakeManager.sol";
import {WorkerPool} from "contracts/WorkerPool.sol";
import {JobMarket} from "contracts/JobMarket.sol";
import {DisputeGame} from "contracts/DisputeGame.sol";
import {StepGame} from "contracts/StepGame.sol";
import {ParameterTimelock} from "contracts/ParameterTimelock.sol";
import {IJobMarket} from "contracts/interfaces/IJobMarket.sol";
import {IDisputeGame} from "contracts/interfaces/IDisputeGame.sol";
import {IWorkerPool} from "contracts/interfaces/IWorkerPool.sol";
import {IStakeManager, IStakeListener} from "contracts/interfaces/IStakeManager.sol";
import {IIdentityRegistry} from "contracts/interfaces/IIdentityRegistry.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @title MarketFixture: the whole stack, deployed, wired and sealed as truetrain/chain/deploy.py does
/// @notice The ONE place of the forge suites that knows the market's constructors and wiring:
/// deploy order token, registry, stake manager, pool, (TaskRecovery and JobBook: forge links the
/// external libraries itself when JobMarket is created), market, game, timelock; then
/// `stakeManager.setListener(pool)`, `market.wireDisputeGame(game)`, the role grants of
/// deploy.py's GRANTS, and `seal`: the deployer (this test contract) renounces PARAMETER_ROLE
/// and every DEFAULT_ADMIN_ROLE and seals the market's wiring, so that, as in production,
/// nobody holds a role that could move a stake. Parameters are StackParams' defaults.
/// The token is a devnet token (mintable by its owner): the suite hands its ownership to the
/// handler, which mints and counts what it minted.
abstract contract MarketFixture is Test {
    // StackParams defaults (truetrain/chain/deploy.py)
    uint64 internal constant UNBONDING_DELAY_BLOCKS = 20;
    uint64 internal constant LIVENESS_WINDOW_BLOCKS = 1_000;
    uint32 internal constant REGION_BOOST = 4;
    uint16 internal constant TIMEOUT_PENALTY_BPS = 1_000;
    uint16 internal constant ACCEPT_PENALTY_BPS = 100;
    uint96 internal constant AUDITOR_COLLATERAL = 50 ether;
    uint96 internal constant AUDITOR_PENALTY = 5 ether;
    uint64 internal constant DISPUTE_CLOCK_BLOCKS = 30;
    uint32 internal constant COMMIT_WINDOW_BLOCKS = 30;
    uint32 internal constant REVEAL_WINDOW_BLOCKS = 30;
    uint8 internal constant COMMITTEE_SIZE = 3;
    uint96 internal constant REFEREE_STAKE = 50 ether;
    uint96 internal constant REFEREE_PENALTY = 5 ether;
    uint256 internal constant TIMELOCK_DELAY_SECONDS = 0;

    TrainToken internal token;
    IdentityRegistry internal registry;
    StakeManager internal stakeManager;
    WorkerPool internal pool;
    JobMarket internal market;
    DisputeGame internal game;
    ParameterTimelock internal timelock;

    /// Deploy, wire and seal the stack; this contract is the deployer.
    function _deployMarketStack() internal {
        token = new TrainToken(true, new address[](0), new uint256[](0));
        registry = new IdentityRegistry();
        stakeManager = new StakeManager(address(token), UNBONDING_DELAY_BLOCKS);
        pool = new WorkerPool(
            IIdentityRegistry(address(registry)),
            IStakeManager(address(stakeManager)),
            LIVENESS_WINDOW_BLOCKS,
            REGION_BOOST
        );
        market = new JobMarket(
            IERC20(address(token)),
            IIdentityRegistry(address(registry)),
            IStakeManager(address(stakeManager)),
            IWorkerPool(address(pool)),
            IJobMarket.MarketConfig(TIMEOUT_PENALTY_BPS, ACCEPT_PENALTY_BPS, AUDITOR_COLLATERAL, AUDITOR_PENALTY)
        );
        game = new DisputeGame(
            IJobMarket(address(market)),
            IWorkerPool(address(pool)),
            IStakeManager(address(stakeManager)),
            IIdentityRegistry(address(registry)),
            IDisputeGame.GameConfig(
                DISPUTE_CLOCK_BLOCKS,
                COMMIT_WINDOW_BLOCKS,
                REVEAL_WINDOW_BLOCKS,
                COMMITTEE_SIZE,
                REFEREE_STAKE,
                REFEREE_PENALTY
            ),
            StepGame(address(0)) // no StepGame: the invariants' games end with committees
        );
        address[] memory proposers = new address[](1);
        proposers[0] = address(this);
        timelock = new ParameterTimelock(TIMELOCK_DELAY_SECONDS, proposers);

        // wiring (deploy_stack): the listener, the dispute game, then GRANTS in their order
        stakeManager.setListener(IStakeListener(address(pool)));
        market.wireDisputeGame(address(game));
        stakeManager.grantRole(stakeManager.MARKET_ROLE(), address(pool));
        stakeManager.grantRole(stakeManager.MARKET_ROLE(), address(market));
        registry.grantRole(registry.RECORDER_ROLE(), address(market));
        pool.grantRole(pool.MARKET_ROLE(), address(market));
        pool.grantRole(pool.DRAW_ROLE(), address(market));
        pool.grantRole(pool.DRAW_ROLE(), address(game));
        stakeManager.grantRole(stakeManager.MARKET_ROLE(), address(game));
        registry.grantRole(registry.RECORDER_ROLE(), address(game));
        stakeManager.grantRole(stakeManager.PARAMETER_ROLE(), address(timelock));

        // seal: the deployer gives up every power it held
        stakeManager.renounceRole(stakeManager.PARAMETER_ROLE(), address(this));
        stakeManager.renounceRole(stakeManager.DEFAULT_ADMIN_ROLE(), address(this));
        registry.renounceRole(registry.DEFAULT_ADMIN_ROLE(), address(this));
        pool.renounceRole(pool.DEFAULT_ADMIN_ROLE(), address(this));
        market.sealWiring();
    }
}
