"""The submitter's and staker's commands (`job`, `identity`, `token`, `worker`) against one
real devnet (Anvil + IPFS dev node), with exact messages and exit codes.

Every refusal is checked to send nothing: the refused account's nonce does not move.
Accounts: 1 submits the job the driver plays to completion (workers 2, 3, verifier 4);
5 registers and stakes through the CLI; 6 and 7 submit jobs that are refused or
cancelled; 8 uses the faucet; 9 and 12 stay unregistered or without TRAIN.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from click.testing import CliRunner

from tests.integration.cli_process import CliProcess
from tests.integration.market_driver import ROLE_VERIFIER, ROLE_WORKER, MarketDriver
from truetrain import devnet
from truetrain.chain.client import ChainClient, dev_account
from truetrain.chain.devnet import free_port
from truetrain.cli import main
from truetrain.training.lm import parse_lm_spec
from truetrain.training.memory import training_memory_mib

E = 10**18
TINY_JOB = ["--shards", "2", "--rounds", "2", "--steps", "20", "--checkpoint-interval", "10", "--hidden", "32",
            "--compute-window", "60", "--challenge-window", "60", "--audit-rate", "1", "--name", "tiny", "--limbs", "3"]


class Net:
    def __init__(self, state: dict, deployments):
        self.rpc, self.ipfs = state["anvil"]["url"], state["ipfs"]["api_addr"]
        self.deployments = deployments
        self.contracts = state["contracts"]
        self.env = {"TRUETRAIN_RPC": self.rpc, "TRUETRAIN_IPFS": self.ipfs,
                    "TRUETRAIN_DEPLOYMENTS": str(deployments), "TRUETRAIN_KEY": None}
        self.client = ChainClient(self.rpc)
        self.token = self.client.contract("TrainToken", self.contracts["token"])

    def cli(self, *args):
        return CliRunner(env=self.env).invoke(main, [str(a) for a in args])

    def ok(self, *args) -> str:
        result = self.cli(*args)
        assert result.exit_code == 0, result.output
        return result.stdout

    def json(self, *args) -> dict:
        return json.loads(self.ok(*args, "--json"))

    def ipfs_cat(self, cid: str) -> bytes:
        from truetrain.storage.client import StorageClient, StorageSettings

        return StorageClient(StorageSettings(api_addr=self.ipfs)).fetch_unverified(cid, max_size=64 << 20)

    def nonce(self, index: int) -> int:
        return self.client.w3.eth.get_transaction_count(dev_account(index).address)

    def balance(self, index: int) -> int:
        return self.client.call(self.token.functions.balanceOf(dev_account(index).address))


def refused(result, message: str, code: int = 1) -> None:
    """One line on stderr, exit ``code``, no traceback."""
    assert result.exit_code == code, result.output
    assert result.stderr.strip().splitlines() == [message], result.stderr
    assert "Traceback" not in result.output


def usage_error(result, message: str) -> None:
    """click's usage error: exit 2, its last line names the problem."""
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines()[-1] == f"Error: {message}", result.stderr


@pytest.fixture(scope="module")
def net(TrainToken, tmp_path_factory):  # TrainToken: brownie has compiled build/
    tmp = tmp_path_factory.mktemp("cli-market")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(devnet, "STATE_DIR", tmp)
        patch.setattr(devnet, "STATE_FILE", tmp / "devnet.json")
        patch.setattr(devnet, "DEPLOYMENTS_DIR", tmp / "deployments")
        state = devnet.devnet_up(free_port(), free_port())
        try:
            yield Net(state, tmp / "deployments")
        finally:
            devnet.devnet_down()


@pytest.fixture(scope="module")
def driver(net):
    d = MarketDriver(net.rpc, net.ipfs, net.deployments)
    for index, roles in ((2, ROLE_WORKER), (3, ROLE_WORKER), (4, ROLE_VERIFIER)):
        d.enlist(index, roles)
    yield d
    d.close()


@pytest.fixture(scope="module")
def completed_job(net, driver):
    """A tiny job of account 1, created by `job submit` and played to completion, followed
    all the while by `job status --follow --json` in a process of its own."""
    before = net.balance(1)
    created = net.json("job", "submit", "--account", 1, *TINY_JOB)
    created["paid"] = before - net.balance(1)
    with CliProcess(net.env, "job", "status", created["job_id"], "--follow", "--json", "--poll-interval", 0.5) as follow:
        follow.wait_for("\n")  # following before the job moves
        created["played"] = driver.run_job(created["job_id"])
        created["audited"] = list(driver.audited)
        created["followed"] = follow.finish()
    return created


@pytest.fixture(scope="module")
def open_job(net):
    """An active job of account 7 that nobody works on."""
    return net.json("job", "submit", "--account", 7, "--shards", 1, "--rounds", 1, "--steps", 10,
                    "--checkpoint-interval", 10, "--hidden", 8)["job_id"]


# ---------------------------------------------------------------- job submit / status / results

def test_job_submit_escrows_exactly_the_formula_and_leaves_no_allowance(net, completed_job):
    escrow = (2 + 1) * 2 * (10 + 2) * E
    assert completed_job["escrow_wei"] == completed_job["paid"] == escrow
    assert completed_job["tasks"] == 6 and completed_job["widths"] == [64, 32, 10]
    assert completed_job["identity"].startswith("registered as submitter (profile ")
    # the job bound its program the block after it was created: its disputes end on the chain's one-step
    assert completed_job["disputes"] == "the chain's one-step recomputation (program bound)"
    game = net.client.contract("DisputeGame", net.contracts["game"])
    root, entries, interval, shards, data, layout = net.client.call(game.functions.programOf(completed_job["job_id"]))
    assert (interval, shards) == (10, 2) and entries > 0 and int.from_bytes(root, "big") and int.from_bytes(data, "big")
    assert completed_job["audited"] == completed_job["played"]  # --audit-rate 1: every task re-executed
    allowance = net.client.call(net.token.functions.allowance(dev_account(1).address, net.contracts["market"]))
    assert allowance == 0


def test_job_status_of_completed_job_shows_every_round_finalized(net, completed_job):
    job_id = completed_job["job_id"]
    lines = net.ok("job", "status", job_id).splitlines()
    assert lines[0] == f"job {job_id}: completed, submitted by {dev_account(1).address}"
    assert lines[1:3] == ["round 1/2 [##########] 3/3 finalized", "round 2/2 [##########] 3/3 finalized"]
    assert lines[3:] == ["escrow left 0.00 TRAIN", f"final model {net.json('job', 'status', job_id)['checkpoint_cid']} "
                                                    f"(`truetrain job results {job_id} --out DIR` evaluates it)"]
    report = net.json("job", "status", job_id)
    assert report["status"] == "completed" and report["escrow_wei"] == 0 and report["tasks"] == []


def test_job_status_follow_prints_a_json_line_per_change_until_the_job_completes(net, completed_job):
    job_id = completed_job["job_id"]
    code, out, err = completed_job["followed"]
    assert (code, err) == (0, "")
    seen = [json.loads(line) for line in out.splitlines()]
    first, last = seen[0], seen[-1]
    assert (first["status"], first["progress"]["tasks_finalized"], first["progress"]["eta_s"]) == ("active", 0, None)
    assert last == {**net.json("job", "status", job_id), "progress": last["progress"]}
    created = net.client.w3.eth.get_transaction_receipt(completed_job["tx"])["blockNumber"]
    assert last["progress"] | {"block": 0, "blocks_per_task": 0, "block_time_s": 0} == {
        "tasks_finalized": 6, "tasks_total": 6, "round": 2, "rounds": 2, "round_finalized": 3, "round_tasks": 3,
        "created_block": created, "block": 0, "blocks_per_task": 0, "block_time_s": 0, "eta_s": 0.0}
    done = [s["progress"]["tasks_finalized"] for s in seen]
    assert done == sorted(done) and all(a != b for a, b in zip(seen, seen[1:]))  # a line per change
    for s in seen:  # the ETA is the chain's pace over the tasks left
        p = s["progress"]
        if s["active"] and p["tasks_finalized"]:
            assert p["eta_s"] == pytest.approx((6 - p["tasks_finalized"]) * p["blocks_per_task"] * p["block_time_s"])


def test_job_status_follow_of_a_completed_job_prints_its_end_and_exits_0(net, completed_job):
    job_id = completed_job["job_id"]
    cid = net.json("job", "status", job_id)["checkpoint_cid"]
    assert net.ok("job", "status", job_id, "--follow").splitlines() == [
        f"job {job_id} [####################] 6/6 tasks | round 2/2: 3/3 finalized | completed",
        f"job {job_id} completed: 6/6 tasks finalized in 2 round(s); final model {cid} (`truetrain job results "
        f"{job_id} --out DIR` evaluates it)"]
    refused(net.cli("job", "status", job_id, "--poll-interval", 1), "error: --poll-interval applies to --follow", code=2)


def test_job_status_follow_on_a_terminal_redraws_one_line_and_ctrl_c_stops_it(net, open_job):
    line = f"job {open_job} [--------------------] 0/2 tasks | round 1/1: 0/2 finalized, 2 not drawn | ETA --"
    with CliProcess(net.env, "job", "status", open_job, "--follow", "--poll-interval", 0.2, tty=True) as follow:
        follow.wait_for("ETA --")
        time.sleep(0.6)  # polls that change nothing draw nothing
        follow.interrupt()
        code, out, err = follow.finish()
    assert code == 130 and "Traceback" not in err
    assert err.splitlines() == [f"stopped following job {open_job}; it goes on (`truetrain job status {open_job}` "
                                f"shows it)"]
    assert out == f"\r{line}\x1b[K\r\n"  # drawn once, then the line ended (the terminal adds \r to \n)


def test_job_results_writes_model_plot_and_summary(net, completed_job, tmp_path):
    job_id, out = completed_job["job_id"], tmp_path / "results"
    text = net.ok("job", "results", job_id, "--out", out)
    accuracy = float(re.match(rf"job {job_id}: held-out accuracy (\d+\.\d)% after 2 round\(s\); wrote ", text).group(1))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["test_accuracy"] == pytest.approx(accuracy / 100, abs=0.001)
    assert accuracy > 50.0  # digits, 2 x 2 tiny rounds: far above the 10% of guessing
    assert [r["round"] for r in summary["per_round"]] == [1, 2]
    assert summary["per_round"][-1]["test_accuracy"] == summary["test_accuracy"]
    assert all(r["mean_train_loss"] > 0 for r in summary["per_round"])
    assert (out / "training.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "model.ckpt").stat().st_size > 0
    assert summary["final_checkpoint"]["cid"] == net.json("job", "status", job_id)["checkpoint_cid"]


def test_job_results_of_active_job_is_refused(net, open_job, tmp_path):
    result = net.cli("job", "results", open_job, "--out", tmp_path / "r")
    refused(result, f"error: job {open_job} is active (round 1 of 1), not completed: it has no final model yet")
    assert not (tmp_path / "r").exists()


def test_job_export_of_a_round_not_finished_is_refused_before_writing(net, open_job, tmp_path):
    out = tmp_path / "r"
    refused(net.cli("job", "export", open_job, "--out", out),
            f"error: job {open_job} is active (0 of 1 rounds done), not completed: it has no final model yet "
            f"(--round N exports the model after a finished round)")
    refused(net.cli("job", "export", open_job, "--out", out, "--round", 1),
            f"error: job {open_job} has finished 0 of its 1 rounds: no model after round 1 yet")
    refused(net.cli("job", "export", open_job, "--out", out, "--round", 2),
            f"error: job {open_job} has 1 round(s): there is no round 2")
    assert not out.exists()


def test_job_export_round_0_is_the_seeds_initial_model(net, completed_job, tmp_path):
    from safetensors.torch import load_file

    from truetrain.training import init_params, load_manifest

    report = net.json("job", "export", completed_job["job_id"], "--out", tmp_path, "--round", 0)
    assert report["round"] == 0 and report["checkpoint"]["cid"] is None and report["format"] == "truetrain-classifier"
    manifest = load_manifest(net.ipfs_cat(report["manifest"]["cid"]))
    exported = load_file(str(tmp_path / "model.safetensors"))
    assert exported.keys() == {"fc.0.weight", "fc.0.bias", "fc.1.weight", "fc.1.bias"}
    assert all(torch_equal(v, exported[k]) for k, v in init_params(manifest.model, manifest.seed).items())


def torch_equal(a, b) -> bool:
    import torch

    return torch.equal(a, b)


def test_job_status_of_active_job_lists_its_tasks(net, open_job):
    lines = net.ok("job", "status", open_job, "--ipfs", "/ip4/127.0.0.1/tcp/1").splitlines()  # chain only
    assert lines[1:] == ["round 1/1 [----------] 0/2 finalized", "round 1 tasks: 2 not drawn",
                         "  task 0 (shard 0): not drawn", "  task 1 (aggregation): not drawn",
                         "escrow left 24.00 TRAIN"]


def test_job_list_shows_the_submitters_jobs(net, completed_job):
    listed = net.json("job", "list", "--account", 1)
    assert [j["job_id"] for j in listed["jobs"]] == [completed_job["job_id"]]
    other = net.ok("job", "list", "--submitter", dev_account(9).address)
    assert other.strip() == f"0 job(s) of {dev_account(9).address}"


def test_unknown_job_is_one_line_exit_2(net):
    market = net.contracts["market"]
    for command in (["status", 99], ["results", 99, "--out", "x"], ["cancel", 99, "--account", 7],
                    ["export", 99, "--out", "x"]):
        before = net.nonce(7)
        refused(net.cli("job", *command), f"error: no job 99 on the market at {market}", code=2)
        assert net.nonce(7) == before


def test_job_cancel_checks_submitter_and_status_before_sending(net):
    job_id = net.json("job", "submit", "--account", 7, "--shards", 1, "--rounds", 1, "--steps", 10,
                      "--checkpoint-interval", 10, "--hidden", 8)["job_id"]
    before = net.nonce(6)
    refused(net.cli("job", "cancel", job_id, "--account", 6),
            f"error: job {job_id} was submitted by {dev_account(7).address}, not {dev_account(6).address}: "
            f"only its submitter may cancel it")
    assert net.nonce(6) == before
    assert net.ok("job", "cancel", job_id, "--account", 7).strip() == (
        f"job {job_id} cancelled: 24.00 TRAIN credited back (`truetrain token withdraw` pays it out)")
    before = net.nonce(7)
    refused(net.cli("job", "cancel", job_id, "--account", 7),
            f"error: job {job_id} is cancelled, not active: nothing to cancel")
    assert net.nonce(7) == before
    withdrawn = net.ok("token", "withdraw", "--account", 7)
    assert withdrawn.strip() == f"withdrew 24.00 TRAIN to {dev_account(7).address}"
    followed = net.cli("job", "status", job_id, "--follow")  # a followed job that ends otherwise: exit 3
    refused(followed, f"error: job {job_id} was cancelled with 0/2 tasks finalized, in round 1 of 1", code=3)
    assert followed.stdout == f"job {job_id} [--------------------] 0/2 tasks | round 1/1: 0/2 finalized, 2 not drawn | cancelled\n"


def test_job_submit_without_the_balance_sends_nothing(net):
    before = net.nonce(6)
    result = net.cli("job", "submit", "--account", 6, "--reward", 100_000, "--collateral", 100_000)
    held = f"{net.balance(6) / E:,.2f}"
    refused(result, f"error: insufficient balance: the job's escrow needs 1,200,024.00 TRAIN, "
                    f"{dev_account(6).address} holds {held} TRAIN")
    assert net.nonce(6) == before


def test_job_submit_no_approve_without_allowance_sends_nothing(net):
    before = net.nonce(6)
    result = net.cli("job", "submit", "--account", 6, "--no-approve")
    refused(result, f"error: insufficient allowance: the job's escrow needs 144.00 TRAIN, {dev_account(6).address} "
                    f"allows {net.contracts['market']} 0.00 TRAIN (drop --no-approve to approve it)")
    assert net.nonce(6) == before


@pytest.mark.parametrize("args, message", [
    (["--reward", "0"], "Invalid value for '--reward': amount must be > 0 TRAIN, got 0"),
    (["--reward", "-3"], "Invalid value for '--reward': amount must be > 0 TRAIN, got -3"),
    (["--reward", "1e30"], "Invalid value for '--reward': amount 1e30 TRAIN is larger than the most the market "
                           "accepts (79,228,162,514.26)"),
    (["--audit-fee", "abc"], "Invalid value for '--audit-fee': not a token amount: 'abc'"),
    (["--audit-rate", "1.5"], "Invalid value for '--audit-rate': 1.5 is not in the range 0<=x<=1."),
    (["--shards", "0"], "Invalid value for '--shards': 0 is not in the range 1<=x<=1024."),
    (["--limbs", "4"], "Invalid value for '--limbs': 4 is not in the range 2<=x<=3."),
    (["--dataset", "data.csv"], "Invalid value for '--dataset': expected 'digits' or a .npz file, got 'data.csv'"),
    (["--dataset", "missing.npz"], "Invalid value for '--dataset': no such file: missing.npz"),
    (["--min-fetch-kibps", "-1"], "Invalid value for '--min-fetch-kibps': -1 is not in the range 0<=x<=16777216."),
    (["--min-fetch-kibps", "16777217"],
     "Invalid value for '--min-fetch-kibps': 16777217 is not in the range 0<=x<=16777216."),
    (["--max-rtt-ms", "60001"], "Invalid value for '--max-rtt-ms': 60001 is not in the range 0<=x<=60000."),
])
def test_job_submit_bad_flags_are_usage_errors(net, args, message):
    before = net.nonce(6)
    usage_error(net.cli("job", "submit", "--account", 6, *args), message)
    assert net.nonce(6) == before


@pytest.mark.parametrize("args, message", [
    # JobMarket refuses each of these terms (JobBook.create); the CLI names the flag first.
    (["--collateral", "0"],
     "--collateral 0.00 TRAIN is below the market's least, 20.00 TRAIN (a challenger bonds as much)"),
    (["--collateral", "19.99"],
     "--collateral 19.99 TRAIN is below the market's least, 20.00 TRAIN (a challenger bonds as much)"),
    (["--reward", "30", "--collateral", "25"],
     "--collateral 25.00 TRAIN is below --reward 30.00 TRAIN: a worker must stake more than a wrong result could "
     "earn it"),
    (["--reward", "0.2", "--collateral", "20.01"],
     "--collateral 20.01 TRAIN is more than 100 x --reward 0.20 TRAIN: raise --reward or lower --collateral"),
    (["--accept-window", "4"], "--accept-window 4 is shorter than the market's least window, 5 blocks"),
    (["--reveal-window", "201"],
     "--reveal-window 201 is longer than 200 blocks (the audit draw's block hash must stay readable until it ends)"),
    (["--compute-window", "61"], "--challenge-window 60 is shorter than --compute-window 61: a third party must be "
                                 "able to re-run a task and challenge it"),
    # issue 30, item 3: the rest of createJob's terms, each by its flag
    (["--challenge-window", "5"], "--challenge-window 5 is shorter than --compute-window 60: a third party must be "
                                  "able to re-run a task and challenge it"),
    (["--accept-window", "1", "--compute-window", "1", "--reveal-window", "1", "--challenge-window", "1"],
     "--accept-window 1 is shorter than the market's least window, 5 blocks"),
    (["--compute-window", "4", "--challenge-window", "60"],
     "--compute-window 4 is shorter than the market's least window, 5 blocks"),
    (["--challenge-window", "4", "--compute-window", "4"],
     "--compute-window 4 is shorter than the market's least window, 5 blocks"),
    (["--expiry-blocks", "1"], "--expiry-blocks 1 is shorter than one task's windows (accept 20 + compute 60 + "
                               "reveal 60 + challenge 60 = 200 blocks): the job would expire before a task could "
                               "be final"),
    (["--expiry-blocks", "199"], "--expiry-blocks 199 is shorter than one task's windows (accept 20 + compute 60 + "
                                 "reveal 60 + challenge 60 = 200 blocks): the job would expire before a task could "
                                 "be final"),
    (["--steps", "70000", "--checkpoint-interval", "1"],
     "--steps 70000 / --checkpoint-interval 1 commits 70,001 checkpoints a task, more than the 65,535 the market "
     "records: raise --checkpoint-interval"),
    (["--reward", "1", "--collateral", "101"],
     "--collateral 101.00 TRAIN is more than 100 x --reward 1.00 TRAIN: raise --reward or lower --collateral"),
    (["--model", "lm", "--stages", "2", "--audit-rate", "0.5"],
     "a job split into stages is checked by sampling verifiers, not by drawn audits (a stage's inputs are its "
     "neighbours' results): give --audit-rate 0"),
])
def test_job_submit_terms_the_market_refuses_are_refused_before_sending(net, args, message):
    before = net.nonce(6)
    refused(net.cli("job", "submit", "--account", 6, *args), f"error: {message}", code=2)
    assert net.nonce(6) == before


def test_job_submit_the_least_terms_the_market_takes_reach_the_chain(net):
    job_id = net.json("job", "submit", "--account", 7, "--shards", 1, "--rounds", 1, "--steps", 10,
                      "--checkpoint-interval", 10, "--hidden", 8, "--reward", "0.2", "--collateral", 20)["job_id"]
    from truetrain.market import JobView

    job = JobView.read(net.client.contract("JobMarket", net.contracts["market"]), job_id)
    assert (job.reward_per_task, job.worker_collateral) == (E // 5, 20 * E)


def test_job_submit_network_terms_reach_the_chain(net):
    job_id = net.json("job", "submit", "--account", 7, "--shards", 1, "--rounds", 1, "--steps", 10,
                      "--checkpoint-interval", 10, "--hidden", 8, "--min-fetch-kibps", 4096, "--max-rtt-ms", 250)["job_id"]
    status = net.json("job", "status", job_id)
    assert (status["min_fetch_kibps"], status["max_rpc_rtt_ms"]) == (4096, 250)


def test_job_submit_checks_the_training_shape_before_any_node(net):
    before = net.nonce(6)
    refused(net.cli("job", "submit", "--account", 6, "--checkpoint-interval", 7),
            "error: --checkpoint-interval 7 must divide --steps 60", code=2)
    refused(net.cli("job", "submit", "--account", 6, "--numeric-mode", "stock", "--limbs", 3),
            "error: --limbs applies to --numeric-mode repro only", code=2)
    assert net.nonce(6) == before


def test_job_submit_from_npz_sizes_the_mlp_and_refuses_a_bad_one(net, tmp_path):
    import numpy as np

    good, bad = tmp_path / "blobs.npz", tmp_path / "bad.npz"
    rng = np.random.default_rng(0)
    np.savez(good, x=rng.normal(size=(60, 4)).astype(np.float32), y=np.arange(60) % 3)
    np.savez(bad, features=np.zeros((4, 2)))
    created = net.json("job", "submit", "--account", 6, "--dataset", good, "--shards", 2, "--rounds", 1,
                       "--hidden", 16, "--steps", 10, "--checkpoint-interval", 5, "--name", "blobs")
    assert created["widths"] == [4, 16, 3] and created["escrow_wei"] == 3 * 12 * E
    before = net.nonce(6)
    refused(net.cli("job", "submit", "--account", 6, "--dataset", bad), f"error: {bad}: .npz needs keys 'x' and 'y'")
    assert net.nonce(6) == before


def test_job_submit_lm_from_a_text_file_publishes_text_shards(net, tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_text("".join(f"line {i}: the quick brown fox, {i * i}\n" for i in range(3000)))
    created = net.json("job", "submit", "--account", 6, "--model", "lm", "--data", text, "--d-model", 32,
                       "--layers", 1, "--heads", 2, "--seq-len", 32, "--shards", 2, "--rounds", 1, "--steps", 10,
                       "--checkpoint-interval", 5, "--batch-size", 4, "--dropout", 0.1)
    assert created["model"].startswith("byte-level LM d32 x 1 layers (") and created["escrow_wei"] == 3 * 12 * E
    import json

    manifest = json.loads(net.ipfs_cat(created["manifest_cid"]))
    assert manifest["model"] == {"kind": "lm", "d_model": 32, "n_layers": 1, "n_heads": 2, "seq_len": 32, "dropout": 0.1}
    assert manifest["optimizer"]["kind"] == "adamw" and manifest["outer"] == {"lr": 0.7, "momentum": 0.9}
    shard = net.ipfs_cat(manifest["shards"][0]["cid"])
    assert shard.startswith(b"TTTEXT1\nline 0: the quick brown fox")
    # not trained yet: nothing to sample from
    refused(net.cli("job", "sample", created["job_id"], "--prompt", "line"),
            f"error: job {created['job_id']} has no global checkpoint yet (round 0)", code=1)


def test_job_submit_lm_from_jsonl_parquet_or_a_saved_dataset_publishes_the_shards_of_plain_files(net, tmp_path,
                                                                                                   monkeypatch):
    """The same texts as one plain file per record, as JSON Lines, as Parquet and as a folder
    saved by datasets (each written by its real package): the same shards, CIDs and hashes."""
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    texts = [f"record {i}: naïve café, the quick brown fox {i * i}\n" * (1 + i % 3) for i in range(150)]
    files = tmp_path / "files"
    files.mkdir()
    for i, text in enumerate(texts):
        (files / f"{i:05d}.txt").write_text(text)
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts)))
    pq.write_table(pa.table({"id": range(len(texts)), "text": texts}), tmp_path / "docs.parquet")
    datasets.Dataset.from_dict({"text": texts}).save_to_disk(str(tmp_path / "saved"))
    shape = ["--model", "lm", "--d-model", 32, "--layers", 1, "--heads", 2, "--seq-len", 32, "--shards", 2,
             "--rounds", 1, "--steps", 10, "--checkpoint-interval", 5, "--batch-size", 4]
    published = {}
    for form, data in {"files": [files], "jsonl": [tmp_path / "docs.jsonl", "--text-field", "text"],
                       "parquet": [tmp_path / "docs.parquet", "--text-field", "text"],
                       "datasets": [tmp_path / "saved", "--text-field", "text"]}.items():
        created = net.json("job", "submit", "--account", 6, "--data", *data, *shape)
        manifest = json.loads(net.ipfs_cat(created["manifest_cid"]))
        published[form] = manifest["shards"] + [manifest["test_set"]]
    assert published["jsonl"] == published["parquet"] == published["datasets"] == published["files"]
    pieces = [net.ipfs_cat(ref["cid"]).removeprefix(b"TTTEXT1\n") for ref in published["files"]]
    assert len(pieces) == 3 and b"".join(pieces) == "".join(texts).encode()


def test_job_submit_lm_in_stages_creates_a_split_job_sized_by_its_largest_stage(net):
    created = net.json("job", "submit", "--account", 6, "--model", "lm", "--d-model", 32, "--layers", 2,
                       "--heads", 2, "--seq-len", 16, "--shards", 2, "--rounds", 1, "--steps", 4,
                       "--checkpoint-interval", 2, "--batch-size", 4, "--stages", 3, "--micro-batches", 2)
    # 2 shards x 3 stages + the aggregation, no audit fees drawn (the default audit rate is 0 split)
    assert (created["stages"], created["tasks"], created["escrow_wei"]) == (3, 7, 7 * 12 * E)
    import json

    manifest = json.loads(net.ipfs_cat(created["manifest_cid"]))
    assert manifest["pipeline"] == {"stages": 3, "split": "params", "micro_batches": 2}
    status = net.json("job", "status", created["job_id"])
    assert status["stages"] == 3
    from truetrain.market import JobView

    job = JobView.read(net.client.contract("JobMarket", net.contracts["market"]), created["job_id"])
    assert (job.shards, job.stages, job.audit_rate_bps, job.memory_mib) == (6, 3, 0, 1024)


def test_job_submit_in_stages_refuses_audits_and_lone_micro_batches_before_sending(net):
    before = net.nonce(6)
    refused(net.cli("job", "submit", "--account", 6, "--model", "lm", "--stages", 3, "--audit-rate", 0.5),
            "error: a job split into stages is checked by sampling verifiers, not by drawn audits (a stage's inputs "
            "are its neighbours' results): give --audit-rate 0", code=2)
    refused(net.cli("job", "submit", "--account", 6, "--micro-batches", 2),
            "error: --micro-batches applies to a model split with --stages")
    refused(net.cli("job", "submit", "--account", 6, "--model", "lm", "--layers", 1, "--stages", 4),
            "error: pipeline.stages: expected an integer in [2, 3], got 4", code=2)
    assert net.nonce(6) == before


def test_job_submit_lm_options_on_a_classifier_are_refused(net, tmp_path):
    before = net.nonce(6)
    refused(net.cli("job", "submit", "--account", 6, "--dropout", 0.1), "error: --dropout is an option of --model lm")
    (tmp_path / "x.txt").write_text("some text\n")
    refused(net.cli("job", "submit", "--account", 6, "--data", tmp_path / "x.txt"),
            "error: --data is the text of --model lm; an MLP's data is --dataset")
    assert net.nonce(6) == before


def test_job_sample_of_a_classifier_is_refused(net, completed_job):
    refused(net.cli("job", "sample", completed_job["job_id"], "--prompt", "x"),
            f"error: job {completed_job['job_id']} trains a mlp, not a language model: nothing to sample")


BIG_LM = {"kind": "lm", "d_model": 1024, "n_layers": 24, "n_heads": 4, "seq_len": 128}


@pytest.mark.parametrize("content, extra, message, code", [
    (b"", [], "error: {path}: the text is empty", 1),
    (b"ok\n\xff", [], "error: {path}: not UTF-8 text (invalid byte at offset 3)", 1),
    (b"short text\n", [], "error: text of 11 bytes is too short: 3 shards and a held-out split need at least "
                          "129 bytes each (sequence length 128 + 1)", 1),
    (b"x\n" * 5000, ["--d-model", "1024", "--layers", "24", "--memory-mib", "1024"],
     f"error: the model needs about {training_memory_mib(parse_lm_spec(BIG_LM), 8):,} "
     "MiB to train (parameters, optimizer state, activations), more than "
     "--memory-mib 1,024: raise it or shrink the model or batch", 2),
], ids=["empty", "not-utf8", "too-short", "too-big"])
def test_job_submit_lm_bad_text_or_size_refused_before_anything_is_sent(net, tmp_path, content, extra, message,
                                                                         code):
    path = tmp_path / "corpus.txt"
    path.write_bytes(content)
    before = net.nonce(6)
    refused(net.cli("job", "submit", "--account", 6, "--model", "lm", "--data", path, *extra),
            message.format(path=path), code=code)
    assert net.nonce(6) == before


# ---------------------------------------------------------------- unreachable nodes

def test_unreachable_rpc_is_one_line_and_sends_nothing(net):
    before = net.nonce(6)
    for command in (["token", "balance", "--account", 6], ["job", "submit", "--account", 6],
                    ["worker", "stake", "10", "--account", 6], ["job", "status", "1"]):
        refused(net.cli(*command, "--rpc", "http://127.0.0.1:1"),
                "error: no Ethereum JSON-RPC node answers at http://127.0.0.1:1")
    assert net.nonce(6) == before


def test_unreachable_ipfs_is_one_line_and_sends_nothing(net):
    for index, command in ((6, ["job", "submit"]), (9, ["identity", "register", "--role", "worker"])):
        before = net.nonce(index)
        result = net.cli(*command, "--account", index, "--ipfs", "/ip4/127.0.0.1/tcp/1")
        refused(result, "error: no IPFS node answers at /ip4/127.0.0.1/tcp/1")
        assert net.nonce(index) == before


def test_no_signing_key_is_one_line(net):
    refused(net.cli("worker", "stake", "10"),
            "error: this command signs transactions: pass --account N (devnet), --key or --keystore", code=2)
    refused(net.cli("token", "balance"),
            "error: give an ADDRESS, or --account N / --key / --keystore for your own", code=2)


# ---------------------------------------------------------------- identity and token

def test_identity_register_then_show_then_refuse_a_second_time(net):
    address = dev_account(5).address
    registered = net.json("identity", "register", "--role", "worker", "--account", 5, "--max-concurrent", 2)
    assert registered["roles"] == ROLE_WORKER and registered["capability"]["max_concurrent"] == 2
    shown = net.json("identity", "show", address)
    assert shown["registered"] and shown["role_names"] == ["worker"] and shown["reputation"] == 5000
    assert shown["profile_cid"] == registered["profile_cid"] and shown["history"]["tasks_done"] == 0
    assert net.ok("identity", "show", address).splitlines()[0] == f"{address}: roles worker, reputation 5000/10000"
    before = net.nonce(5)
    refused(net.cli("identity", "register", "--role", "worker", "--account", 5),
            f"error: {address} is already registered with roles worker")
    assert net.nonce(5) == before


def test_identity_register_with_existing_profile_cid(net):
    profile = net.json("identity", "show", dev_account(5).address)
    registered = net.json("identity", "register", "--role", "verifier", "--role", "submitter", "--account", 8,
                          "--profile-cid", profile["profile_cid"])
    assert registered["roles"] == ROLE_VERIFIER | 4
    assert registered["profile_hash"] == profile["profile_hash"]


def test_identity_bad_input_is_a_usage_error(net):
    before = net.nonce(9)
    usage_error(net.cli("identity", "register", "--role", "worker", "--account", 9, "--profile-cid", "Qm123"),
                "Invalid value for '--profile-cid': not a CID: 'Qm123'")
    usage_error(net.cli("identity", "register", "--role", "miner", "--account", 9),
                "Invalid value for '--role': 'miner' is not one of 'submitter', 'verifier', 'worker'.")
    usage_error(net.cli("identity", "show", "0x1234"), "Invalid value for '[ADDRESS]': not an Ethereum address: '0x1234'")
    assert net.nonce(9) == before
    assert net.ok("identity", "show", dev_account(9).address).strip() == f"{dev_account(9).address} has no identity"


def test_token_balance_and_faucet_with_cooldown(net):
    address = dev_account(8).address
    # The cooldown is 240 blocks, a minute of this devnet's 0.25 s blocks (at 10 blocks, 2.5 s,
    # it passed between two calls on a loaded machine).
    before = net.json("token", "balance", address)["wallet_wei"]
    dripped = net.json("token", "faucet", "--account", 8)
    assert dripped["amount_wei"] == 1000 * E and dripped["wallet_wei"] == before + 1000 * E
    nonce = net.nonce(8)
    result = net.cli("token", "faucet", "--account", 8)
    assert result.exit_code == 1
    assert re.fullmatch(rf"error: the faucet is cooling down for {address}: try again at block \d+",
                        result.stderr.strip())
    assert net.nonce(8) == nonce
    usage_error(net.cli("token", "balance", "nope"), "Invalid value for '[ADDRESS]': not an Ethereum address: 'nope'")


def test_token_withdraw_with_nothing_is_refused(net):
    refused(net.cli("token", "withdraw", "--account", 9), f"error: {dev_account(9).address} has nothing to withdraw")


# ---------------------------------------------------------------- worker stake / unstake / status

def test_worker_stake_joins_the_pool_then_unstake_and_status(net):
    if not net.json("identity", "show", dev_account(5).address)["registered"]:  # when run alone
        net.ok("identity", "register", "--role", "worker", "--account", 5)
    staked = net.json("worker", "stake", "100", "--account", 5)
    assert staked["joined_now"] and staked["joined"] and staked["staked_wei"] == 100 * E
    again = net.ok("worker", "stake", "0.5", "--account", 5)
    assert again.strip() == "staked 0.50 TRAIN: 100.50 staked, 100.50 free"
    unstaked = net.json("worker", "unstake", "30.5", "--account", 5)
    assert unstaked["unbonding_wei"] == 30_500_000_000_000_000_000
    status = net.json("worker", "status", dev_account(5).address)
    assert status["staked_wei"] == 70 * E and status["joined"] and status["active_tasks"] == 0
    assert status["unbonding_ready_block"] == unstaked["ready_block"]
    before = net.nonce(5)
    refused(net.cli("worker", "unstake", "1000", "--account", 5),
            f"error: cannot unstake 1,000.00 TRAIN: {dev_account(5).address} has 70.00 free of 70.00 staked "
            f"(0.00 locked as collateral)")
    refused(net.cli("worker", "stake", "20000", "--account", 5),
            f"error: insufficient balance: staking needs 20,000.00 TRAIN, {dev_account(5).address} holds "
            f"{net.balance(5) / E:,.2f} TRAIN")
    refused(net.cli("worker", "stake", "5", "--no-approve", "--account", 5),
            f"error: insufficient allowance: staking needs 5.00 TRAIN, {dev_account(5).address} allows "
            f"{net.contracts['stake']} 0.00 TRAIN (drop --no-approve to approve it)")
    assert net.nonce(5) == before


def test_worker_stake_without_a_worker_role_sends_nothing(net):
    before = net.nonce(9)
    refused(net.cli("worker", "stake", "10", "--account", 9),
            f"error: {dev_account(9).address} holds no worker or verifier role (roles: none): "
            f"run `truetrain identity register --role worker` first")
    assert net.nonce(9) == before


def test_worker_stake_without_tokens_sends_nothing(net):
    net.ok("identity", "register", "--role", "worker", "--account", 12)
    before = net.nonce(12)
    refused(net.cli("worker", "stake", "1", "--account", 12),
            f"error: insufficient balance: staking needs 1.00 TRAIN, {dev_account(12).address} holds 0.00 TRAIN")
    assert net.nonce(12) == before


@pytest.mark.parametrize("amount, message", [
    ("0", "Invalid value for 'AMOUNT': amount must be > 0 TRAIN, got 0"),
    ("-5", "Invalid value for 'AMOUNT': amount must be > 0 TRAIN, got -5"),
    ("1e-19", "Invalid value for 'AMOUNT': amount 1e-19 has more than 18 decimals"),
    ("99999999999999", "Invalid value for 'AMOUNT': amount 99999999999999 TRAIN is larger than the most the "
                       "market accepts (79,228,162,514.26)"),
    ("ten", "Invalid value for 'AMOUNT': not a token amount: 'ten'"),
])
def test_worker_bad_amounts_are_usage_errors(net, amount, message):
    before = net.nonce(5)
    for command in ("stake", "unstake"):
        usage_error(net.cli("worker", command, "--account", 5, "--", amount), message)
    assert net.nonce(5) == before


def test_worker_status_bad_address_is_a_usage_error(net):
    usage_error(net.cli("worker", "status", "0xZZ"), "Invalid value for '[ADDRESS]': not an Ethereum address: '0xZZ'")
