"""A private market for daemon tests: Anvil mining a block a second (and on every
transaction), IPFS dev nodes, the deployed contracts, funded dev accounts, and daemons
started as separate processes. Everything started is stopped by pid at teardown."""

from __future__ import annotations

import time
from pathlib import Path

from truetrain.chain.client import ChainClient, dev_account
from truetrain.chain.deploy import StackParams, deploy_stack
from truetrain.chain.devnet import DEV_CHAIN_ID, Devnet, free_port, start_anvil
from truetrain.chain.handles import connect_deployment
from truetrain.demo.processes import DaemonProcess, start_daemon, wait_for_log
from truetrain.devnet import fund_dev_accounts
from truetrain.market import ROLE_SUBMITTER, JobStatus, MarketReader, TaskView, decode_task_id
from truetrain.market.jobs import JobTerms, create_job, ensure_registered, publish_manifest, shards_of
from truetrain.market.views import JobView
from truetrain.storage import StorageClient, StorageSettings, start_devnode, stop_devnode
from truetrain.training import build_manifest, publish_dataset

TOKEN = 10**18
SUBMITTER = 1


# The referees' commit and reveal windows and each party's dispute clock are waited out only
# by a party that fails; on a loaded 2-core machine (six test lanes) 30 blocks once passed
# before an honest referee had recomputed its step, so it was penalised as silent.
PARAMS = StackParams(unbonding_delay_blocks=5, dispute_clock_blocks=60, commit_window_blocks=120,
                     reveal_window_blocks=120)


class MarketNet:
    """``anvil_state``: Anvil keeps its chain in this file across :meth:`restart_anvil`;
    ``genesis_timestamp`` fixes its genesis block (a fresh chain with the same one has the
    same genesis hash)."""

    def __init__(self, home: Path, ipfs_nodes: int = 1, params: StackParams = PARAMS, *,
                 anvil_state: Path | None = None, genesis_timestamp: int | None = None):
        self.home = home
        self.anvil_state, self.genesis_timestamp = anvil_state, genesis_timestamp
        self.anvil = self._start_anvil(free_port(), state_path=anvil_state)
        self.nodes = []
        self.daemons: list[DaemonProcess] = []
        try:
            for i in range(ipfs_nodes):
                self.nodes.append(start_devnode(home / f"ipfs-{i}", free_port()))
            if ipfs_nodes > 1:
                for node in self.nodes[1:]:
                    with self.store(0) as first:
                        first.connect(node.swarm_addr)
            self.deployments = home / "deployments"
            client = ChainClient(self.anvil.url)
            report = deploy_stack(client, dev_account(0), params, folder=self.deployments)
            fund_dev_accounts(client, report.deployment.contracts["token"].address)
            self.contracts = connect_deployment(self.anvil.url, self.deployments)
        except BaseException:
            self.close()
            raise

    @property
    def rpc(self) -> str:
        return self.anvil.url

    def _start_anvil(self, port: int, **options) -> Devnet:
        return start_anvil(port, block_time=0.5, mixed_mining=True, log_path=self.home / "anvil.log",
                           genesis_timestamp=self.genesis_timestamp, **options)

    def restart_anvil(self, *, fresh: bool = False, chain_id: int = DEV_CHAIN_ID) -> None:
        """Stop Anvil (it writes its chain to ``anvil_state``) and start another on the same
        port: the same chain again from that file, or with ``fresh`` a new chain of
        ``chain_id`` without the deployment (same genesis hash for the same chain id when
        ``genesis_timestamp`` is set)."""
        port = self.anvil.port
        self.anvil.stop()
        self.anvil = self._start_anvil(port, chain_id=chain_id, state_path=None if fresh else self.anvil_state)

    def store(self, node: int = 0) -> StorageClient:
        return StorageClient(StorageSettings(api_addr=self.nodes[node].api_addr, timeout_s=20.0))

    def start(self, role: str, account: int, *, node: int = 0, extra: list[str] | None = None,
              env: dict | None = None, wait: bool = True, ipfs: str | None = None) -> DaemonProcess:
        """Start a daemon on IPFS node ``node`` (or the API at ``ipfs``, e.g. a faulty proxy)."""
        # Polling faster than the devnet mines (every 0.5 s) only adds ticks that see no new block.
        flags = ["--stake", "500", "--poll-interval", "0.5", "--device", "cpu", *(extra or [])]
        if role == "verifier":
            flags += ["--max-concurrent", "4"]
        process = start_daemon(role, account, dev_account(account).address, rpc=self.rpc,
                               ipfs=ipfs or self.nodes[node].api_addr, home=self.home, deployments=self.deployments,
                               extra=flags, env=env)
        self.daemons.append(process)
        if wait:
            assert wait_for_log(process, f"{role} running", timeout=90), process.log_text()[-3000:]
            log = process.log_text()
            # the exact C kernels are built and self-tested before the daemon takes part,
            # never inside its first task's compute window
            kernels = log.find("exact C kernels on cpu: exact on every test vector")
            assert 0 <= kernels < log.find(f"{role} running"), log[-3000:]
        return process

    def fund(self, *accounts: int, amount: int = 10_000 * TOKEN) -> None:
        """Mint TRAIN to dev accounts beyond the ones the devnet funds."""
        client, token = self.contracts.client, self.contracts.token
        for index in accounts:
            client.transact(token.functions.mint(dev_account(index).address, amount), dev_account(0))

    def submit(self, *, shards: int, rounds: int, steps: int, terms: JobTerms, node: int = 0,
               interval: int | None = None, build=None, bind: bool = True):
        """Publish a digits job (MLP 64-128-10, SGD), or what ``build(store)`` makes, and
        create it, binding its program when it can (``bind``; an unbound job's disputes end
        with a committee); return (job id, manifest, escrow)."""
        with self.store(node) as store:
            if build is not None:
                manifest = build(store)
            else:
                data = publish_dataset(store, "digits", num_shards=shards, seed=3)
                manifest = build_manifest(name="digits-test", seed=3, numeric_mode="repro",
                                          model={"kind": "mlp", "widths": [64, 128, 10]},
                                          optimizer={"kind": "sgd", "lr": 0.1, "momentum": 0.9},
                                          batch_size=32, steps_per_task=steps,
                                          checkpoint_interval=interval or (steps // 2 if steps % 2 == 0 else steps),
                                          rounds=rounds, **data)
            cid = publish_manifest(store, manifest)
            submitter = dev_account(SUBMITTER)
            ensure_registered(self.contracts, store, submitter, ROLE_SUBMITTER)
            job_id, escrow = create_job(self.contracts, submitter, manifest, cid, terms,
                                        shards_of(store, manifest) if bind else None)
        return job_id, manifest, escrow

    def wait_job(self, job_id: int, timeout: float = 480.0) -> JobStatus:
        # Generous: every task waits out its challenge window, so a 3-round digits job with
        # 70-block windows needs 3 x 2 x 70 blocks (at most 210 s at a block per 0.5 s) however
        # fast the machine; a CI run took the old 240 s. Only a job that is stuck waits it out.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.reader_view(job_id)
            if status != JobStatus.ACTIVE:
                return status
            time.sleep(0.5)
        raise AssertionError(f"job {job_id} still active after {timeout:.0f} s; logs in {self.home / 'logs'}\n"
                             + self.diagnosis(job_id))

    def diagnosis(self, job_id: int) -> str:
        """Where a job stands (each of its tasks' latest state) and what each daemon last
        warned of: what a failing test prints, so a CI log alone says why."""
        w3, market = self.contracts.w3, self.contracts.market
        job = JobView.read(market, job_id)
        lines = [f"at block {w3.eth.block_number}: job {job.status.name}, round {job.current_round}, "
                 f"next index {job.next_index}"]
        seen = []
        for entry in w3.eth.get_logs({"address": market.address, "fromBlock": 0}):
            task = int.from_bytes(entry["topics"][1], "big") if len(entry["topics"]) > 1 else 0
            if decode_task_id(task)[0] == job_id and task not in seen:
                seen.append(task)
        for task in seen:
            view = TaskView.read(market, task)
            lines.append(f"  task r{view.round} i{view.index}: {view.status.name} deadline {view.deadline} "
                         f"worker {view.worker[:10]} flags {view.flags}")
        for daemon in self.daemons:
            text = daemon.log_text().splitlines()
            warned = [ln for ln in text if '"level": "warning"' in ln or '"level": "error"' in ln][-4:]
            alive = "running" if daemon.proc.poll() is None else f"exited {daemon.proc.returncode}"
            lines.append(f"  {daemon.role}-{daemon.account} ({alive}), last: {text[-1][:300] if text else '-'}")
            lines += [f"    {ln[:300]}" for ln in warned]
        return "\n".join(lines)

    def reader_view(self, job_id: int) -> JobStatus:
        return JobStatus(self.contracts.market.functions.jobOf(job_id).call()[1])

    def reader(self, store) -> MarketReader:
        return MarketReader(self.contracts, store)

    def events(self, name: str, **filters) -> list:
        return getattr(self.contracts.market.events, name)().get_logs(from_block=0, argument_filters=filters or None)

    def game_events(self, name: str, **filters) -> list:
        return getattr(self.contracts.game.events, name)().get_logs(from_block=0, argument_filters=filters or None)

    def wait_for(self, what: str, condition, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not after {timeout:.0f} s; logs in {self.home / 'logs'}")
            time.sleep(0.5)

    def restart_node(self, index: int = 0) -> None:
        """Stop IPFS node ``index`` and start it again on the same folder and port."""
        node = self.nodes[index]
        stop_devnode(node.pid)
        self.nodes[index] = start_devnode(self.home / f"ipfs-{index}", int(node.api_addr.rsplit("/", 1)[1]))

    def transactions_from(self, address: str) -> list[tuple[str, int | None, int]]:
        """(function name, first argument if any, receipt status) of every transaction ``address`` sent."""
        w3, market = self.contracts.w3, self.contracts.market
        sent = []
        for number in range(w3.eth.block_number + 1):
            for tx in w3.eth.get_block(number, full_transactions=True)["transactions"]:
                if tx["from"] != address:
                    continue
                status = w3.eth.get_transaction_receipt(tx["hash"])["status"]
                if tx["to"] == market.address:
                    function, args = market.decode_function_input(tx["input"])
                    first = next(iter(args.values()), None)
                    sent.append((function.fn_name, first if isinstance(first, int) else None, status))
                else:
                    sent.append((tx["to"], None, status))
        return sent

    def __enter__(self) -> MarketNet:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for process in self.daemons:
            process.kill()
        for node in self.nodes:
            stop_devnode(node.pid)
        self.anvil.stop()
