"""`make demo` (issue 3's scripted version): one job's whole life on a fresh local Anvil.

Scripted accounts play every role in this one process: a submitter, three workers and a
verifier. Everything else is real: the compiled contracts on a fresh Anvil, an IPFS dev
node holding the dataset, manifest and checkpoints, and repro-mode torch training whose
Merkle roots are what the workers commit and the auditor re-computes. The long-running
worker and verifier daemons replace the scripted roles in a later issue.
"""

from __future__ import annotations

import secrets
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eth_abi import encode  # noqa: E402
from web3 import Web3  # noqa: E402
from web3.logs import DISCARD  # noqa: E402

from truetrain.chain.client import ChainClient, dev_accounts  # noqa: E402
from truetrain.chain.deploy import StackParams, deploy_stack  # noqa: E402
from truetrain.chain.devnet import free_port, start_anvil  # noqa: E402
from truetrain.errors import TruetrainError  # noqa: E402
from truetrain.hardware import detect  # noqa: E402
from truetrain.storage import StorageClient, StorageSettings, start_devnode, stop_devnode  # noqa: E402
from truetrain.training import (Contribution, aggregate, build_manifest, evaluate,  # noqa: E402
                                load_checkpoint, publish_dataset, run_task)

E = 10**18
SHARDS, ROUNDS = 3, 2
REWARD, AUDIT_FEE, COLLATERAL = 10 * E, 2 * E, 20 * E
MAX_BYTES = 64 * 1024 * 1024
ROLE_WORKER, ROLE_VERIFIER, ROLE_SUBMITTER = 1, 2, 4


def tokens(wei: int) -> str:
    return f"{wei / E:,.2f}"


class Demo:
    def __init__(self, chain_url: str, storage: StorageClient):
        self.client = ChainClient(chain_url)
        self.storage = storage
        accounts = dev_accounts(6)
        self.deployer, self.submitter, *self.workers, self.verifier = accounts
        self.by_address = {a.address: a for a in accounts}
        self.names = {self.deployer.address: "deployer", self.submitter.address: "submitter",
                      self.verifier.address: "verifier"}
        self.names.update({w.address: f"worker-{i + 1}" for i, w in enumerate(self.workers)})

    def step(self, text: str) -> None:
        print(f"  {text}", flush=True)

    def send(self, call, account):
        # Draws read prevrandao, so the mined path can differ from the estimated one: pad gas.
        return self.client.transact(call, account, gas=3_000_000)

    def events(self, receipt, contract, name: str) -> list[dict]:
        return [e["args"] for e in getattr(contract.events, name)().process_receipt(receipt.raw, errors=DISCARD)]

    # ------------------------------------------------------------------ setup
    def deploy(self) -> None:
        report = deploy_stack(self.client, self.deployer, StackParams(unbonding_delay_blocks=5))
        c = report.deployment.contracts
        handle = self.client.contract
        self.token = handle("TrainToken", c["token"].address)
        self.registry = handle("IdentityRegistry", c["registry"].address)
        self.stake = handle("StakeManager", c["stake"].address)
        self.pool = handle("WorkerPool", c["pool"].address)
        self.market = handle("JobMarket", c["market"].address)
        for key in report.deployed:
            self.step(f"deployed {c[key].name:17} {c[key].address}")

    def identities(self) -> None:
        profile = detect()
        stored = self.storage.add_bytes(profile.canonical_json())
        capability = (profile.device_class, profile.memory_mib, profile.throughput_gflops, 1, 2)
        participants = [(self.submitter, ROLE_SUBMITTER), (self.verifier, ROLE_VERIFIER)]
        participants += [(w, ROLE_WORKER) for w in self.workers]
        for account, roles in participants:
            self.send(self.token.functions.faucet(), account)
            self.send(self.registry.functions.register(roles, stored.cid, stored.hash, capability), account)
            if roles != ROLE_SUBMITTER:
                self.send(self.token.functions.approve(self.stake.address, 2**256 - 1), account)
                self.send(self.stake.functions.stake(500 * E), account)
                self.send(self.pool.functions.joinPool(), account)
        self.step(f"hardware profile {stored.cid}: {profile.device_name}, {profile.memory_mib:,} MiB, "
                  f"{profile.throughput_gflops} GFLOP/s")
        self.step("submitter, 3 workers and 1 verifier registered; each drew 1,000 TRAIN from the "
                  "faucet; workers and verifier staked 500 TRAIN and joined the pool")

    def create_job(self) -> int:
        data = publish_dataset(self.storage, "digits", num_shards=SHARDS, seed=3)
        self.manifest = build_manifest(
            name="digits-demo", seed=3, numeric_mode="repro",
            model={"kind": "mlp", "widths": [64, 128, 10]},
            optimizer={"kind": "sgd", "lr": 0.1, "momentum": 0.9},
            batch_size=32, steps_per_task=60, checkpoint_interval=20, rounds=ROUNDS, **data,
        )
        stored = self.storage.add_bytes(self.manifest.to_bytes())
        self.step(f"digits split into {SHARDS} shards on IPFS; manifest {stored.cid}")
        params = (stored.cid, stored.hash, "", b"\x00" * 32, SHARDS, ROUNDS, REWARD, AUDIT_FEE, COLLATERAL,
                  10, 200, 50, 3, 1, 1_024, 0, 5_000, 60 * 32, self.client.w3.eth.block_number + 100_000)
        escrow = (SHARDS + 1) * ROUNDS * (REWARD + AUDIT_FEE)
        self.send(self.token.functions.approve(self.market.address, escrow), self.submitter)
        receipt = self.send(self.market.functions.createJob(params), self.submitter)
        job_id = self.events(receipt, self.market, "JobCreated")[0]["jobId"]
        self.step(f"job {job_id} created: {SHARDS} shards x {ROUNDS} rounds (+1 aggregation task a round), "
                  f"escrow {tokens(escrow)} TRAIN pulled from the submitter")
        return job_id

    # ------------------------------------------------------------------ one task
    def run_one(self, job_id: int, round_index: int, index: int, results: list) -> None:
        receipt = self.send(self.market.functions.drawTask(job_id), self.submitter)
        drawn = self.events(receipt, self.market, "TaskDrawn")[0]
        task_id, worker = drawn["taskId"], self.by_address[drawn["worker"]]
        name = self.names[worker.address]
        self.send(self.market.functions.acceptTask(task_id), worker)
        job = self.job(job_id)
        if index < SHARDS:
            kind = f"shard {index}"
            root, cid, compute = self.train(job, round_index, index, results)
        else:
            kind = "aggregation"
            root, cid, compute = self.aggregate(round_index, results)
        salt = secrets.token_bytes(32)
        commitment = Web3.keccak(encode(["bytes32", "string", "bytes32", "address"], [root, cid, salt, worker.address]))
        receipt = self.send(self.market.functions.commitResult(task_id, commitment), worker)
        audit = self.events(receipt, self.market, "AuditorDrawn")
        audit_salt = secrets.token_bytes(32)
        if audit:
            audit_root = self.audit(job, round_index, index, results)
            self.send(self.market.functions.commitAudit(task_id, Web3.keccak(
                encode(["bytes32", "bytes32", "address"], [audit_root, audit_salt, self.verifier.address]))), self.verifier)
        self.send(self.market.functions.revealResult(task_id, root, cid, salt), worker)
        if audit:
            self.send(self.market.functions.revealAudit(task_id, audit_root, audit_salt), self.verifier)
        self.client.w3.provider.make_request("anvil_mine", [hex(4)])  # let the challenge window pass
        self.send(self.market.functions.finalize(task_id), self.submitter)
        if index == SHARDS:
            results.clear()  # the round is closed: the next one starts from the aggregate
        audited = "audited by verifier: match" if audit else "no audit drawn"
        self.step(f"round {round_index} {kind:11} -> {name}: {compute}; root 0x{root.hex()[:12]}…; {audited}; "
                  f"finalized, +{tokens(REWARD)} TRAIN")

    def job(self, job_id: int) -> dict:
        """``jobOf(job_id)`` as a dict keyed by the Job struct's field names."""
        abi = next(f for f in self.market.abi if f.get("name") == "jobOf")
        names = [c["name"] for c in abi["outputs"][0]["components"]]
        return dict(zip(names, self.client.call(self.market.functions.jobOf(job_id))))

    def fetch_start(self, job: dict) -> bytes | None:
        cid, expected = job["checkpointCid"], job["checkpointHash"]
        return self.storage.fetch(cid, expected, max_size=MAX_BYTES) if cid else None

    def train(self, job, round_index: int, index: int, results: list):
        ref = self.manifest.shards[index]
        shard = self.storage.fetch(ref.cid, ref.hash, max_size=MAX_BYTES)
        start = time.perf_counter()
        result = run_task(self.manifest, shard, self.fetch_start(job), index, round_index)
        final = self.storage.add_bytes(result.checkpoints[-1])
        for blob in result.checkpoints[:-1]:
            self.storage.add_bytes(blob)
        results.append(result)
        summary = f"{self.manifest.steps_per_task} steps in {time.perf_counter() - start:.1f} s"
        return result.merkle_root, final.cid, summary

    def aggregate(self, round_index: int, results: list):
        merged = aggregate(self.manifest, round_index, results)
        stored = self.storage.add_bytes(merged.to_bytes())
        self.global_checkpoint = (stored.cid, stored.hash)
        return merged.hash(), stored.cid, f"weighted average of {SHARDS} results"

    def audit(self, job, round_index: int, index: int, results: list) -> bytes:
        """The verifier re-executes the task from the same committed inputs."""
        if index == SHARDS:
            return aggregate(self.manifest, round_index, results).hash()
        ref = self.manifest.shards[index]
        shard = self.storage.fetch(ref.cid, ref.hash, max_size=MAX_BYTES)
        return run_task(self.manifest, shard, self.fetch_start(job), index, round_index).merkle_root

    # ------------------------------------------------------------------ the end
    def settle(self) -> None:
        for account in [self.submitter, self.verifier, *self.workers]:
            if self.client.call(self.market.functions.credits(account.address)) > 0:
                self.send(self.market.functions.withdraw(), account)

    def balances(self) -> None:
        rows = [(self.names[a.address], a.address) for a in [self.submitter, *self.workers, self.verifier]]
        print(f"\n  {'account':10} {'wallet':>10} {'staked':>8} {'locked':>7} {'credits':>8}")
        for name, address in rows:
            info = self.client.call(self.stake.functions.stakeOf(address))
            credits = self.client.call(self.market.functions.credits(address))
            wallet = self.client.call(self.token.functions.balanceOf(address))
            print(f"  {name:10} {tokens(wallet):>10} {tokens(info[0]):>8} {tokens(info[1]):>7} {tokens(credits):>8}")
        minted = self.client.call(self.token.functions.totalMinted())
        burned = self.client.call(self.token.functions.totalBurned())
        held = sum(self.client.call(self.token.functions.balanceOf(a)) for _, a in rows)
        held += sum(self.client.call(self.token.functions.balanceOf(c.address)) for c in (self.stake, self.market))
        escrow = self.client.call(self.market.functions.totalEscrow())
        print(f"\n  minted {tokens(minted)} = held {tokens(held)} + burned {tokens(burned)}"
              f"  ({'conserved' if minted == held + burned else 'NOT CONSERVED'}); escrow left {tokens(escrow)}")
        if minted != held + burned or escrow != 0:
            raise SystemExit(1)


def main() -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="truetrain-demo-") as tmp:
        devnet = start_anvil(free_port(), log_path=Path(tmp) / "anvil.log")
        node = start_devnode(Path(tmp) / "ipfs", free_port())
        try:
            print(f"[1/5] fresh Anvil at {devnet.url}, IPFS dev node at {node.api_url}")
            with StorageClient(StorageSettings(api_addr=node.api_addr)) as storage:
                demo = Demo(devnet.url, storage)
                print("[2/5] contracts")
                demo.deploy()
                print("[3/5] identities and stake")
                demo.identities()
                print("[4/5] the job")
                job_id = demo.create_job()
                results: list = []
                for round_index in range(ROUNDS):
                    for index in range(SHARDS + 1):
                        demo.run_one(job_id, round_index, index, results)
                status = demo.job(job_id)["status"]
                cid, expected = demo.global_checkpoint
                model = load_checkpoint(storage.fetch(cid, expected, max_size=MAX_BYTES), expected)
                test = storage.fetch(demo.manifest.test_set.cid, demo.manifest.test_set.hash, max_size=MAX_BYTES)
                accuracy = evaluate(demo.manifest, model, test)
                print(f"[5/5] job {job_id} {'completed' if status == 2 else f'status {status}'}: final model {cid}, "
                      f"held-out accuracy {accuracy:.1%}; everyone withdraws")
                demo.settle()
                demo.balances()
        except TruetrainError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exc.exit_code
        finally:
            stop_devnode(node.pid)
            devnet.stop()
    print(f"\ndone in {time.monotonic() - started:.0f} s; Anvil and the IPFS node are stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
