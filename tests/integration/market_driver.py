"""A scripted stand-in for the worker and verifier daemons: it plays one job to its end.

Tests that need a job with finalized rounds (``job status``, ``job results``) create the
job through the CLI and then call :meth:`MarketDriver.run_job`. Each task is played in
order with raw transactions: draw, accept, compute from verified inputs
(:func:`~truetrain.market.compute_task`), publish, commit, settle the audit draw (mining past
its ticket) and audit when one is drawn, reveal, mine past the challenge window and finalize. Whoever the pool draws is played
with that Anvil account's well-known key, so any dev account that staked may be drawn.
"""

from __future__ import annotations

from pathlib import Path

from web3.logs import DISCARD

from truetrain.chain.client import dev_account, dev_accounts
from truetrain.chain.handles import connect_deployment
from truetrain.hardware import detect
from truetrain.market import (JobStatus, MarketReader, TaskStatus, TaskView, audit_commitment, compute_task, new_salt,
                              pending_audit_draw, publish_result, result_commitment)
from truetrain.market.randomness import draw_offers
from truetrain.storage import StorageClient, StorageSettings

E = 10**18
#: Draws settle against pool state that may move between the estimate and the block: pad gas.
GAS = 3_000_000
ROLE_WORKER, ROLE_VERIFIER = 1, 2


class MarketDriver:
    def __init__(self, rpc_url: str, ipfs_api: str, deployments: Path, *, keeper: int = 0):
        self.contracts = connect_deployment(rpc_url, deployments)
        self.client = self.contracts.client
        self.market = self.contracts.market
        self.store = StorageClient(StorageSettings(api_addr=ipfs_api, timeout_s=10.0))
        self.reader = MarketReader(self.contracts, self.store)
        self.keys = {a.address: a for a in dev_accounts(20)}
        self.keeper = dev_account(keeper)  # sends the permissionless draws and finalizations
        self.audited: list[int] = []  # tasks an auditor re-executed and matched

    def close(self) -> None:
        self.store.close()

    def send(self, call, account):
        return self.client.transact(call, account, gas=GAS)

    def events(self, receipt, name: str, contract=None) -> list:
        contract = contract or self.market
        return [e["args"] for e in getattr(contract.events, name)().process_receipt(receipt.raw, errors=DISCARD)]

    def mine(self, blocks: int) -> None:
        self.client.w3.provider.make_request("anvil_mine", [hex(blocks)])

    def mine_past(self, block: int) -> None:
        if self.client.w3.eth.block_number <= block:
            self.mine(block + 1 - self.client.w3.eth.block_number)

    def draw(self, job_id: int) -> dict:
        """Offer the job's next task (its offer ticket asked for and mined past first, as
        offers are drawn from the future); the TaskDrawn event's arguments."""
        receipt = draw_offers(self.market, job_id, lambda call: self.send(call, self.keeper), self.mine_past,
                              lambda: self.client.w3.eth.block_number)
        return self.events(receipt, "TaskDrawn")[0]

    # ------------------------------------------------------------------ participants
    def enlist(self, index: int, roles: int, stake: int = 100 * E) -> str:
        """Register dev account ``index`` with ``roles``, stake ``stake`` and join the pool (idempotent)."""
        account, c = dev_account(index), self.contracts
        if not self.client.call(c.registry.functions.isRegistered(account.address)):
            profile = detect(measure=False)
            stored = self.store.add_bytes(profile.canonical_json())
            capability = (profile.device_class, max(profile.memory_mib, 1024), 1, 0, 1)
            self.send(c.registry.functions.register(roles, stored.cid, stored.hash, capability), account)
        active = self.client.call(c.stake.functions.stakeOf(account.address))[0]
        if active < stake:
            self.send(c.token.functions.approve(c.stake.address, stake - active), account)
            self.send(c.stake.functions.stake(stake - active), account)
        if not self.client.call(c.pool.functions.memberOf(account.address))[0]:
            self.send(c.pool.functions.joinPool(), account)
        return account.address

    # ------------------------------------------------------------------ one job
    def run_job(self, job_id: int, max_tasks: int = 64) -> list[int]:
        """Play job ``job_id``'s tasks in order until it is completed; return the task ids."""
        played = []
        while self.reader.job(job_id).status == JobStatus.ACTIVE:
            if len(played) >= max_tasks:
                raise AssertionError(f"job {job_id} not completed after {max_tasks} tasks")
            played.append(self.run_next(job_id))
        return played

    def run_next(self, job_id: int) -> int:
        """Draw the job's next task and play it to finalization; return its id."""
        drawn = self.draw(job_id)
        task_id, worker = drawn["taskId"], self.keys[drawn["worker"]]
        self.send(self.market.functions.acceptTask(task_id), worker)
        computed = compute_task(self.reader, task_id)
        if computed.is_aggregation:
            cid = self.store.add_bytes(computed.aggregated.to_bytes()).cid
        else:
            interval = self.reader.manifest(job_id).checkpoint_interval
            cid, _ = publish_result(self.store, task_id, computed.training, interval)
        salt = new_salt()
        receipt = self.send(self.market.functions.commitResult(
            task_id, result_commitment(task_id, computed.root, cid, salt, worker.address)), worker)
        auditors = []
        draw = pending_audit_draw(self.client.w3, TaskView.read(self.market, task_id), self.reader.job(job_id))
        if draw is not None:  # the audit draw settles from the hash of a later block
            self.mine(max(1, draw.ticket - self.client.w3.eth.block_number + 1))
            receipt = self.send(self.market.functions.settleAudit(task_id), self.keeper)
            auditors = self.events(receipt, "AuditorDrawn")
        if auditors:
            auditor = self.keys[auditors[0]["auditor"]]
            replayed = compute_task(self.reader, task_id)  # the auditor re-executes from the same inputs
            audit_salt = new_salt()
            self.send(self.market.functions.commitAudit(
                task_id, audit_commitment(task_id, replayed.root, audit_salt, auditor.address)), auditor)
        self.send(self.market.functions.revealResult(task_id, computed.root, cid, salt), worker)
        if auditors:
            self.send(self.market.functions.revealAudit(task_id, replayed.root, audit_salt), auditor)
            self.audited.append(task_id)
        view = TaskView.read(self.market, task_id)
        if view.status != TaskStatus.CHALLENGE_WINDOW:
            raise AssertionError(f"task {task_id} is {view.status.name} after its reveals")
        self.mine(max(1, view.deadline - self.client.w3.eth.block_number + 1))
        self.send(self.market.functions.finalize(task_id), self.keeper)
        return task_id
