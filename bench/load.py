"""The market under load on one devnet (``make bench-load``): 20 worker and 3 verifier
processes, 5 digits jobs of 40 tasks each ((9 shards + 1 aggregation) × 4 rounds), run
to completion; then the same with 5 % of the daemons' RPC calls dropped and 2 workers
killed (SIGKILL) mid-run.

Every daemon talks to Anvil through a counting proxy (``truetrain.chain.flaky_rpc``, the
named faulty component: it drops every 20th call in the second run). Printed for each run:
tasks settled per minute, task latency (drawn -> finalized) p50/p95 in blocks and seconds,
gas per settled task (every transaction the daemons sent after the jobs were created,
over the tasks settled), RPC calls per task, the protocol's overhead (a task's accepted ->
committed wall time against training the same task bare, in this process), CPU seconds
and peak memory of each kind of daemon, then the checks: tokens conserved, every task
finalized exactly once, no escrow left. Usage: ``python bench/load.py [--quick] [--model lm]``
(``--quick``: 6 workers, 2 jobs of 3 shards x 2 rounds, for a smoke run; ``--model lm``:
the same with byte-level transformer LM jobs, DiLoCo rounds, instead of digits).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from truetrain.chain.client import ChainClient, dev_account  # noqa: E402
from truetrain.chain.deploy import StackParams, deploy_stack  # noqa: E402
from truetrain.chain.devnet import free_port, start_anvil  # noqa: E402
from truetrain.chain.flaky_rpc import FlakyRpcProxy  # noqa: E402
from truetrain.chain.handles import connect_deployment  # noqa: E402
from truetrain.demo.processes import start_daemon, wait_for_log  # noqa: E402
from truetrain.market import ROLE_SUBMITTER, JobStatus, TaskStatus, decode_task_id  # noqa: E402
from truetrain.market.jobs import JobTerms, create_job, ensure_registered, publish_manifest, shards_of  # noqa: E402
from truetrain.market.views import JobView  # noqa: E402
from truetrain.storage import StorageClient, StorageSettings, start_devnode, stop_devnode  # noqa: E402
from truetrain.training import build_manifest, publish_dataset, run_task  # noqa: E402

from load_phases import print_phases, round_phases  # noqa: E402  (bench/, beside this file)

TOKEN = 10**18
SUBMITTER = 1
#: Windows in blocks of BLOCK_TIME_S: accept 15 s, compute and challenge 22.5 s, reveal 15 s.
TERMS = JobTerms(reward_per_task=10 * TOKEN, audit_fee=2 * TOKEN, worker_collateral=20 * TOKEN,
                 accept_window=60, compute_window=90, reveal_window=60, challenge_window=90, audit_rate_bps=1_000)
#: The devnet's mining (truetrain/devnet.py): a block on the interval only, transactions waiting
#: for it, so a window of N blocks lasts N x BLOCK_TIME_S however busy the chain is. (Mined on
#: every transaction as well, 23 daemons' traffic ran the chain at 10+ blocks a second and an
#: honest daemon's 30-block accept window passed in under 3 s.)
BLOCK_TIME_S = 0.25


@dataclass(frozen=True)
class Shape:
    workers: int
    verifiers: int
    jobs: int
    shards: int
    rounds: int
    steps: int = 20
    model: str = "digits"

    @property
    def tasks(self) -> int:
        return self.jobs * (self.shards + 1) * self.rounds


FULL = Shape(workers=20, verifiers=3, jobs=5, shards=9, rounds=4)
QUICK = Shape(workers=6, verifiers=2, jobs=2, shards=3, rounds=2)


class Devnet:
    """Anvil (a block every BLOCK_TIME_S, transactions waiting for it) behind the counting
    proxy, an IPFS dev node, the contracts, funded accounts 1..N."""

    def __init__(self, home: Path, accounts: int, drop_every: int):
        self.home = home
        self.anvil = start_anvil(free_port(), accounts=accounts, block_time=BLOCK_TIME_S,
                                 log_path=home / "anvil.log")
        self.proxy = FlakyRpcProxy(self.anvil.url, every=drop_every).__enter__()
        self.node = start_devnode(home / "ipfs", free_port())
        self.deployments = home / "deployments"
        client = ChainClient(self.anvil.url)
        deploy_stack(client, dev_account(0), StackParams(unbonding_delay_blocks=5), folder=self.deployments)
        self.contracts = connect_deployment(self.anvil.url, self.deployments)
        token = self.contracts.token
        for index in range(1, accounts):
            client.transact(token.functions.mint(dev_account(index).address, 100_000 * TOKEN), dev_account(0))

    def store(self) -> StorageClient:
        return StorageClient(StorageSettings(api_addr=self.node.api_addr, timeout_s=30.0))

    def close(self) -> None:
        self.proxy.__exit__(None, None, None)
        stop_devnode(self.node.pid)
        self.anvil.stop()


def start_daemons(net: Devnet, shape: Shape, daemons: dict) -> None:
    """Start the daemons into ``daemons`` (filled as they start, so the caller stops every
    one started even when a later one fails)."""
    roles = [("worker", 2 + i) for i in range(shape.workers)]
    roles += [("verifier", 2 + shape.workers + i) for i in range(shape.verifiers)]
    for role, index in roles:
        extra = ["--stake", "500", "--poll-interval", "0.5", "--device", "cpu"]
        if role == "verifier":
            extra += ["--max-concurrent", "4", "--sample-rate", "0.05"]
            extra += ["--keeper"] if index == 2 + shape.workers else []
        key = None if index < 20 else "0x" + bytes(dev_account(index).key).hex()
        daemons[index] = start_daemon(role, index, dev_account(index).address, rpc=net.proxy.url,
                                      ipfs=net.node.api_addr, home=net.home, deployments=net.deployments,
                                      extra=extra, key=key, env={"OMP_NUM_THREADS": "1"})
    for d in daemons.values():
        if not wait_for_log(d, f"{d.role} running", timeout=300):
            stderr = d.log_path.with_suffix(".stderr")
            detail = d.log_text()[-1500:] + (stderr.read_text()[-1500:] if stderr.exists() else "")
            raise SystemExit(f"{d.name} did not start: {detail}")


#: The LM jobs' model: a byte-level transformer small enough that a loaded CPU worker trains
#: a task in seconds (each text shard is ~20 kB of the Python standard library's source;
#: the jobs share the text and differ in seed).
LM_MODEL = {"kind": "lm", "d_model": 32, "n_layers": 1, "n_heads": 2, "seq_len": 32}


def publish_job(store, shape: Shape, j: int):
    """Job ``j``'s data and manifest: digits (MLP 64-64-10, SGD) or a byte-level LM (AdamW)."""
    common = dict(name=f"load-{j}", seed=10 + j, numeric_mode="repro", steps_per_task=shape.steps,
                  checkpoint_interval=shape.steps // 2, rounds=shape.rounds)
    if shape.model == "lm":
        from truetrain.training.text import demo_corpus, publish_text, split_text

        data = publish_text(store, *split_text(demo_corpus(20_000 * (shape.shards + 1)), shape.shards, 32))
        return build_manifest(model=LM_MODEL, optimizer={"kind": "adamw", "lr": 0.004, "warmup_steps": 4},
                              batch_size=4, outer={"lr": 0.7, "momentum": 0.9}, **common, **data)
    data = publish_dataset(store, "digits", num_shards=shape.shards, seed=10 + j)
    return build_manifest(model={"kind": "mlp", "widths": [64, 64, 10]},
                          optimizer={"kind": "sgd", "lr": 0.1, "momentum": 0.9}, batch_size=32, **common, **data)


def submit_jobs(net: Devnet, shape: Shape):
    manifests = {}
    with net.store() as store:
        submitter = dev_account(SUBMITTER)
        ensure_registered(net.contracts, store, submitter, ROLE_SUBMITTER)
        for j in range(shape.jobs):
            manifest = publish_job(store, shape, j)
            job_id, _ = create_job(net.contracts, submitter, manifest, publish_manifest(store, manifest), TERMS,
                                   shards_of(store, manifest))
            manifests[job_id] = manifest
    return manifests


def events(net: Devnet, contract: str, name: str, start: int) -> list:
    return getattr(getattr(net.contracts, contract).events, name)().get_logs(from_block=start)


def proc_usage(pid: int) -> tuple[float, float]:
    """(CPU seconds, peak resident MiB) of a live process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    hwm = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmHWM"))
    return cpu, int(hwm.split()[1]) / 1024


def bare_training_s(net: Devnet, manifest) -> float:
    with net.store() as store:
        shard = store.fetch(manifest.shards[0].cid, manifest.shards[0].hash, max_size=2**24)
    started = time.monotonic()
    run_task(manifest, shard, None, 0, 0)
    return time.monotonic() - started


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run(shape: Shape, drop_every: int, kill: int, timeout_s: float) -> dict:
    home = Path(tempfile.mkdtemp(prefix="tt-load-"))
    net = Devnet(home, accounts=2 + shape.workers + shape.verifiers, drop_every=drop_every)
    daemons = {}
    try:
        start_daemons(net, shape, daemons)
        w3 = net.contracts.client.w3
        first_block = w3.eth.block_number + 1
        requests_before = net.proxy.requests
        started = time.time()
        manifests = submit_jobs(net, shape)
        market = net.contracts.market.functions
        killed: list[int] = []
        deadline = time.monotonic() + timeout_s
        while True:
            states = [JobStatus(market.jobOf(j).call()[1]) for j in manifests]
            if all(s != JobStatus.ACTIVE for s in states) or time.monotonic() > deadline:
                break
            if kill and not killed and len(events(net, "market", "TaskFinalized", first_block)) >= shape.tasks // 3:
                running = {e["args"]["worker"] for e in events(net, "market", "TaskAccepted", first_block)[-10:]}
                for index, d in daemons.items():
                    if d.role == "worker" and d.address in running and len(killed) < kill:
                        os.kill(d.proc.pid, signal.SIGKILL)
                        killed.append(index)
            time.sleep(2)
        ended = time.time()
        usage = {i: proc_usage(d.proc.pid) for i, d in daemons.items() if d.alive()}
        last_block = w3.eth.block_number
        return measure(net, shape, manifests, daemons, usage, killed, first_block, last_block, started, ended,
                       states, net.proxy.requests - requests_before, net.proxy.dropped)
    finally:
        for d in daemons.values():
            d.terminate()
        net.close()


def measure(net, shape, manifests, daemons, usage, killed, first, last, started, ended, states, rpc, dropped) -> dict:
    w3 = net.contracts.client.w3
    times: dict[int, int] = {}

    def ts(block: int) -> int:
        if block not in times:
            times[block] = w3.eth.get_block(block)["timestamp"]
        return times[block]

    ours = set(manifests)
    finalized = [e for e in events(net, "market", "TaskFinalized", first) if decode_task_id(e["args"]["taskId"])[0] in ours]
    drawn: dict[int, int] = {}
    for e in events(net, "market", "TaskDrawn", first):
        drawn.setdefault(e["args"]["taskId"], e["blockNumber"])
    accepted = {e["args"]["taskId"]: e for e in events(net, "market", "TaskAccepted", first)}
    committed = {e["args"]["taskId"]: e for e in events(net, "market", "ResultCommitted", first)}
    counts: dict[int, int] = {}
    for e in finalized:
        counts[e["args"]["taskId"]] = counts.get(e["args"]["taskId"], 0) + 1
    blocks = [e["blockNumber"] - drawn[e["args"]["taskId"]] for e in finalized]
    seconds = [ts(e["blockNumber"]) - ts(drawn[e["args"]["taskId"]]) for e in finalized]
    work = [ts(committed[t]["blockNumber"]) - ts(a["blockNumber"]) for t, a in accepted.items() if t in committed]
    gas = 0
    senders = {d.address.lower() for d in daemons.values()}
    for number in range(first, last + 1):
        for receipt in w3.eth.get_block_receipts(number):
            if receipt["from"].lower() in senders:
                gas += receipt["gasUsed"]
    token, stake = net.contracts.token.functions, net.contracts.stake.functions
    holders = [dev_account(i).address for i in range(2 + shape.workers + shape.verifiers)]
    holders += [net.contracts.stake.address, net.contracts.market.address, net.contracts.game.address]
    at = {"block_identifier": last}
    held = sum(token.balanceOf(a).call(**at) for a in holders)
    conserved = token.totalMinted().call(**at) == held + token.totalBurned().call(**at)
    left = sum(JobView.read(net.contracts.market, j).escrow for j in manifests)
    minutes = (max(ts(e["blockNumber"]) for e in finalized) - started) / 60 if finalized else float("nan")
    by_role: dict[str, list] = {}
    for index, (cpu, mib) in usage.items():
        by_role.setdefault(daemons[index].role, []).append((cpu, mib))
    return {
        "settled": len(counts), "expected": shape.tasks, "duplicates": sum(c - 1 for c in counts.values()),
        "completed": sum(s == JobStatus.COMPLETED for s in states), "jobs": len(manifests),
        "per_minute": len(counts) / minutes, "wall_s": ended - started,
        "latency_blocks": (pct(blocks, 0.5), pct(blocks, 0.95)), "latency_s": (pct(seconds, 0.5), pct(seconds, 0.95)),
        "gas_per_task": gas / max(1, len(counts)), "rpc_per_task": rpc / max(1, len(counts)), "dropped": dropped,
        "work_s": statistics.median(work) if work else float("nan"),
        "bare_s": bare_training_s(net, next(iter(manifests.values()))),
        "usage": by_role, "killed": killed, "conserved": conserved, "escrow_left": left,
        "methods": net.proxy.methods.most_common(6),
        "timeouts": phases(events(net, "market", "TaskTimedOut", first)), "home": net.home,
        "rounds": round_phases({n: events(net, "market", n, first) for n in
                                ("JobCreated", "TaskDrawn", "ResultRevealed", "RoundAdvanced")},
                               {j: len(m.shards) for j, m in manifests.items()}, ts),
    }


def phases(timed_out: list) -> str:
    """How many tasks timed out, by the phase they were in (e.g. ``12 (OFFERED 9, RUNNING 3)``)."""
    by: dict[str, int] = {}
    for e in timed_out:
        name = TaskStatus(e["args"]["phase"]).name
        by[name] = by.get(name, 0) + 1
    return f"{len(timed_out)}" + (" (" + ", ".join(f"{k} {v}" for k, v in sorted(by.items())) + ")" if by else "")


def report(title: str, r: dict) -> None:
    print(f"\n{title}")
    print(f"  tasks settled              {r['settled']:,} of {r['expected']:,} "
          f"({r['completed']} of {r['jobs']} jobs completed) in {r['wall_s']:.0f} s")
    print(f"  tasks settled per minute   {r['per_minute']:.1f}")
    print(f"  latency drawn -> final     p50 {r['latency_blocks'][0]} blocks / {r['latency_s'][0]} s, "
          f"p95 {r['latency_blocks'][1]} blocks / {r['latency_s'][1]} s")
    print(f"  gas per settled task       {r['gas_per_task']:,.0f} (every daemon transaction after the jobs were created)")
    print(f"  RPC calls per task         {r['rpc_per_task']:,.0f}" + (f" ({r['dropped']:,} dropped)" if r["dropped"] else ""))
    per = max(1, r["settled"])
    print("    by method                " + ", ".join(f"{m} {n / per:.0f}" for m, n in r["methods"]))
    print(f"  accepted -> committed      {r['work_s']:.1f} s median, against {r['bare_s']:.2f} s training it bare")
    print(f"  time-outs                  {r['timeouts']}" + (f"; killed workers {r['killed']}" if r["killed"] else "")
          + f" (logs in {r['home']})")
    for role, rows in sorted(r["usage"].items()):
        cpu, mib = [c for c, _ in rows], [m for _, m in rows]
        print(f"  {role:9} x{len(rows):<3}          CPU {statistics.mean(cpu):.0f} s mean / {max(cpu):.0f} s max, "
              f"peak RSS {statistics.mean(mib):.0f} MiB mean / {max(mib):.0f} MiB max")
    print_phases(r["rounds"])
    ok = r["conserved"] and r["duplicates"] == 0 and r["settled"] == r["expected"] and r["escrow_left"] == 0
    print(f"  checks                     conserved: {'yes' if r['conserved'] else 'NO'}; lost tasks: "
          f"{r['expected'] - r['settled']}; duplicate payouts: {r['duplicates']}; escrow left: "
          f"{r['escrow_left'] / TOKEN:g} TRAIN  -> {'ok' if ok else 'FAILED'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--faults-only", action="store_true", help="only the run with faults")
    parser.add_argument("--no-faults", action="store_true", help="only the run without faults")
    parser.add_argument("--timeout", type=float, default=2400.0, help="seconds a run may take")
    parser.add_argument("--model", choices=["digits", "lm"], default="digits",
                        help="the jobs' model: digits MLP, or a byte-level transformer LM (d32, 1 layer)")
    args = parser.parse_args()
    shape = replace(QUICK if args.quick else FULL, model=args.model)
    print(f"{shape.workers} workers, {shape.verifiers} verifiers, {shape.jobs} {shape.model} jobs of "
          f"({shape.shards} shards + 1 aggregation) x {shape.rounds} rounds = {shape.tasks} tasks, "
          f"{shape.steps} steps a task; {os.cpu_count()} CPUs")
    if not args.faults_only:
        report("Run 1: no faults", run(shape, drop_every=0, kill=0, timeout_s=args.timeout))
    if not args.no_faults:
        report("Run 2: 5 % of RPC calls dropped, 2 workers killed mid-run",
               run(shape, drop_every=20, kill=2, timeout_s=args.timeout))


if __name__ == "__main__":
    main()
