"""Fixtures and helpers for the JobMarket / WorkerPool tests.

Import explicitly: ``from tests.contracts.market_setup import *``. Builds on the shared
``token``, ``registry`` and ``stake_manager`` fixtures of ``tests/contracts/conftest.py``
and deploys the pool and the market over them in the documented order (token, registry,
stake manager, pool, market) with the documented role grants.
"""

from __future__ import annotations

import pytest
from brownie import accounts, chain, web3
from brownie.exceptions import VirtualMachineError
from eth_abi import encode

from tests.contracts.conftest import MARKET_ROLE, PROFILE_CID, PROFILE_HASH, RECORDER_ROLE, role_id
from truetrain.market.randomness import EPOCH, last_block, ticket_for

__all__ = [
    "ROLE_WORKER", "ROLE_VERIFIER", "ROLE_SUBMITTER", "E", "STAKE_AMOUNT", "LIVENESS", "REGION_BOOST",
    "TIMEOUT_PENALTY_BPS", "AUDITOR_COLLATERAL", "AUDITOR_PENALTY", "DISPUTE_ROLE", "CAP", "TS",
    "job_params", "commitment", "audit_commitment", "register", "stake", "deploy_pool", "deploy_market",
    "pool", "job_market", "submitter", "w1", "w2", "v1", "v2", "crew", "new_job", "run_task", "ROOT", "CID", "SALT",
    "market_isolation", "ACCEPT_PENALTY_BPS", "FUTURE", "settle_audit", "mine_past", "ticket_for", "last_block",
    "mine_past_ticket", "refresh_after_hold", "four", "draw_task", "draw_tasks", "ask_offers", "draw_stages",
]

ROLE_WORKER, ROLE_VERIFIER, ROLE_SUBMITTER = 1, 2, 4
E = 10**18
STAKE_AMOUNT = 1_000 * E
LIVENESS = 1_000
REGION_BOOST = 4
TIMEOUT_PENALTY_BPS = 1_000
ACCEPT_PENALTY_BPS = 100
#: FutureRandomness.DELAY: a draw requested in block N is settled from the hash of block
#: N + FUTURE at the earliest (``ticket_for`` gives the ticket FutureRandomness picks).
FUTURE = 2
AUDITOR_COLLATERAL = 50 * E
AUDITOR_PENALTY = 5 * E
DISPUTE_ROLE = role_id("DISPUTE_ROLE")
CAP = (1, 24_576, 1_000, 3, 2)  # device class 1, 24 GiB, throughput, region 3, 2 tasks at once
ROOT = "0x" + "11" * 32
CID = "bafyresult"
SALT = "0x" + "22" * 32


class TS:
    """IJobMarket.TaskStatus values."""

    NONE, PENDING, OFFERED, RUNNING, COMMITTED, REVEALED, CHALLENGE, DISPUTED, FINALIZED, CLOSED = range(10)


def job_params(**overrides):
    """A JobParams tuple: 2 shards × 2 rounds, reward 10, audit fee 2, collateral 20 (tokens)."""
    p = dict(
        manifestCid="bafymanifest",
        manifestHash="0x" + "aa" * 32,
        initialCheckpointCid="bafyinit",
        initialCheckpointHash="0x" + "bb" * 32,
        shards=2,
        rounds=2,
        rewardPerTask=10 * E,
        auditFee=2 * E,
        workerCollateral=20 * E,
        acceptWindow=5,
        computeWindow=20,
        revealWindow=10,
        challengeWindow=20,
        deviceClass=1,
        memoryMiB=16_000,
        preferredRegion=0,
        auditRateBps=0,
        computePerTask=100,
        expiryBlock=chain.height + 10_000,
        checkpointLeaves=7,
        minFetchKiBps=0,
        maxRpcRttMs=0,
        stages=1,
    )
    p.update(overrides)
    return tuple(p.values())


def escrow_of(params) -> int:
    shards, rounds, reward, fee = params[4], params[5], params[6], params[7]
    return (shards + 1) * rounds * (reward + fee)


def commitment(task_id, root, cid, salt, worker) -> str:
    """JobMarket's result commitment: bound to the task and the worker."""
    return web3.keccak(encode(["uint256", "bytes32", "string", "bytes32", "address"],
                              [task_id, bytes.fromhex(root[2:]), cid, bytes.fromhex(salt[2:]), str(worker)])).to_0x_hex()


def audit_commitment(task_id, root, salt, auditor) -> str:
    """JobMarket's audit commitment: bound to the task and the auditor."""
    return web3.keccak(encode(["uint256", "bytes32", "bytes32", "address"],
                              [task_id, bytes.fromhex(root[2:]), bytes.fromhex(salt[2:]), str(auditor)])).to_0x_hex()


def register(registry, account, roles, cap=CAP):
    registry.register(roles, PROFILE_CID, PROFILE_HASH, cap, {"from": account})


def stake(token, stake_manager, account, amount=STAKE_AMOUNT, deployer=None):
    token.mint(account, amount, {"from": deployer})
    token.approve(stake_manager, amount, {"from": account})
    stake_manager.stake(amount, {"from": account})


def deploy_pool(WorkerPool, registry, stake_manager, deployer):
    contract = WorkerPool.deploy(registry, stake_manager, LIVENESS, REGION_BOOST, {"from": deployer})
    stake_manager.grantRole(MARKET_ROLE, contract, {"from": deployer})
    stake_manager.setListener(contract, {"from": deployer})
    return contract


def deploy_market(JobMarket, token, registry, stake_manager, pool, deployer):
    """JobMarket (with its TaskRecovery and JobBook libraries) wired to the stack; the deployer account is
    wired as a dispute game too, so tests can open and resolve disputes directly. The wiring
    stays open here (the deployment seals it: tests/contracts/test_attacks_admin.py)."""
    from brownie import JobBook, TaskRecovery

    if len(TaskRecovery) == 0:
        TaskRecovery.deploy({"from": deployer})
    if len(JobBook) == 0:
        JobBook.deploy({"from": deployer})
    contract = JobMarket.deploy(
        token, registry, stake_manager, pool,
        (TIMEOUT_PENALTY_BPS, ACCEPT_PENALTY_BPS, AUDITOR_COLLATERAL, AUDITOR_PENALTY), {"from": deployer},
    )
    stake_manager.grantRole(MARKET_ROLE, contract, {"from": deployer})
    registry.grantRole(RECORDER_ROLE, contract, {"from": deployer})
    pool.grantRole(pool.MARKET_ROLE(), contract, {"from": deployer})
    pool.grantRole(pool.DRAW_ROLE(), contract, {"from": deployer})
    contract.wireDisputeGame(deployer, {"from": deployer})
    return contract


@pytest.fixture(scope="module")
def pool(WorkerPool, registry, stake_manager, deployer):
    return deploy_pool(WorkerPool, registry, stake_manager, deployer)


@pytest.fixture(scope="module")
def job_market(JobMarket, token, registry, stake_manager, pool, deployer):
    return deploy_market(JobMarket, token, registry, stake_manager, pool, deployer)


@pytest.fixture(scope="module")
def submitter(accounts, registry, token, job_market, deployer):
    acct = accounts[5]
    register(registry, acct, ROLE_SUBMITTER)
    token.mint(acct, 10_000 * E, {"from": deployer})
    token.approve(job_market, 2**256 - 1, {"from": acct})
    return acct


@pytest.fixture(scope="module")
def w1(accounts):
    return accounts[6]


@pytest.fixture(scope="module")
def w2(accounts):
    return accounts[7]


@pytest.fixture(scope="module")
def v1(accounts):
    return accounts[8]


@pytest.fixture(scope="module")
def v2(accounts):
    return accounts[10]


@pytest.fixture(scope="module")
def crew(w1, w2, v1, v2, registry, token, stake_manager, pool, deployer, submitter):
    """w1 (worker) and v1 (verifier) registered, staked and in the pool; w2 and v2 only
    registered and staked (tests add them to the pool when they need a second member)."""
    register(registry, w1, ROLE_WORKER)
    register(registry, w2, ROLE_WORKER)
    register(registry, v1, ROLE_VERIFIER)
    register(registry, v2, ROLE_VERIFIER)
    for a in (w1, w2, v1, v2):
        stake(token, stake_manager, a, deployer=deployer)
    pool.joinPool({"from": w1})
    pool.joinPool({"from": v1})
    return (w1, w2, v1, v2)


@pytest.fixture(scope="module")
def four(crew, registry, token, stake_manager, pool, deployer):
    """Four workers in the pool (w1, w2 and two more), each up to two tasks at once."""
    w1, w2, *_ = crew
    extra = [accounts[11], accounts[12]]
    for a in extra:
        register(registry, a, ROLE_WORKER)
        stake(token, stake_manager, a, deployer=deployer)
    for a in (w2, *extra):
        pool.joinPool({"from": a})
    return [w1, w2, *extra]


@pytest.fixture(scope="module")
def market_isolation(crew):
    """Depend on this to have the crew set up once per module (then fn_isolation reverts)."""
    return crew


def new_job(job_market, submitter, **overrides):
    tx = job_market.createJob(job_params(**overrides), {"from": submitter})
    return tx.return_value, tx


def mine_past(block: int) -> None:
    """Mine until the chain is past ``block`` (a draw's ticket can be read from block + 1)."""
    if chain.height <= block:
        chain.mine(block + 1 - chain.height)


def ask_offers(job_market, job_id, params) -> int:
    """The job's live offer ticket, asked for (a ``drawTask`` that draws nothing) when it has
    none or it lapses by the next block; a call with nothing to draw reverts as ``drawTask``
    does."""
    ticket = job_market.offerTicketOf(job_id)
    if ticket == 0 or chain.height >= last_block(ticket):
        job_market.drawTask(job_id, params)
        ticket = job_market.offerTicketOf(job_id)
    return ticket


def _drawn(job_market, job_id, call):
    """Offers are drawn from the future (IJobMarket.drawTask): past the job's live offer
    ticket, ``call()`` draws; when it asked for a ticket instead (none was live, or a task
    sent back since waits for the next one), mine past that one and call again."""
    ticket = job_market.offerTicketOf(job_id)
    if ticket != 0 and chain.height < last_block(ticket):
        mine_past(ticket)
    tx = call()
    if "TaskDrawn" in tx.events or "OffersRequested" not in tx.events:
        return tx
    mine_past(job_market.offerTicketOf(job_id))
    return call()


def draw_task(job_market, job_id, params):
    """``drawTask`` once the job's offers can be drawn; returns the drawing transaction."""
    return _drawn(job_market, job_id, lambda: job_market.drawTask(job_id, params))


def draw_tasks(job_market, job_id, count, params):
    """``draw_task`` for up to ``count`` tasks from one ticket (``drawTasks``)."""
    return _drawn(job_market, job_id, lambda: job_market.drawTasks(job_id, count, params))


def draw_stages(job_market, job_id, count, params):
    """``draw_tasks`` for a split job's stages. A stage draw tries STAGE_DRAWS seeds of its
    ticket and finds nobody when each lands on a worker of another stage of the group
    (JobNoEligibleWorker; a few % of tickets with one free worker left): as a keeper, let that
    ticket lapse and draw from the next one (at most 5 tickets)."""
    for _ in range(5):
        try:
            return draw_tasks(job_market, job_id, count, params)
        except VirtualMachineError as exc:
            if "JobNoEligibleWorker" not in str(exc):
                raise
            chain.mine(last_block(job_market.offerTicketOf(job_id)) + 1 - chain.height)
    raise AssertionError(f"job {job_id}: no stage drawn from 5 tickets")


def refresh_after_hold(pool, *members) -> None:
    """Mine to the next epoch's first block if verifier or worker weights are held
    (WorkerPool.holdDraws, holdOffers: a draw is pending), then refresh ``members``, whose
    weights a hold deferred."""
    if pool.verifiersHeld() or pool.workersHeld():
        chain.mine(EPOCH - chain.height % EPOCH)
    for member in members:
        pool.refresh(member, {"from": accounts[0]})


def mine_past_ticket(job_market, tid) -> None:
    """Mine past the audit ticket of committed task ``tid`` (its reveal deadline minus the window)."""
    mine_past(job_market.taskOf(tid)[2] - job_market.jobOf(tid >> 64).dict()["revealWindow"])


def settle_audit(job_market, tid, sender=None):
    """Mine past the task's audit ticket and settle its audit draw (draws the auditor when
    the draw audits it); returns the auditor (None when not audited or waived)."""
    task = job_market.taskOf(tid).dict()
    job = job_market.jobOf(tid >> 64).dict()
    mine_past(task["deadline"] - job["revealWindow"])
    tx = job_market.settleAudit(tid, {"from": sender or accounts[0]})
    return accounts.at(tx.events["AuditorDrawn"]["auditor"], force=True) if "AuditorDrawn" in tx.events else None


def run_task(job_market, job_id, worker, root=ROOT, cid=CID, salt=SALT, finalize=True):
    """Draw the job's next task and run it to the end as whoever was drawn (`worker` sends the draw)."""
    tx = draw_task(job_market, job_id, {"from": worker})
    tid = tx.return_value
    worker = accounts.at(tx.events["TaskDrawn"]["worker"], force=True)
    job_market.acceptTask(tid, {"from": worker})
    job_market.commitResult(tid, commitment(tid, root, cid, salt, worker), {"from": worker})
    job_market.revealResult(tid, root, cid, salt, {"from": worker})
    if finalize:
        chain.mine(job_market.jobOf(job_id).dict()["challengeWindow"] + 1)
        job_market.finalize(tid, {"from": worker})
    return tid
