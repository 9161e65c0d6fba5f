"""`make demo`: one job through the market, with every role a separate process.

It brings the local devnet up (Anvil mining a block a second plus one per transaction, an
IPFS dev node, the contracts, funded dev accounts) with the web explorer over it, starts
three worker daemons and one verifier daemon, submits a digits MLP job of 3 shards × 3
rounds, follows it live from the chain, downloads and evaluates the final model, stops the
daemons with SIGTERM and prints where every token went. The devnet and the explorer stay
up until ``truetrain devnet down`` (or ``--down``).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from truetrain.chain.client import dev_account
from truetrain.chain.handles import connect_deployment
from truetrain.cli_options import TOKEN, format_tokens
from truetrain.demo.processes import start_daemon, wait_for_log
from truetrain.demo.progress import Progress
from truetrain.demo.windows import machine_load, time_replay, window_blocks
from truetrain.demo.report import balances, print_flows, token_flows
from truetrain.devnet import FUNDED_ACCOUNTS, devnet_down, devnet_explorer, devnet_up
from truetrain.errors import TruetrainError
from truetrain.explorer import DEFAULT_PORT as EXPLORER_PORT
from truetrain.market import ROLE_SUBMITTER, JobStatus, MarketReader
from truetrain.market.jobs import JobTerms, create_job, ensure_registered, publish_manifest, shards_of
from truetrain.paths import DEPLOYMENTS, HOME
from truetrain.storage import StorageClient, StorageSettings
from truetrain.market.outcome import collect_results
from truetrain.training import build_manifest, publish_dataset

SUBMITTER, WORKERS, VERIFIER = 1, (2, 3, 4), 5
SHARDS, ROUNDS = 3, 3
# Only a failing party waits out the accept and reveal windows, so they are wide (30 s and
# 50 s of the devnet's 0.25 s blocks: a loaded machine must not cost an honest worker its
# collateral); every task waits out its challenge window, so that one (and the compute window,
# which the contracts want no longer) is sized from a replay timed on this machine
# (truetrain/demo/windows.py); these are a split job's, whose nine stage runs share the cores.
TERMS = JobTerms(reward_per_task=10 * TOKEN, audit_fee=2 * TOKEN, worker_collateral=40 * TOKEN,
                 accept_window=120, compute_window=200, reveal_window=200, challenge_window=200,
                 audit_rate_bps=5_000)
#: The whole job's limit: ~45 s on a quiet 2-core machine, but under a fresh clone's loaded
#: test suite the daemons took 150 s to start and draw and the job 373 s to reach its last
#: round, so a limit that only a stuck job reaches.
TIME_LIMIT_S = 600


#: The LM demo's model: small enough that a CPU worker trains a task in seconds.
LM_MODEL = {"kind": "lm", "d_model": 64, "n_layers": 2, "n_heads": 4, "seq_len": 64}


def demo_manifest(store, model: str = "mlp", stages: int = 1):
    if model == "lm":
        from truetrain.training.text import demo_corpus, publish_text, split_text

        data = publish_text(store, *split_text(demo_corpus(600_000), SHARDS, LM_MODEL["seq_len"]))
        pipeline = {"stages": stages, "split": "params", "micro_batches": 2} if stages > 1 else None
        return build_manifest(name="stdlib-lm-demo", seed=3, numeric_mode="repro", model=LM_MODEL,
                              optimizer={"kind": "adamw", "lr": 0.004, "warmup_steps": 10},
                              batch_size=8, steps_per_task=30, checkpoint_interval=10, rounds=ROUNDS,
                              outer={"lr": 0.7, "momentum": 0.9}, pipeline=pipeline, **data)
    data = publish_dataset(store, "digits", num_shards=SHARDS, seed=3)
    return build_manifest(name="digits-mlp-demo", seed=3, numeric_mode="repro",
                          model={"kind": "mlp", "widths": [64, 128, 10]},
                          optimizer={"kind": "sgd", "lr": 0.1, "momentum": 0.9},
                          batch_size=32, steps_per_task=60, checkpoint_interval=20, rounds=ROUNDS, **data)


def _where(port: int) -> str:
    return f"127.0.0.1:{port}" if port else "a free port of 127.0.0.1"


def run_demo(port: int = 8545, ipfs_port: int = 5001, out: Path | None = None, down: bool = False,
             model: str = "mlp", explorer_port: int = EXPLORER_PORT, stages: int = 1) -> int:
    started = time.monotonic()
    # A split job draws no audits (a stage's inputs are its neighbours' reveals): the verifier
    # replays every result instead, and each worker holds one stage of each shard's group.
    # Nine stage runs share the 2-core machine at once, exchanging a dozen messages a step:
    # their compute window (and so the challenge window) is wider.
    terms = TERMS if stages == 1 else replace(TERMS, audit_rate_bps=0)
    limit_s = TIME_LIMIT_S * (1 if stages == 1 else 2)
    worker_flags = [] if stages == 1 else ["--max-concurrent", str(SHARDS)]
    verifier_flags = [] if stages == 1 else ["--sample-rate", "1"]
    out = Path(out or HOME / "demo-out")
    print(f"[1/6] devnet: Anvil on {_where(port)}, IPFS dev node on {_where(ipfs_port)}")
    state = devnet_up(port, ipfs_port)
    rpc, ipfs = state["anvil"]["url"], state["ipfs"]["api_addr"]
    print(f"      chain {rpc} (chain id {state['anvil']['chain_id']}), JobMarket {state['contracts']['market']}; "
          f"{'deployed now' if state['deployed'] else 'reused the live deployment'}")
    if ipfs_port == 0:
        print(f"      IPFS dev node API {state['ipfs']['url']}")
    try:
        explorer = devnet_explorer(explorer_port)
    except BaseException:
        if down:
            devnet_down()
        raise
    print(f"      explorer: {explorer} (open it to watch the job; read-only, loopback only)")
    names = {dev_account(SUBMITTER).address: "submitter"}
    daemons = []
    try:
        print("[2/6] daemons: 3 workers and 1 verifier, each its own process (logs in "
              f"{HOME / 'logs'})")
        for account in WORKERS:
            daemons.append(start_daemon("worker", account, dev_account(account).address, rpc=rpc, ipfs=ipfs,
                                        home=HOME, deployments=DEPLOYMENTS,
                                        extra=["--stake", "500", "--poll-interval", "0.3", "--device", "cpu",
                                               *worker_flags]))
        daemons.append(start_daemon("verifier", VERIFIER, dev_account(VERIFIER).address, rpc=rpc, ipfs=ipfs,
                                    home=HOME, deployments=DEPLOYMENTS,
                                    extra=["--stake", "500", "--poll-interval", "0.3", "--device", "cpu",
                                           "--max-concurrent", "4", "--keeper", *verifier_flags]))
        for d in daemons:
            names[d.address] = d.name
        for d in daemons:
            if not wait_for_log(d, f"{d.role} running", timeout=90):
                raise TruetrainError(f"{d.name} did not start; see {d.log_path}")
            print(f"      {d.name:10} pid {d.proc.pid:>7}  {d.address}  staked 500 TRAIN, in the pool")

        contracts = connect_deployment(rpc, DEPLOYMENTS)
        with StorageClient(StorageSettings(api_addr=ipfs)) as store:
            submitter = dev_account(SUBMITTER)
            if model == "lm":
                split = f", split by layers into {stages} stages on different workers" if stages > 1 else ""
                print(f"[3/6] job: 600 kB of the Python standard library's source split into {SHARDS} text shards "
                      f"and a held-out part on IPFS, a byte-level transformer (d64 × 2 layers, context 64{split}), "
                      f"{ROUNDS} DiLoCo rounds of 30 AdamW steps a shard, repro numerics")
            else:
                print(f"[3/6] job: digits (1,797 8×8 images) split into {SHARDS} shards on IPFS, "
                      f"MLP 64-128-10, {ROUNDS} rounds of 60 SGD steps a shard, repro numerics")
            manifest = demo_manifest(store, model, stages)
            if stages == 1:
                sizing = window_blocks(time_replay(manifest, store), machine_load())
                terms = replace(terms, compute_window=sizing.blocks, challenge_window=sizing.blocks)
                print(f"      a task replays here in {sizing.replay_s:.2f} s (machine load {sizing.load:.1f} a core): "
                      f"compute and challenge windows {sizing.blocks} blocks ({sizing.window_s:.1f} s), time for a "
                      "verifier to replay and challenge")
            cid = publish_manifest(store, manifest)
            ensure_registered(contracts, store, submitter, ROLE_SUBMITTER)
            job_id, escrow = create_job(contracts, submitter, manifest, cid, terms, shards_of(store, manifest))
            submitted = time.monotonic()
            print(f"      job {job_id} submitted by {submitter.address}: manifest {cid}, escrow "
                  f"{format_tokens(escrow)} TRAIN = {SHARDS * stages + 1} tasks × {ROUNDS} rounds × "
                  f"({format_tokens(terms.reward_per_task)} reward + {format_tokens(terms.audit_fee)} audit fee)")
            program = contracts.game.functions.programOf(job_id).call()
            if int.from_bytes(program[0], "big"):
                print(f"      its program bound on chain ({program[1]} operators a step, data root "
                      f"0x{bytes(program[4]).hex()[:12]}…): a dispute ends on the chain's own recomputation")

            print("[4/6] live, from the chain's events:")
            progress = Progress(contracts, job_id, names, started)
            deadline = started + limit_s
            while progress.job_status() == JobStatus.ACTIVE:
                progress.poll()
                dead = [d.name for d in daemons if not d.alive()]
                if dead:
                    raise TruetrainError(f"daemon(s) {', '.join(dead)} exited; see {HOME / 'logs'}")
                if time.monotonic() > deadline:
                    raise TruetrainError(f"the job did not finish within {limit_s} s")
                time.sleep(0.25)
            progress.poll()
            job_s = time.monotonic() - submitted

            reader = MarketReader(contracts, store)
            summary = collect_results(reader, job_id, out)
            report_results(job_id, summary, job_s)
            if stages > 1:
                report_stage_traffic(reader, job_id, manifest)

            wait_for_withdrawals(contracts, daemons, timeout=20)
            if contracts.market.functions.credits(submitter.address).call():
                contracts.client.transact(contracts.market.functions.withdraw(), submitter)
        print("[6/6] daemons stopped with SIGTERM: " + ", ".join(f"{d.name} exit {d.terminate()}" for d in daemons))
        rows, totals = token_flows(contracts, job_id, names)
        print("\n  token flows of the job")
        print_flows(rows)
        accounts = {v: k for k, v in names.items()}
        table, conserved, (minted, held, burned) = balances(
            contracts, accounts, [dev_account(i).address for i in range(FUNDED_ACCOUNTS + 1)])
        print(f"\n  {'account':10} {'wallet':>10} {'staked':>8} {'credits':>8}")
        for name, wallet, staked, credits in table:
            print(f"  {name:10} {format_tokens(wallet):>10} {format_tokens(staked):>8} {format_tokens(credits):>8}")
        print(f"\n  minted {format_tokens(minted)} = held {format_tokens(held)} + burned {format_tokens(burned)} "
              f"({'conserved' if conserved else 'NOT CONSERVED'}); escrow left {format_tokens(totals['left'])}")
        if not conserved or totals["left"] != 0:
            return 1
    finally:
        for d in daemons:
            d.terminate()
        if down:
            devnet_down()
    took = time.monotonic() - started
    print(f"\ndone in {took:.0f} s.", "Devnet stopped." if down else
          f"The devnet is still up and the explorer serves it at {explorer}: try also `truetrain job status 1` "
          "or `truetrain identity show <address>`; stop everything with `truetrain devnet down`.")
    return 0


def report_results(job_id: int, summary: dict, job_s: float) -> None:
    files = summary["files"]
    head = f"[5/6] job {job_id} completed {job_s:.1f} s after its submission: final model {summary['final_checkpoint']['cid']} (hash verified), "
    if "test_bits_per_byte" in summary:
        print(head + f"held-out {summary['test_bits_per_byte']:.3f} bits per byte on {summary['test_samples']:,} "
                     f"bytes of text")
        print("      bits per byte by round: " + ", ".join(f"{r['test_bits_per_byte']:.3f}" for r in summary["per_round"]))
    else:
        print(head + f"held-out accuracy {summary['test_accuracy']:.1%} on {summary['test_samples']} digits")
        print("      accuracy by round: " + ", ".join(f"{r['test_accuracy']:.1%}" for r in summary["per_round"]))
    print(f"      model {files['model']}, loss plot {files['plot']}, summary {files['summary']}")


def report_stage_traffic(reader, job_id: int, manifest) -> None:
    """What the stages sent each other, from their published bundles (the finalized runs)."""
    from truetrain.market import encode_task_id

    stages = manifest.pipeline.stages
    moved: dict[str, int] = {}
    for r in range(manifest.rounds):
        for index in range(len(manifest.shards) * stages):
            for kind, n in reader.stage_result(encode_task_id(job_id, r, index)).metrics.get("moved", {}).items():
                moved[kind] = moved.get(kind, 0) + n
    steps = manifest.rounds * len(manifest.shards) * manifest.steps_per_task
    detail = ", ".join(f"{k} {v / steps / 1024:,.1f} KiB" for k, v in sorted(moved.items()))
    print(f"      a shard's {stages} stages sent between stages {sum(moved.values()) / steps / 1024:,.1f} KiB a step "
          f"({detail}), through IPFS and the workers' mailboxes")


def wait_for_withdrawals(contracts, daemons, timeout: float) -> None:
    """Give the daemons a moment to pull their earnings before they are stopped."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(contracts.market.functions.credits(d.address).call() == 0 for d in daemons):
            return
        time.sleep(0.5)
