"""Network figures and network terms: a worker declares its measured shard-fetch throughput
and RPC round-trip in its CHAIN identity (bounded, with the block it measured them), a job
may require a least throughput and a most round-trip, and the draw respects them; figures
count only while fresh (one liveness window) and, after a missed deadline, only once
re-measured a liveness window later."""

import brownie
import pytest
from brownie import ZERO_ADDRESS, chain, web3

from tests.contracts.market_setup import *  # noqa: F401,F403

MAX_FETCH_KIBPS = 2**24
MAX_RPC_RTT_MS = 60_000
MAX_DECLARE_DELAY = 256
FAST = (50_000, 20)  # ~49 MiB/s, 20 ms
SLOW = (2_000, 400)  # ~2 MiB/s, 400 ms
NOBODY = "0x" + "00" * 20


def req(min_fetch=0, max_rtt=0, collateral=10 * E):
    """A worker draw's IWorkerPool.Requirements with network terms."""
    return (1, 16_000, 0, collateral, NOBODY, min_fetch, max_rtt)


def declare(registry, account, figures, measured_at=None):
    at = chain.height if measured_at is None else measured_at
    return registry.declareNetwork((*figures, at), {"from": account})


def mine(blocks: int) -> None:
    """Mine `blocks` empty blocks in one call (brownie's chain.mine sends one request a block)."""
    web3.provider.make_request("anvil_mine", [hex(blocks)])


def network(registry, account):
    """registry.networkOf as plain tuples: ((fetchKiBps, rpcRttMs, measuredAt), lastTimeoutBlock)."""
    figures, last_timeout = registry.networkOf(account)
    return tuple(figures), last_timeout


def pending_block() -> int:
    """The block number a reverting call is evaluated in (brownie estimates the pending block)."""
    return chain.height + 1


@pytest.fixture
def pair(registry, stake_manager, token, pool, deployer, w1, accounts, market_isolation):
    """Two workers alike in everything (capability, stake, reputation) but their declared
    network figures: `fast` and `slow`; w1 leaves the pool so they are its only workers."""
    fast, slow = accounts[11], accounts[12]
    pool.leavePool({"from": w1})
    for acct, figures in ((fast, FAST), (slow, SLOW)):
        register(registry, acct, ROLE_WORKER, cap=(1, 24_576, 1_000, 3, 255))
        stake(token, stake_manager, acct, deployer=deployer)
        pool.joinPool({"from": acct})
    at = chain.height
    for acct, figures in ((fast, FAST), (slow, SLOW)):
        declare(registry, acct, figures, at)
    assert pool.weightOf(fast, False) == pool.weightOf(slow, False) > 0
    return fast, slow


def _sample(pool, requirements, n=200):
    """The workers the pool draws for `requirements` over n enumerated seeds (no live
    randomness: the outcome is fixed)."""
    return [pool.sample(web3.keccak(i.to_bytes(32, "big")), requirements, False) for i in range(n)]


# ------------------------------------------------------------------ the registry


def test_declareNetwork_storesFigures_countsAsHeartbeat_andEmits(registry, w1, market_isolation):
    mine(5)
    measured = chain.height - 3
    tx = declare(registry, w1, (12_345, 67), measured)
    event = tx.events["NetworkDeclared"]
    assert (event["account"], event["fetchKiBps"], event["rpcRttMs"], event["measuredAt"]) == (w1, 12_345, 67, measured)
    assert network(registry, w1) == ((12_345, 67, measured), 0)
    assert registry.lastSeenBlock(w1) == tx.block_number
    declare(registry, w1, (9, 1_000))  # replaced, not merged
    assert network(registry, w1)[0] == (9, 1_000, chain.height - 1)


def test_declareNetwork_bounds_areInclusive(registry, w1, market_isolation):
    mine(MAX_DECLARE_DELAY + 10)
    declare(registry, w1, (MAX_FETCH_KIBPS, MAX_RPC_RTT_MS), pending_block() - MAX_DECLARE_DELAY)
    assert network(registry, w1)[0][:2] == (MAX_FETCH_KIBPS, MAX_RPC_RTT_MS)
    declare(registry, w1, (0, 0), pending_block())  # a measurement in the block that declares it
    assert network(registry, w1)[0] == (0, 0, chain.height)
    assert registry.MAX_NETWORK_DECLARE_DELAY() == MAX_DECLARE_DELAY


def test_declareNetwork_outOfRangeFigures_revert(registry, w1, market_isolation):
    with brownie.reverts(f"IdentityNetworkOutOfRange: {MAX_FETCH_KIBPS + 1}, 0"):
        declare(registry, w1, (MAX_FETCH_KIBPS + 1, 0))
    with brownie.reverts(f"IdentityNetworkOutOfRange: 1, {MAX_RPC_RTT_MS + 1}"):
        declare(registry, w1, (1, MAX_RPC_RTT_MS + 1))


def test_declareNetwork_badMeasurementBlock_reverts(registry, w1, market_isolation):
    mine(MAX_DECLARE_DELAY + 10)
    # each reverted transaction is mined: the pending block moves on after each
    for measured in (lambda: 0, lambda: pending_block() + 1, lambda: pending_block() - MAX_DECLARE_DELAY - 1):
        with brownie.reverts(f"IdentityNetworkMeasuredAtInvalid: {measured()}, {pending_block()}"):
            declare(registry, w1, FAST, measured())
    assert network(registry, w1) == ((0, 0, 0), 0)


def test_declareNetwork_unregistered_reverts(registry, accounts, market_isolation):
    stranger = accounts[13]
    with brownie.reverts(f"IdentityNotRegistered: {stranger.address.lower()}"):
        declare(registry, stranger, FAST)


# ------------------------------------------------------------------ job terms


def test_createJob_networkTerms_storedAndBounded(job_market, submitter, market_isolation):
    job_id, _ = new_job(job_market, submitter, minFetchKiBps=MAX_FETCH_KIBPS, maxRpcRttMs=MAX_RPC_RTT_MS)
    job = job_market.jobOf(job_id).dict()
    assert (job["minFetchKiBps"], job["maxRpcRttMs"]) == (MAX_FETCH_KIBPS, MAX_RPC_RTT_MS)
    assert job_market.jobOf(new_job(job_market, submitter)[0]).dict()["minFetchKiBps"] == 0
    with brownie.reverts(f"JobInvalidNetworkTerms: {MAX_FETCH_KIBPS + 1}, 0"):
        new_job(job_market, submitter, minFetchKiBps=MAX_FETCH_KIBPS + 1)
    with brownie.reverts(f"JobInvalidNetworkTerms: 0, {MAX_RPC_RTT_MS + 1}"):
        new_job(job_market, submitter, maxRpcRttMs=MAX_RPC_RTT_MS + 1)


# ------------------------------------------------------------------ the draw


def test_networkTerms_changeWhoIsDrawn(pool, pair):
    """The acceptance test: two workers that differ only in their declared figures. Without
    network terms both are drawn (about half each); with a least throughput or a most
    round-trip only the fast one ever is."""
    fast, slow = pair
    plain = _sample(pool, req())
    assert set(plain) == {fast, slow}
    assert 0.35 <= plain.count(fast) / len(plain) <= 0.65
    for terms in (req(min_fetch=10_000), req(max_rtt=100), req(min_fetch=10_000, max_rtt=100)):
        drawn = _sample(pool, terms, n=100)
        # Rejection sampling: a seed whose 8 candidates are all `slow` draws nobody (1/256).
        assert set(drawn) <= {fast, ZERO_ADDRESS} and drawn.count(fast) >= 95
    # Terms at the slow worker's own figures admit both again; just above them, only fast.
    assert set(_sample(pool, req(min_fetch=SLOW[0], max_rtt=SLOW[1]), n=50)) == {fast, slow}
    assert set(_sample(pool, req(min_fetch=SLOW[0] + 1), n=50)) <= {fast, ZERO_ADDRESS}
    # Terms nobody meets: nobody is drawn.
    assert set(_sample(pool, req(min_fetch=FAST[0] + 1), n=20)) == {ZERO_ADDRESS}


def test_networkTerms_marketDrawsOnlyWorkersThatMeetThem(job_market, pool, submitter, pair):
    fast, slow = pair
    job_id, _ = new_job(job_market, submitter, shards=8, minFetchKiBps=10_000, maxRpcRttMs=100)
    drawn = []
    for _ in range(8):
        try:
            drawn.append(draw_task(job_market, job_id, {"from": submitter}).events["TaskDrawn"]["worker"])
        except brownie.exceptions.VirtualMachineError as exc:  # all 8 candidates were `slow` (1/256)
            assert "JobNoEligibleWorker" in str(exc)
    assert drawn and set(drawn) == {fast}
    nobody, _ = new_job(job_market, submitter, minFetchKiBps=FAST[0] + 1)
    with brownie.reverts(f"JobNoEligibleWorker: {nobody}, {nobody << 64}"):
        draw_task(job_market, nobody, {"from": submitter})


def test_neverMeasured_meetsNoNetworkTerms(pool, w1, market_isolation):
    assert pool.isEligible(w1, req(), False)
    assert not pool.isEligible(w1, req(min_fetch=1), False)
    assert not pool.isEligible(w1, req(max_rtt=MAX_RPC_RTT_MS), False)


def test_staleFigures_stopCounting_untilRedeclared(pool, registry, pair):
    fast, _ = pair
    terms = req(min_fetch=10_000)
    assert pool.isEligible(fast, terms, False)
    mine(LIVENESS)
    registry.heartbeat({"from": fast})  # alive, but its figures are a liveness window old
    assert pool.isEligible(fast, req(), False)
    assert not pool.isEligible(fast, terms, False)
    declare(registry, fast, FAST)
    assert pool.isEligible(fast, terms, False)


def test_auditorIsDrawnWithoutNetworkTerms(job_market, pool, submitter, v1, pair):
    """v1 never declared figures: a job's network terms bind its workers, not its audits."""
    fast, _ = pair
    job_id, _ = new_job(job_market, submitter, auditRateBps=10_000, minFetchKiBps=10_000)
    tid = None
    while tid is None:
        try:
            tx = draw_task(job_market, job_id, {"from": submitter})
            tid = tx.return_value
        except brownie.exceptions.VirtualMachineError:
            chain.mine(1)
    job_market.acceptTask(tid, {"from": fast})
    job_market.commitResult(tid, commitment(tid, ROOT, CID, SALT, fast), {"from": fast})
    assert settle_audit(job_market, tid) == v1


# ------------------------------------------------------------------ the cost of a missed deadline


def test_timeout_figuresStopCounting_untilRemeasuredAfterCooldown(job_market, pool, registry, stake_manager, submitter, pair):
    """A worker that let a deadline pass loses collateral and reputation (as before) and its
    network figures stop counting: figures measured before the timeout, or less than a
    liveness window after it, never meet network terms again."""
    fast, slow = pair
    pool.leavePool({"from": slow})  # fast is the only worker: the draw is certain
    terms = req(min_fetch=10_000)
    job_id, _ = new_job(job_market, submitter, minFetchKiBps=10_000)
    tid = draw_task(job_market, job_id, {"from": submitter}).return_value
    assert job_market.taskOf(tid)[0] == fast
    reputation = registry.reputationOf(fast)
    chain.mine(6)  # the accept window (5 blocks) passes
    tx = job_market.timeoutTask(tid, {"from": submitter})
    timed_out_at = tx.block_number
    assert network(registry, fast)[1] == timed_out_at
    assert registry.reputationOf(fast) == reputation - reputation // 10
    assert stake_manager.stakeOf(fast)[0] == STAKE_AMOUNT - 20 * E * ACCEPT_PENALTY_BPS // 10_000

    assert pool.isEligible(fast, req(), False)  # still drawn for jobs without network terms
    assert not pool.isEligible(fast, terms, False)
    declare(registry, fast, FAST)  # re-measured at once: still cooling down
    assert not pool.isEligible(fast, terms, False)
    mine(timed_out_at + LIVENESS - 1 - chain.height)
    declare(registry, fast, FAST, timed_out_at + LIVENESS - 1)  # one block short of the cool-down
    assert not pool.isEligible(fast, terms, False)
    declare(registry, fast, FAST, timed_out_at + LIVENESS)
    assert pool.isEligible(fast, terms, False)
