"""The deployed stack on a fresh Anvil, as the bench scripts drive it.

Accounts are impersonated (Anvil's autoImpersonate), so a bench can create as many members
as it needs without keys; every transaction is mined at once. Shared by bench/gas.py and
bench/economics.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eth_abi import encode  # noqa: E402
from eth_account import Account  # noqa: E402
from web3 import Web3  # noqa: E402
from web3.exceptions import ContractCustomError  # noqa: E402
from web3.logs import DISCARD  # noqa: E402

from truetrain.chain.artifacts import decode_error  # noqa: E402
from truetrain.chain.client import ChainClient, dev_accounts  # noqa: E402
from truetrain.chain.deploy import StackParams, deploy_stack  # noqa: E402
from truetrain.market.randomness import EPOCH, draw_offers  # noqa: E402

E = 10**18
CAPABILITY = (1, 24_576, 1_000, 3, 2)  # CPU class, 24 GiB, throughput, region 3, 2 at once
PROFILE = ("bafyprofile", "0x" + "ab" * 32)
ROOT, SALT, CID = b"\x11" * 32, b"\x22" * 32, "bafyresultcheckpoint"
ROLE_WORKER, ROLE_VERIFIER, ROLE_SUBMITTER = 1, 2, 4


def commitment(task_id: int, worker: str, root: bytes = ROOT) -> bytes:
    """JobMarket's result commitment: keccak(taskId, root, cid, salt, worker)."""
    return Web3.keccak(encode(["uint256", "bytes32", "string", "bytes32", "address"], [task_id, root, CID, SALT, worker]))


def audit_commitment(task_id: int, auditor: str, root: bytes) -> bytes:
    """JobMarket's audit commitment: keccak(taskId, root, salt, auditor)."""
    return Web3.keccak(encode(["uint256", "bytes32", "bytes32", "address"], [task_id, root, SALT, auditor]))


class Bench:
    """The deployed stack plus helpers that send from impersonated devnet accounts."""

    def __init__(self, url: str, params: StackParams):
        self.client = ChainClient(url)
        self.w3 = self.client.w3
        self.w3.provider.make_request("anvil_autoImpersonateAccount", [True])
        self.deployer = dev_accounts(1)[0]
        report = deploy_stack(self.client, self.deployer, params)
        c = self.contracts = report.deployment.contracts
        self.token = self.client.contract("TrainToken", c["token"].address)
        self.registry = self.client.contract("IdentityRegistry", c["registry"].address)
        self.stake = self.client.contract("StakeManager", c["stake"].address)
        self.pool = self.client.contract("WorkerPool", c["pool"].address)
        self.market = self.client.contract("JobMarket", c["market"].address)
        self.game = self.client.contract("DisputeGame", c["game"].address)

    # ------------------------------------------------------------ transactions and blocks

    def send(self, call, sender: str, wait: bool = True) -> int:
        """Send ``call`` from ``sender``; return its gas (0 when not waited for)."""
        if wait:
            return self.receipt(call, sender)["gasUsed"]
        self._send(call, sender)
        return 0

    def receipt(self, call, sender: str) -> dict:
        receipt = self.w3.eth.wait_for_transaction_receipt(self._send(call, sender))
        if receipt["status"] != 1:
            raise RuntimeError(f"transaction reverted: {call.fn_name} from {sender}: {self._why(call, sender)}")
        return receipt

    def _why(self, call, sender: str) -> str:
        """The custom error ``call`` reverts with now (replayed as a call), for the message."""
        try:
            call.call({"from": sender, "gas": 3_000_000})
        except ContractCustomError as exc:
            name, args = decode_error(bytes.fromhex(str(exc.data)[2:]))
            return f"{name}{tuple(args)}"
        except Exception as exc:  # noqa: BLE001 - a message, whatever the node says
            return str(exc)
        return "out of gas, or the state moved since"

    def _send(self, call, sender: str):
        return call.transact({"from": sender, "gas": 3_000_000})

    def events(self, receipt: dict, contract, name: str) -> list[dict]:
        return [e["args"] for e in getattr(contract.events, name)().process_receipt(receipt, errors=DISCARD)]

    @property
    def height(self) -> int:
        return self.w3.eth.block_number

    def mine(self, blocks: int) -> None:
        if blocks > 0:
            self.w3.provider.make_request("anvil_mine", [hex(blocks)])

    def mine_past(self, block: int) -> None:
        """Mine until the chain is past ``block`` (a draw's ticket is readable from block + 1)."""
        self.mine(block + 1 - self.height)

    def unheld(self) -> None:
        """Mine to the first blocks of an epoch where neither pool tree is held (a pending
        offer or verifier draw holds its tree to the end of its epoch, WorkerPool.holdOffers,
        holdDraws), so that stake and pool moves take effect at once instead of waiting for a
        refresh."""
        pool = self.pool.functions
        while pool.workersHeld().call() or pool.verifiersHeld().call():
            self.mine(EPOCH - self.height % EPOCH)

    def refresh_deferred(self, members) -> None:
        """Refresh the pool weights of ``members`` that a hold deferred (as their daemons do once
        no tree is held): a hold may begin after a move was sent (a ticket asked for earlier
        lies in a later block), so a batch of pool moves can end with some of them waiting."""
        self.unheld()
        deferred = self.pool.functions.WORKER_DEFERRED().call() | self.pool.functions.VERIFIER_DEFERRED().call()
        for member in members:
            if self.pool.functions.memberOf(member).call()[2] & deferred:
                self.send(self.pool.functions.refresh(member), self.deployer.address)

    def snapshot(self) -> str:
        return self.w3.provider.make_request("evm_snapshot", [])["result"]

    def revert_to(self, snapshot: str) -> None:
        self.w3.provider.make_request("evm_revert", [snapshot])

    # ------------------------------------------------------------ members and jobs

    def new_account(self, roles: int, stake: int = 5_000 * E, capability: tuple = CAPABILITY,
                    join: bool = True) -> str:
        """A registered member with ``stake`` staked, in the pool (``join``)."""
        address = Account.create().address
        self.w3.provider.make_request("anvil_setBalance", [address, hex(10 * E)])
        self.send(self.registry.functions.register(roles, *PROFILE, capability), address, wait=False)
        self.send(self.token.functions.mint(address, stake), self.deployer.address, wait=False)
        self.send(self.token.functions.approve(self.stake.address, 2**256 - 1), address, wait=False)
        self.send(self.stake.functions.stake(stake), address, wait=not join)
        if join:
            self.unheld()
            self.send(self.pool.functions.joinPool(), address)
        return address

    def new_submitter(self, tokens: int = 10**9 * E, roles: int = ROLE_SUBMITTER) -> str:
        address = Account.create().address
        self.w3.provider.make_request("anvil_setBalance", [address, hex(10 * E)])
        self.send(self.registry.functions.register(roles, *PROFILE, CAPABILITY), address, wait=False)
        self.send(self.token.functions.mint(address, tokens), self.deployer.address, wait=False)
        self.send(self.token.functions.approve(self.market.address, 2**256 - 1), address)
        return address

    def job_params(self, shards: int, audit_bps: int = 0, leaves: int = 7, challenge_window: int = 50,
                   reward: int = 10 * E, audit_fee: int = 2 * E, collateral: int = 20 * E,
                   windows: tuple[int, int, int] = (5, 50, 20), rounds: int = 2, stages: int = 1) -> tuple:
        accept, compute, reveal = windows
        return ("bafymanifest", "0x" + "aa" * 32, "bafyinit", "0x" + "bb" * 32, shards, rounds,
                reward, audit_fee, collateral, accept, compute, reveal, challenge_window, 1, 16_000, 0, audit_bps, 100,
                self.height + 100_000, leaves, 0, 0, stages)

    def create_job(self, submitter: str, shards: int, audit_bps: int = 0, **terms) -> tuple[int, int]:
        params = self.job_params(shards, audit_bps, **terms)
        job_id = self.market.functions.createJob(params).call({"from": submitter})
        return job_id, self.send(self.market.functions.createJob(params), submitter)

    def draw(self, job_id: int, caller: str) -> tuple[int, str, int]:
        """Offer the job's next task (asking for its offer ticket and mining past it first);
        the gas is the drawing call's."""
        receipt = self.draw_offers(job_id, caller)
        event = self.events(receipt, self.market, "TaskDrawn")[0]
        return event["taskId"], event["worker"], receipt["gasUsed"]

    def draw_offers(self, job_id: int, caller: str, count: int = 1):
        """The receipt of the call drawing up to ``count`` of the job's tasks from its offer
        ticket (truetrain.market.randomness.draw_offers, mining past the ticket). The gas of
        the call that asked for the ticket, if one did, is left in ``ask_gas`` (else 0)."""
        receipts = []

        def send(call):
            receipts.append(self.receipt(call, caller))
            return receipts[-1]

        receipt = draw_offers(self.market, job_id, send, self.mine_past, lambda: self.height, count)
        self.ask_gas = receipts[0]["gasUsed"] if len(receipts) == 2 else 0
        return receipt

    def task(self, task_id: int) -> dict:
        """IJobMarket.Task by field name."""
        names = ("worker", "status", "deadline", "flags", "auditor", "result", "audit")
        return dict(zip(names, self.market.functions.taskOf(task_id).call()))

    def wealth(self, account: str) -> int:
        """Everything ``account`` holds in the stack: wallet, stake (active + unbonding) and
        the credits it can withdraw from the StakeManager and the market."""
        active, _, unbonding, *_ = self.stake.functions.stakeOf(account).call()
        return (self.token.functions.balanceOf(account).call() + active + unbonding
                + self.stake.functions.credits(account).call() + self.market.functions.credits(account).call())
