"""WorkerPool: membership, weights (stake × reputation), eligibility at draw time, concurrency, region boost."""

import brownie
from brownie import ZERO_ADDRESS, chain, web3

from tests.contracts.market_setup import *  # noqa: F401,F403
from truetrain.market.randomness import EPOCH, OPEN


def test_joinPool_entersWorkerTree_withStakeTimesReputation(pool, registry, stake_manager, w2, market_isolation):
    tx = pool.joinPool({"from": w2})
    assert "PoolJoined" in tx.events
    assert pool.weightOf(w2, False) == STAKE_AMOUNT * 5_000
    assert pool.weightOf(w2, True) == 0
    with brownie.reverts(f"PoolAlreadyJoined: {w2.address.lower()}"):
        pool.joinPool({"from": w2})


def test_joinPool_withoutRole_reverts(pool, submitter, market_isolation):
    with brownie.reverts(f"PoolRoleMissing: {submitter.address.lower()}"):
        pool.joinPool({"from": submitter})


def test_leavePool_removesWeight_andTwiceReverts(pool, w1, market_isolation):
    tx = pool.leavePool({"from": w1})
    assert "PoolLeft" in tx.events and pool.weightOf(w1, False) == 0
    with brownie.reverts(f"PoolNotJoined: {w1.address.lower()}"):
        pool.leavePool({"from": w1})


def test_refresh_dropsStaleMember_andHeartbeatRestores(pool, registry, w1, market_isolation):
    chain.mine(LIVENESS + 1)
    tx = pool.refresh(w1, {"from": w1})
    assert tx.events["WeightUpdated"]["weight"] == 0 and pool.totalWeight(False) == 0
    registry.heartbeat({"from": w1})
    pool.refresh(w1, {"from": w1})
    assert pool.weightOf(w1, False) > 0


def test_refresh_followsUnstake(pool, stake_manager, w1, market_isolation):
    stake_manager.requestUnstake(STAKE_AMOUNT // 2, {"from": w1})
    pool.refresh(w1, {"from": w1})
    assert pool.weightOf(w1, False) == STAKE_AMOUNT // 2 * 5_000


def test_workerAtConcurrencyLimit_leavesTreeUntilTaskEnds(job_market, pool, submitter, w1, market_isolation):
    """At its concurrency limit a worker is ineligible at once and leaves the tree; while
    offers are held (the draw's own epoch) the tree keeps its weight, announced deferred, and
    its refresh after the hold takes it out."""
    job_id, _ = new_job(job_market, submitter, shards=3)
    weight = pool.weightOf(w1, False)
    a = draw_task(job_market, job_id, {"from": w1}).return_value
    tx = draw_task(job_market, job_id, {"from": w1})
    assert pool.memberOf(w1)[1] == 2 and pool.workersHeld()  # maxConcurrent == 2
    assert tx.events["WorkerWeightDeferred"]["weight"] == 0 and pool.weightOf(w1, False) == weight
    with brownie.reverts(f"JobNoEligibleWorker: {job_id}, {job_market.taskId(job_id, 0, 2)}"):
        draw_task(job_market, job_id, {"from": w1})
    refresh_after_hold(pool, w1)
    assert pool.weightOf(w1, False) == 0
    chain.mine(6)
    job_market.timeoutTask(a, {"from": w1})  # requeued (w1 excluded, nobody else)
    assert pool.memberOf(w1)[1] == 1 and pool.weightOf(w1, False) > 0


def test_reveal_freesTheWorkersSlot_itsCollateralStaysLockedUntilTheTaskEnds(job_market, pool, stake_manager, submitter, w1, market_isolation):
    """A worker's compute ends at its reveal: its pool slot is free for new work at once,
    while its collateral stays locked through the challenge window (what a lost game would
    take) and is unlocked when the task is paid."""
    job_id, _ = new_job(job_market, submitter, shards=3)
    a = draw_task(job_market, job_id, {"from": w1}).return_value
    draw_task(job_market, job_id, {"from": w1})
    assert pool.memberOf(w1)[1] == 2  # at its limit (maxConcurrent == 2)
    job_market.acceptTask(a, {"from": w1})
    job_market.commitResult(a, commitment(a, ROOT, CID, SALT, w1), {"from": w1})
    tx = job_market.revealResult(a, ROOT, CID, SALT, {"from": w1})
    assert tx.events["MemberReleased"]["active"] == 1 and tx.events["MemberReleased"]["unlocked"] == 0
    assert stake_manager.stakeOf(w1)[1] == 2 * 20 * E  # both collaterals still locked
    refresh_after_hold(pool, w1)
    assert pool.weightOf(w1, False) > 0
    third = draw_task(job_market, job_id, {"from": w1})  # drawn again while a stands for its window
    assert third.events["TaskDrawn"]["worker"] == w1 and pool.memberOf(w1)[1] == 2
    chain.mine(21)
    tx = job_market.finalize(a, {"from": w1})
    assert tx.events["CollateralUnlocked"]["amount"] == 20 * E and "MemberReleased" not in tx.events
    assert stake_manager.stakeOf(w1)[1] == 2 * 20 * E and pool.memberOf(w1)[1] == 2


def test_draw_checksDeviceMemoryAndCollateral(job_market, pool, submitter, w1, market_isolation):
    req_ok = (1, 16_000, 0, 20 * E, "0x" + "00" * 20, 0, 0)
    assert pool.isEligible(w1, req_ok, False)
    assert not pool.isEligible(w1, (2, 16_000, 0, 0, "0x" + "00" * 20, 0, 0), False)
    assert not pool.isEligible(w1, (1, 32_000, 0, 0, "0x" + "00" * 20, 0, 0), False)
    assert not pool.isEligible(w1, (1, 16_000, 0, 2 * STAKE_AMOUNT, "0x" + "00" * 20, 0, 0), False)
    assert not pool.isEligible(w1, (1, 16_000, 0, 0, w1.address, 0, 0), False)
    job_id, _ = new_job(job_market, submitter, memoryMiB=32_000)
    with brownie.reverts(f"JobNoEligibleWorker: {job_id}, {job_id << 64}"):
        draw_task(job_market, job_id, {"from": w1})


def test_regionBoost_prefersWorkersInPreferredRegion(job_market, pool, registry, stake_manager, token, deployer, submitter, w1, accounts, market_isolation):
    near, far = accounts[11], accounts[12]
    pool.leavePool({"from": w1})
    for acct, region in ((near, 3), (far, 9)):
        register(registry, acct, ROLE_WORKER, cap=(1, 24_576, 1_000, region, 255))
        stake(token, stake_manager, acct, deployer=deployer)
        pool.joinPool({"from": acct})
    # Enumerated seeds, not live randomness: the outcome is fixed. Equal weights: without a
    # boost near gets ~50 %; with boost 4 a far candidate is kept only 1 time in 4 (else the
    # next sample is tried), so near gets ~80 % of the draws.
    req = (1, 16_000, 3, 10 * E, "0x" + "00" * 20, 0, 0)
    drawn = [pool.sample(web3.keccak(i.to_bytes(32, "big")), req, False) for i in range(200)]
    assert set(drawn) == {near, far}
    assert 0.7 <= drawn.count(near) / len(drawn) <= 0.9
    job_id, _ = new_job(job_market, submitter, shards=2, preferredRegion=3)
    assert draw_task(job_market, job_id, {"from": far}).events["TaskDrawn"]["worker"] in (near, far)


def test_assignReleaseFreeSlotUnlock_onlyMarketRole(pool, deployer, w1, market_isolation):
    role = pool.MARKET_ROLE()
    with brownie.reverts(f"AccessControlUnauthorizedAccount: {w1.address.lower()}, {bytes.fromhex(role.hex().removeprefix('0x'))}"):
        pool.release(w1, 0, {"from": w1})
    with brownie.reverts(f"AccessControlUnauthorizedAccount: {w1.address.lower()}, {bytes.fromhex(role.hex().removeprefix('0x'))}"):
        pool.releaseMany(w1, 1, 0, {"from": w1})
    with brownie.reverts(f"AccessControlUnauthorizedAccount: {w1.address.lower()}, {bytes.fromhex(role.hex().removeprefix('0x'))}"):
        pool.freeSlot(w1, {"from": w1})
    with brownie.reverts(f"AccessControlUnauthorizedAccount: {w1.address.lower()}, {bytes.fromhex(role.hex().removeprefix('0x'))}"):
        pool.unlock(w1, 0, {"from": w1})
    pool.grantRole(role, deployer, {"from": deployer})
    with brownie.reverts(f"PoolNoActiveTask: {w1.address.lower()}"):
        pool.release(w1, 0, {"from": deployer})
    with brownie.reverts(f"PoolNoActiveTask: {w1.address.lower()}"):
        pool.releaseMany(w1, 1, 0, {"from": deployer})
    with brownie.reverts(f"PoolNoActiveTask: {w1.address.lower()}"):
        pool.freeSlot(w1, {"from": deployer})
    with brownie.reverts(f"StakeInsufficientLocked: {w1.address.lower()}, 1, 0"):  # nothing locked
        pool.unlock(w1, 1, {"from": deployer})


def test_freeSlot_atTheLimitPutsTheMemberBack_belowItKeepsTheWeight(pool, stake_manager, deployer, w1, market_isolation):
    """A slot freed at a reveal: a member that was at its limit (out of the tree) gets its
    weight back, computed with its collateral still locked; below its limit the weight assign
    left stays as it is; ``unlock`` then returns the collateral and refreshes."""
    pool.grantRole(pool.MARKET_ROLE(), deployer, {"from": deployer})
    req = (1, 16_000, 0, 20 * E, ZERO_ADDRESS, 0, 0)
    full = pool.weightOf(w1, False)
    pool.assign(web3.keccak(b"a"), req, False, {"from": deployer})
    pool.assign(web3.keccak(b"b"), req, False, {"from": deployer})
    refresh_after_hold(pool, w1)
    assert pool.memberOf(w1)[1] == 2 and pool.weightOf(w1, False) == 0  # at its limit of 2
    tx = pool.freeSlot(w1, {"from": deployer})
    assert (tx.events["MemberReleased"]["unlocked"], tx.events["MemberReleased"]["active"]) == (0, 1)
    locked_weight = pool.weightOf(w1, False)
    assert 0 < locked_weight < full and stake_manager.stakeOf(w1)[1] == 40 * E
    tx = pool.freeSlot(w1, {"from": deployer})  # below its limit: the weight stays
    assert pool.memberOf(w1)[1] == 0 and pool.weightOf(w1, False) == locked_weight
    assert "CollateralUnlocked" not in tx.events
    pool.unlock(w1, 40 * E, {"from": deployer})
    assert stake_manager.stakeOf(w1)[1] == 0 and pool.weightOf(w1, False) == full


def test_releaseMany_releasesCountSlotsOnce_andRefusesMoreThanActive(pool, stake_manager, deployer, w1, market_isolation):
    role = pool.MARKET_ROLE()
    pool.grantRole(role, deployer, {"from": deployer})
    req = (1, 16_000, 0, 20 * E, ZERO_ADDRESS, 0, 0)
    for i in range(2):
        assert pool.assign(web3.keccak(i.to_bytes(32, "big")), req, False, {"from": deployer}).return_value == w1
    assert pool.memberOf(w1)[1] == 2 and stake_manager.stakeOf(w1)[1] == 40 * E
    with brownie.reverts(f"PoolNoActiveTask: {w1.address.lower()}"):
        pool.releaseMany(w1, 3, 0, {"from": deployer})
    with brownie.reverts(f"PoolNoActiveTask: {w1.address.lower()}"):
        pool.releaseMany(w1, 0, 0, {"from": deployer})
    tx = pool.releaseMany(w1, 2, 40 * E, {"from": deployer})
    assert len(tx.events["MemberReleased"]) == 1 and tx.events["MemberReleased"]["active"] == 0
    assert tx.events["MemberReleased"]["unlocked"] == 40 * E
    assert pool.memberOf(w1)[1] == 0 and stake_manager.stakeOf(w1)[1] == 0
    assert pool.weightOf(w1, False) > 0  # back in the tree (it had left it at its limit of 2)


def test_constructor_zeroLiveness_reverts(WorkerPool, registry, stake_manager, deployer, market_isolation):
    with brownie.reverts("PoolInvalidConfig: 0, 4"):
        WorkerPool.deploy(registry, stake_manager, 0, 4, {"from": deployer})


def test_holds_ofTwoEpochsLiveAtOnce_andALaterEpochRewritesItsParitySlot(pool, deployer, market_isolation):
    """WorkerPool keeps an epoch's first held ticket in one of two slots (by the epoch's
    parity): a hold requested for the next epoch leaves this epoch's in place, and an epoch two
    on finds its slot holding an old epoch's ticket and takes it over, however the tickets
    compare."""
    pool.grantRole(pool.DRAW_ROLE(), deployer, {"from": deployer})
    chain.mine(EPOCH - chain.height % EPOCH)  # the next transaction lands at offset 1 of epoch e
    e = chain.height // EPOCH
    held = lambda tx: [(ev["epoch"], ev["ticket"]) for ev in tx.events["DrawsHeld"]] if "DrawsHeld" in tx.events else []  # noqa: E731
    late, early, next_epoch = e * EPOCH + 20, e * EPOCH + 8, (e + 1) * EPOCH + OPEN
    assert held(pool.holdDraws(late, {"from": deployer})) == [(e, late)]
    assert held(pool.holdDraws(next_epoch, {"from": deployer})) == [(e + 1, next_epoch)]
    assert held(pool.holdDraws(late + 1, {"from": deployer})) == []  # a later ticket of a held epoch moves nothing
    assert held(pool.holdDraws(early, {"from": deployer})) == [(e, early)]  # the earliest ticket counts
    mine_past(early)
    assert pool.verifiersHeld()  # epoch e's hold survived the next epoch's request
    chain.mine((e + 1) * EPOCH + OPEN + 1 - chain.height)
    assert pool.verifiersHeld()  # and the next epoch's is live in its turn
    # Epoch e + 2 shares epoch e's slot, which holds the ticket `early` (smaller than any of e + 2's).
    chain.mine((e + 2) * EPOCH - chain.height)
    assert not pool.verifiersHeld()
    two_on = (e + 2) * EPOCH + 12
    assert held(pool.holdDraws(two_on, {"from": deployer})) == [(e + 2, two_on)]
    mine_past(two_on)
    assert pool.verifiersHeld()
