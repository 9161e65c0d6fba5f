"""Gas targets (the numbers are printed; the lead's bench/gas.py tracks them over time)."""

import os

from brownie import accounts, chain, web3
from brownie.exceptions import TransactionError

from tests.contracts.market_setup import *  # noqa: F401,F403


def _grow_pool(registry, stake_manager, token, pool, deployer, n):
    for _ in range(n):
        # impersonated fresh addresses: Anvil signs for them, so no local key management
        addr = web3.to_checksum_address(os.urandom(20).hex())
        web3.provider.make_request("anvil_impersonateAccount", [addr])
        web3.provider.make_request("anvil_setBalance", [addr, hex(10**18)])
        acct = accounts.at(addr, force=True)
        try:
            register(registry, acct, ROLE_WORKER, cap=(1, 24_576, 1_000, 3, 255))
            stake(token, stake_manager, acct, deployer=deployer)
            pool.joinPool({"from": acct})
        except TransactionError:
            # brownie 1.22 now and then reports an impersonated tx as dropped on a busy
            # Anvil; a member more or less does not change what is measured
            continue


def test_gas_oneTaskLife_noAudit_oneCallEach_staysUnder400k(job_market, submitter, w1, market_isolation):
    job_id, _ = new_job(job_market, submitter)
    gas = {}
    tx = draw_task(job_market, job_id, {"from": w1})
    tid = tx.return_value
    gas["draw"] = tx.gas_used
    gas["accept"] = job_market.acceptTask(tid, {"from": w1}).gas_used
    gas["commit"] = job_market.commitResult(tid, commitment(tid, ROOT, CID, SALT, w1), {"from": w1}).gas_used
    gas["reveal"] = job_market.revealResult(tid, ROOT, CID, SALT, {"from": w1}).gas_used
    chain.mine(21)
    gas["finalize"] = job_market.finalize(tid, {"from": w1}).gas_used
    total = sum(gas.values())
    print("task life gas:", gas, "total", total)
    # Issue 3's bound for single calls was 400k (measured ~375-390k after the gas issue).
    # Issue 29 adds ~22k to the reveal, by design: the round's reveal counter (the aggregation
    # is drawn once every shard is revealed, ~5k) and freeing the worker's pool slot there (its
    # compute is over: it takes new work while its result stands, ~17k); the finalize lost
    # ~4k (measured 409,828). The gas issue's ≤ 250k is met per task in batches (next test).
    assert total <= 420_000


def test_gas_oneTaskLife_inBatches_staysUnder250k(job_market, registry, stake_manager, token, pool, deployer, submitter, w1, market_isolation):
    """A task's whole life with the batch calls counted per task: one drawTasks over the job's
    16 shard tasks, each accepted, committed and revealed, one finalizeMany. Four workers that
    take 8 tasks at once (so no draw fills one to its limit); a first batch pays their first
    credits and history writes, the second is measured."""
    pool.leavePool({"from": w1})
    wide = []
    for i in range(4):
        acct = accounts[11 + i]
        register(registry, acct, ROLE_WORKER, cap=(1, 24_576, 1_000, 3, 8))
        stake(token, stake_manager, acct, deployer=deployer)
        pool.joinPool({"from": acct})
        wide.append(acct)
    n = 16
    for _ in range(2):
        job_id, _ = new_job(job_market, submitter, shards=n, acceptWindow=100, computeWindow=200, revealWindow=150,
                            challengeWindow=200)
        tx = draw_tasks(job_market, job_id, n, {"from": submitter})
        tasks = [(e["taskId"], accounts.at(e["worker"], force=True)) for e in tx.events["TaskDrawn"]]
        assert tx.return_value == n == len(tasks)
        gas = {"draw": tx.gas_used / n, "accept": 0, "commit": 0, "reveal": 0}
        for tid, w in tasks:
            gas["accept"] += job_market.acceptTask(tid, {"from": w}).gas_used / n
        for tid, w in tasks:
            gas["commit"] += job_market.commitResult(tid, commitment(tid, ROOT, CID, SALT, w), {"from": w}).gas_used / n
        for tid, w in tasks:
            gas["reveal"] += job_market.revealResult(tid, ROOT, CID, SALT, {"from": w}).gas_used / n
        chain.mine(201)
        gas["finalize"] = job_market.finalizeMany([t for t, _ in tasks], {"from": submitter}).gas_used / n
    total = sum(gas.values())
    print("task life gas in batches of", n, {k: round(v) for k, v in gas.items()}, "total", round(total))
    assert total <= 250_000


def test_gas_createJob_flatInShardCount(job_market, submitter, market_isolation):
    new_job(job_market, submitter)  # warm the market's first-job slots
    reward = job_market.MIN_COLLATERAL() // job_market.MAX_COLLATERAL_PER_REWARD()  # the least a job may pay
    small = new_job(job_market, submitter, shards=1, rewardPerTask=reward, auditFee=0)[1].gas_used
    large = new_job(job_market, submitter, shards=10_000, rewardPerTask=reward, auditFee=0)[1].gas_used
    print("createJob gas: 1 shard", small, "10,000 shards", large)
    assert abs(large - small) < 1_000


def test_gas_drawAt100Members_within1_5xOf10(job_market, registry, stake_manager, token, pool, deployer, submitter, w1, market_isolation):
    _grow_pool(registry, stake_manager, token, pool, deployer, 9)
    job_id, _ = new_job(job_market, submitter, shards=64, acceptWindow=10_000)
    small = [draw_task(job_market, job_id, {"from": w1}).gas_used for _ in range(3)]
    _grow_pool(registry, stake_manager, token, pool, deployer, 90)
    large = [draw_task(job_market, job_id, {"from": w1}).gas_used for _ in range(3)]
    print("draw gas at 10:", small, "at ~100:", large, "members", pool.totalWeight(False) and "ok")
    assert max(large) <= 1.5 * min(small)
