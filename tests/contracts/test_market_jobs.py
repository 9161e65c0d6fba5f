"""Job creation (errors, permit), cancel, expiry and closing tasks of stopped jobs."""

import brownie
from brownie import accounts, chain, web3
from eth_account import Account
from eth_account.messages import encode_typed_data

from tests.contracts.market_setup import *  # noqa: F401,F403


def test_createJob_byNonSubmitter_reverts(job_market, w1, market_isolation):
    with brownie.reverts(f"JobSubmitterNotRegistered: {w1.address.lower()}"):
        job_market.createJob(job_params(), {"from": w1})


def test_createJob_invalidParams_revert(job_market, submitter, market_isolation):
    with brownie.reverts("JobInvalidShape: 0, 2"):
        job_market.createJob(job_params(shards=0), {"from": submitter})
    with brownie.reverts("JobWindowTooShort: 5"):
        job_market.createJob(job_params(revealWindow=0), {"from": submitter})
    with brownie.reverts("JobInvalidExpiry: 1"):
        job_market.createJob(job_params(expiryBlock=1), {"from": submitter})
    with brownie.reverts("JobInvalidShape: 65536, 2"):  # a round's counters are 16 bits
        job_market.createJob(job_params(shards=2**16), {"from": submitter})
    with brownie.reverts(f"JobEscrowTooLarge: {(2**16) * (2**32 - 1) * (2 * (2**96 - 1))}"):
        job_market.createJob(job_params(shards=2**16 - 1, rounds=2**32 - 1, rewardPerTask=2**96 - 1, auditFee=2**96 - 1,
                                        workerCollateral=2**96 - 1), {"from": submitter})
    with brownie.reverts("JobInvalidAuditRate: 10001"):
        job_market.createJob(job_params(auditRateBps=10_001), {"from": submitter})


def test_createJobWithPermit_pullsEscrowWithoutApproval(job_market, token, registry, deployer, market_isolation):
    signer = Account.create()
    owner = accounts.add(signer.key.hex())
    accounts[0].transfer(owner, "1 ether")
    register(registry, owner, ROLE_SUBMITTER)
    params = job_params()
    escrow = 6 * 12 * E
    token.mint(owner, escrow, {"from": deployer})
    deadline = chain.time() + 3600
    data = {
        "types": {
            "EIP712Domain": [{"name": "name", "type": "string"}, {"name": "version", "type": "string"},
                             {"name": "chainId", "type": "uint256"}, {"name": "verifyingContract", "type": "address"}],
            "Permit": [{"name": "owner", "type": "address"}, {"name": "spender", "type": "address"},
                       {"name": "value", "type": "uint256"}, {"name": "nonce", "type": "uint256"},
                       {"name": "deadline", "type": "uint256"}],
        },
        "primaryType": "Permit",
        "domain": {"name": "truetrain", "version": "1", "chainId": web3.eth.chain_id, "verifyingContract": token.address},
        "message": {"owner": owner.address, "spender": job_market.address, "value": escrow,
                    "nonce": token.nonces(owner), "deadline": deadline},
    }
    sig = Account.sign_message(encode_typed_data(full_message=data), signer.key)
    tx = job_market.createJobWithPermit(params, deadline, sig.v, "0x%064x" % sig.r, "0x%064x" % sig.s, {"from": owner})
    assert tx.events["JobCreated"]["escrow"] == escrow and token.balanceOf(owner) == 0


def test_cancelJob_refundsUndrawnAtOnce_inFlightFinishes_andPendingClosed(job_market, token, submitter, w1, market_isolation):
    job_id, _ = new_job(job_market, submitter, shards=3, rounds=2, acceptWindow=50)  # 8 tasks
    running = draw_task(job_market, job_id, {"from": w1}).return_value
    offered = draw_task(job_market, job_id, {"from": w1}).return_value
    job_market.acceptTask(running, {"from": w1})
    with brownie.reverts(f"JobNotSubmitter: {job_id}, {w1.address.lower()}"):
        job_market.cancelJob(job_id, {"from": w1})
    with brownie.reverts(f"TaskNotClosable: {offered}"):
        job_market.closeTask(offered, {"from": w1})
    tx = job_market.cancelJob(job_id, {"from": submitter})
    assert tx.events["JobCancelled"]["refund"] == 6 * 12 * E
    assert job_market.credits(submitter) == 6 * 12 * E
    with brownie.reverts(f"JobNotActive: {job_id}, 3"):
        draw_task(job_market, job_id, {"from": w1})
    with brownie.reverts(f"JobNotActive: {job_id}, 3"):
        job_market.acceptTask(offered, {"from": w1})
    tx = job_market.closeTask(offered, {"from": w1})
    assert tx.events["TaskClosed"]["refund"] == 12 * E
    with brownie.reverts(f"TaskNotClosable: {running}"):
        job_market.closeTask(running, {"from": w1})
    job_market.commitResult(running, commitment(running, ROOT, CID, SALT, w1), {"from": w1})
    job_market.revealResult(running, ROOT, CID, SALT, {"from": w1})
    chain.mine(21)
    tx = job_market.finalize(running, {"from": w1})
    # The stop refunded the surplus there was; the fee this late task did not use comes back
    # with its finalization (no refundSurplus needed, nothing left as surplus).
    assert tx.events["TaskFinalized"]["auditFee"] == 0
    assert [(e["jobId"], e["submitter"], e["amount"]) for e in tx.events["Refunded"]] == [(job_id, submitter, 2 * E)]
    assert job_market.credits(submitter) == 6 * 12 * E + 12 * E + 2 * E
    assert job_market.jobOf(job_id).dict()["escrow"] == 0
    assert job_market.jobOf(job_id).dict()["surplus"] == 0
    assert token.balanceOf(job_market) == job_market.totalCredits() + job_market.totalEscrow()


def test_cancelJob_runningTaskTimesOut_isClosedAndRefunded(job_market, submitter, w1, market_isolation):
    job_id, _ = new_job(job_market, submitter)
    tid = draw_task(job_market, job_id, {"from": w1}).return_value
    job_market.acceptTask(tid, {"from": w1})
    job_market.cancelJob(job_id, {"from": submitter})
    chain.mine(21)
    tx = job_market.timeoutTask(tid, {"from": submitter})
    assert "TaskClosed" in tx.events and job_market.jobOf(job_id).dict()["escrow"] == 0


def test_expireJob_beforeExpiry_reverts_thenExpires(job_market, submitter, w1, market_isolation):
    expiry = chain.height + 20
    job_id, _ = new_job(job_market, submitter, expiryBlock=expiry)
    with brownie.reverts(f"JobNotExpired: {job_id}, {expiry}"):
        job_market.expireJob(job_id, {"from": w1})
    chain.mine(21)
    with brownie.reverts(f"JobPastExpiry: {job_id}, {expiry}"):
        draw_task(job_market, job_id, {"from": w1})
    tx = job_market.expireJob(job_id, {"from": w1})
    assert tx.events["JobExpired"]["refund"] == 6 * 12 * E
    assert job_market.jobOf(job_id).dict()["status"] == 4


def test_unknownJob_reverts(job_market, submitter, market_isolation):
    with brownie.reverts("JobNotFound: 999"):
        job_market.cancelJob(999, {"from": submitter})


def test_drawTask_withEmptyPool_reverts(job_market, pool, submitter, w1, market_isolation):
    pool.leavePool({"from": w1})
    job_id, _ = new_job(job_market, submitter)
    with brownie.reverts(f"JobNoEligibleWorker: {job_id}, {job_id << 64}"):
        draw_task(job_market, job_id, {"from": submitter})


def test_constructor_invalidConfig_reverts(JobMarket, token, registry, stake_manager, pool, deployer, market_isolation):
    with brownie.reverts("MarketInvalidConfig: "):
        JobMarket.deploy(token, registry, stake_manager, pool, (10_001, 100, 1, 0), {"from": deployer})
    # An auditor's collateral is its bond in the game of a mismatch: at least MIN_COLLATERAL.
    with brownie.reverts("MarketInvalidConfig: "):
        JobMarket.deploy(token, registry, stake_manager, pool, (1_000, 100, 20 * E - 1, 1), {"from": deployer})


def test_wiring_onlyByTheDeployer_andClosedOnceSealed(job_market, pool, deployer, w1, market_isolation):
    with brownie.reverts(f"MarketWiringClosed: {w1.address.lower()}"):
        job_market.wireDisputeGame(w1, {"from": w1})
    with brownie.reverts(f"MarketWiringClosed: {w1.address.lower()}"):
        job_market.sealWiring({"from": w1})
    tx = job_market.sealWiring({"from": deployer})
    assert "WiringSealed" in tx.events and job_market.wiringSealed()
    with brownie.reverts(f"MarketWiringClosed: {deployer.address.lower()}"):
        job_market.wireDisputeGame(w1, {"from": deployer})
    assert not job_market.isDisputeGame(w1)


def test_renounceRole_forOtherAccount_reverts(job_market, pool, deployer, w1, market_isolation):
    with brownie.reverts("AccessControlBadConfirmation: "):
        pool.renounceRole(pool.MARKET_ROLE(), w1, {"from": deployer})
