// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {MarketFixture} from "./utils/MarketFixture.sol";
import {IJobMarket} from "contracts/interfaces/IJobMarket.sol";
import {IIdentityRegistry, ROLE_SUBMITTER, ROLE_WORKER} from "contracts/interfaces/IIdentityRegistry.sol";

/// @title The draw of a job split by layers prefers low latency between consecutive stages
/// @notice Consecutive stages trade activations and gradients every micro-batch, so a stage
/// prefers a worker in the region its neighbour's worker declares (the pool's region boost,
/// REGION_BOOST = 4), unless the job names a region. The draws are enumerated, not live: each
/// case runs from one state with the hash of the job's offer ticket set to 1 … DRAWS (the
/// offers' randomness), so the counts are fixed. Five equal workers, two in region 3 and three in region 5. Without a preference
/// the second stage's worker shares the first's region 1/4 of the time when the first is in
/// region 3 (one of the four others is), 2/4 when it is in region 5; with the boost the odds
/// are 4/7 and 8/10. Each bar sits between the two, several standard deviations from each.
contract StageRegionTest is MarketFixture {
    uint256 internal constant DRAWS = 200;
    uint256 internal constant STAKE = 1_000 ether;
    address internal constant SUBMITTER = address(0x5B);
    address[5] internal workers;

    function setUp() public {
        _deployMarketStack();
        for (uint256 i = 0; i < workers.length; ++i) {
            address w = address(uint160(0xA000 + i));
            workers[i] = w;
            token.mint(w, STAKE);
            vm.startPrank(w);
            // GPU class 1, 24 GiB, 1 Gbit/s, region 3 or 5, 2 tasks at once
            registry.register(ROLE_WORKER, "bafyprofile", keccak256(abi.encode(w)),
                IIdentityRegistry.Capability(1, 24_576, 1_000, i < 2 ? 3 : 5, 2));
            token.approve(address(stakeManager), STAKE);
            stakeManager.stake(STAKE);
            pool.joinPool();
            vm.stopPrank();
        }
        token.mint(SUBMITTER, 1_000 ether);
        vm.startPrank(SUBMITTER);
        registry.register(ROLE_SUBMITTER, "bafyprofile", keccak256("submitter"),
            IIdentityRegistry.Capability(0, 0, 0, 0, 0));
        token.approve(address(market), type(uint256).max);
        vm.stopPrank();
    }

    function _job(uint16 preferredRegion) internal returns (uint256 jobId) {
        IJobMarket.JobParams memory p;
        p.manifestCid = "bafymanifest";
        p.manifestHash = keccak256("manifest");
        p.initialCheckpointCid = "bafyinit";
        p.initialCheckpointHash = keccak256("init");
        (p.shards, p.stages, p.rounds, p.checkpointLeaves) = (3, 3, 1, 2);
        (p.deviceClass, p.memoryMiB, p.computePerTask, p.preferredRegion) = (1, 16_000, 100, preferredRegion);
        (p.rewardPerTask, p.auditFee, p.workerCollateral) = (1 ether, 0, 20 ether);
        (p.acceptWindow, p.computeWindow, p.revealWindow, p.challengeWindow) = (10, 20, 20, 20);
        p.expiryBlock = uint64(block.number + 1_000);
        vm.prank(SUBMITTER);
        jobId = market.createJob(p);
    }

    function _region(address w) internal view returns (uint16) {
        return registry.capabilityOf(w).region;
    }

    /// For each enumerated ticket hash: draw stage 0 then stage 1 of a fresh group and count
    /// how often stage 1's worker is in `target` (0: stage 0's worker's region), by stage 0's
    /// region (index 0: region 3, 1: region 5).
    function _count(uint16 preferredRegion, uint16 target)
        internal
        returns (uint256[2] memory same, uint256[2] memory firsts)
    {
        uint256 jobId = _job(preferredRegion);
        uint64 ticket = market.offerTicketOf(jobId); // asked for by createJob
        vm.roll(ticket + 1);
        uint256 start = vm.snapshotState();
        for (uint256 i = 1; i <= DRAWS; ++i) {
            vm.revertToState(start);
            vm.setBlockhash(ticket, bytes32(i));
            assertEq(market.drawTasks(jobId, 2), 2, "both stages drawn from the ticket");
            address first = market.taskOf(jobId << 64).worker;
            address second = market.taskOf((jobId << 64) | 1).worker;
            assertTrue(first != second && second != address(0), "stage 1 drawn to stage 0's worker");
            uint256 k = _region(first) == 3 ? 0 : 1;
            firsts[k] += 1;
            if (_region(second) == (target == 0 ? _region(first) : target)) same[k] += 1;
        }
    }

    /// Without a job region, stage 1 follows stage 0's region: from region 3 (one other worker
    /// there against three in region 5) far above the 1/4 an unboosted draw gives, and from
    /// region 5 above its 2/4.
    function test_stageDraw_prefersTheNeighboursRegion() public {
        (uint256[2] memory same, uint256[2] memory firsts) = _count(0, 0);
        assertGt(firsts[0], 0, "stage 0 never in region 3");
        assertGt(firsts[1], 0, "stage 0 never in region 5");
        assertGe(same[0] * 5, firsts[0] * 2, "from region 3: under 2/5 (unboosted 1/4, boosted 4/7)");
        assertGe(same[1] * 20, firsts[1] * 13, "from region 5: under 13/20 (unboosted 2/4, boosted 8/10)");
    }

    /// A job that names a region keeps it for every stage: stage 1 goes to region 5 mostly,
    /// wherever stage 0 is. From region 3 the odds are 12/13 (3/7 had the neighbour's region
    /// won); from region 5, 8/10.
    function test_stageDraw_jobRegionWins() public {
        (uint256[2] memory inFive, uint256[2] memory firsts) = _count(5, 5);
        assertGt(firsts[0], 0, "stage 0 never in region 3");
        assertGe(inFive[0] * 10, firsts[0] * 7, "from region 3: stage 1 in the job's region 5 under 7/10");
        assertGe(inFive[1] * 20, firsts[1] * 13, "from region 5: stage 1 in the job's region 5 under 13/20");
    }
}
