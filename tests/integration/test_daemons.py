"""A whole job through the worker and verifier daemons, each a separate process.

Three workers and a verifier on two IPFS nodes (the submitter's data and one worker on the
first, two workers and the verifier on the second, so shards and checkpoints cross the
peer-to-peer exchange), a digits MLP job of 3 shards x 3 rounds; then the same manifest
trained in this process with no chain at all must give the same final checkpoint bits.
A byte-level LM job follows on the same daemons; `job export` takes it home as a
transformers GPT-2 folder (loaded by the real package: our logits, `job sample`'s bytes),
and a job submitted with `--init` from that folder trains on from it.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
import requests
import torch

from tests.integration.market_net import SUBMITTER as SUBMITTER_ACCOUNT
from tests.integration.market_net import TOKEN, MarketNet
from truetrain.chain.client import dev_account
from truetrain.chain.devnet import free_port
from truetrain.hardware import detect
from truetrain.market import JobStatus, TaskStatus, TaskView, encode_task_id
from truetrain.market.jobs import JobTerms
from truetrain.market.views import JobView
from truetrain.training import aggregate, checkpoint_hash, evaluate, run_task
from truetrain.training.checkpoint import fetch_checkpoint

# Honest daemons must never time out here, so the windows that only a failure waits out are
# wide (the devnet mines every 0.5 s and on every transaction: in a fresh clone's CI an honest
# worker once let an LM task lapse on a loaded 2-core machine). The contracts want the
# compute window no longer than the challenge window, which every task waits out: 70 blocks.
# At 40, an honest worker fetching a round's checkpoint from the other IPFS node under the
# lanes' load saw its 40 blocks pass in 13 s (blocks come with every transaction) and was
# timed out.
TERMS = JobTerms(reward_per_task=10 * TOKEN, audit_fee=2 * TOKEN, worker_collateral=20 * TOKEN,
                 accept_window=60, compute_window=70, reveal_window=120, challenge_window=70, audit_rate_bps=5_000)
WORKERS, VERIFIER = (2, 3, 4), 5


@pytest.fixture(scope="module")
def finished_job(tmp_path_factory, TrainToken):  # TrainToken: brownie has compiled build/
    with MarketNet(tmp_path_factory.mktemp("daemons"), ipfs_nodes=2) as net:
        token = net.contracts.token
        before = {a: token.functions.balanceOf(dev_account(a).address).call() for a in (1, *WORKERS, VERIFIER)}
        ports = {"worker": free_port(), "verifier": free_port()}
        net.start("worker", 2, node=0, extra=["--metrics-port", str(ports["worker"]), "--gemm-route", "int8"])
        net.start("worker", 3, node=1)
        net.start("worker", 4, node=1)
        # Worker 2 trains with the int8 GEMM kernel on every product, the verifier replays on the
        # float64 fallback, the test process trains on its own engine: the audits match and the
        # final checkpoint equals the local run only because every route gives the same bits.
        verifier = net.start("verifier", VERIFIER, node=1, extra=["--keeper", "--metrics-port", str(ports["verifier"]),
                                                                  "--gemm-route", "float64"])
        net.metrics_ports = ports
        job_id, manifest, escrow = net.submit(shards=3, rounds=3, steps=60, terms=TERMS, node=0)
        status = net.wait_job(job_id)
        yield net, job_id, manifest, escrow, before, status, verifier


def test_job_through_daemons_finalizes_every_task_and_pays_by_the_escrow_formula(finished_job):
    net, job_id, manifest, escrow, before, status, _ = finished_job
    assert status == JobStatus.COMPLETED
    assert escrow == (3 + 1) * 3 * (10 + 2) * TOKEN
    market = net.contracts.market
    for r in range(3):
        for i in range(4):
            assert TaskView.read(market, encode_task_id(job_id, r, i)).status == TaskStatus.FINALIZED
    finalized = [e["args"] for e in net.events("TaskFinalized") if e["args"]["taskId"] >> 64 == job_id]
    assert len(finalized) == 12
    assert all(f["reward"] == 10 * TOKEN for f in finalized)
    audited = [f for f in finalized if f["auditFee"]]
    refunded = sum(e["args"]["amount"] for e in net.events("Refunded", jobId=job_id))
    assert refunded == (12 - len(audited)) * 2 * TOKEN
    assert JobView.read(market, job_id).escrow == 0  # nothing left
    assert market.functions.totalEscrow().call() == 0
    earned = Counter()
    for f in finalized:
        earned[f["worker"]] += f["reward"]
        if f["auditFee"]:
            earned[f["auditor"]] += f["auditFee"]
    assert earned[dev_account(VERIFIER).address] == len(audited) * 2 * TOKEN
    assert sum(earned.values()) + refunded == escrow


def test_job_through_daemons_conserves_tokens(finished_job):
    net, *_ = finished_job
    token, stake, market = net.contracts.token, net.contracts.stake, net.contracts.market
    holders = [dev_account(i).address for i in range(10)] + [stake.address, market.address]
    # Every address that ever received a token is one of these (nothing leaks elsewhere).
    received = {e["args"]["to"] for e in token.events.Transfer().get_logs(from_block=0)} - {"0x" + "00" * 20}
    assert received <= set(holders), received - set(holders)
    # Every figure at one block: the daemons may still be withdrawing while the test reads.
    at = {"block_identifier": net.contracts.client.w3.eth.block_number}
    held = sum(token.functions.balanceOf(a).call(**at) for a in holders)
    assert token.functions.totalMinted().call(**at) == held + token.functions.totalBurned().call(**at)
    assert token.functions.balanceOf(market.address).call(**at) == \
        market.functions.totalEscrow().call(**at) + market.functions.totalCredits().call(**at)


def test_job_through_daemons_learns_held_out_accuracy_at_least_93_percent(finished_job):
    net, job_id, manifest, *_ = finished_job
    with net.store(1) as store:
        reader = net.reader(store)
        _, _, model = reader.final_checkpoint(job_id)
        assert evaluate(manifest, model, reader.test_set(job_id)) >= 0.93


def test_distributed_job_equals_local_training_bit_for_bit(finished_job):
    net, job_id, manifest, *_ = finished_job
    with net.store(0) as store:
        shards = [store.fetch(ref.cid, ref.hash, max_size=2**24) for ref in manifest.shards]
    start = None
    for r in range(manifest.rounds):
        results = [run_task(manifest, shards[i], start, i, r) for i in range(len(shards))]
        start = aggregate(manifest, r, results).to_bytes()
    assert checkpoint_hash(start) == JobView.read(net.contracts.market, job_id).checkpoint_hash


def _lm_manifest(store):
    from truetrain.training import build_manifest
    from truetrain.training.text import demo_corpus, publish_text, split_text

    data = publish_text(store, *split_text(demo_corpus(120_000), 2, 32))
    return build_manifest(name="lm-test", seed=5, numeric_mode="repro",
                          model={"kind": "lm", "d_model": 32, "n_layers": 1, "n_heads": 2, "seq_len": 32},
                          optimizer={"kind": "adamw", "lr": 0.004, "warmup_steps": 4}, batch_size=4,
                          steps_per_task=10, checkpoint_interval=5, rounds=2, outer={"lr": 0.7, "momentum": 0.9},
                          **data)


@pytest.fixture(scope="module")
def finished_lm_job(finished_job):
    """A byte-level LM job (2 text shards x 2 DiLoCo rounds) on the same daemons, after the
    digits job: the int8 worker, the float64 auditor and the test process must agree."""
    net = finished_job[0]
    job_id, manifest, _ = net.submit(shards=2, rounds=2, steps=10, terms=TERMS, node=0, build=_lm_manifest)
    return net, job_id, manifest, net.wait_job(job_id)


def test_distributed_lm_job_equals_local_training_bit_for_bit(finished_lm_job):
    from truetrain.training.lm_eval import heldout_metrics

    net, job_id, manifest, status = finished_lm_job
    assert status == JobStatus.COMPLETED
    with net.store(0) as store:
        shards = [store.fetch(ref.cid, ref.hash, max_size=2**24) for ref in manifest.shards]
        held = store.fetch(manifest.test_set.cid, manifest.test_set.hash, max_size=2**24)
    start = None
    for r in range(manifest.rounds):
        results = [run_task(manifest, shards[i], start, i, r) for i in range(len(shards))]
        start = aggregate(manifest, r, results, start).to_bytes()
    assert checkpoint_hash(start) == JobView.read(net.contracts.market, job_id).checkpoint_hash
    assert heldout_metrics(manifest, start, held)["bits_per_byte"] < 7.0  # learned something in 20 steps


def cli(net, *args) -> dict:
    """``truetrain ARGS --json`` against this market (its first IPFS node), which must succeed."""
    from click.testing import CliRunner

    from truetrain.cli import main

    env = {"TRUETRAIN_RPC": net.rpc, "TRUETRAIN_IPFS": net.nodes[0].api_addr,
           "TRUETRAIN_DEPLOYMENTS": str(net.deployments), "TRUETRAIN_KEY": None}
    result = CliRunner(env=env).invoke(main, [str(a) for a in (*args, "--json")])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def exported_lm(finished_lm_job, tmp_path_factory):
    """`truetrain job export` of the LM job the daemons trained."""
    net, job_id, manifest, _ = finished_lm_job
    out = tmp_path_factory.mktemp("export") / "text-lm"
    return net, job_id, manifest, out, cli(net, "job", "export", job_id, "--out", out)


def test_lm_job_exports_as_gpt2_that_transformers_loads_with_our_logits_and_sampled_bytes(exported_lm):
    """The market's final LM, loaded by the real transformers package from the exported folder,
    gives our stock forward's logits on held-out text and `job sample`'s greedy bytes."""
    from transformers import AutoTokenizer, GPT2LMHeadModel

    from truetrain.training import load_checkpoint
    from truetrain.training.lm import TransformerLM
    from truetrain.training.lm_eval import sample
    from truetrain.training.text import decode_text_shard

    net, job_id, manifest, out, report = exported_lm
    job = JobView.read(net.contracts.market, job_id)
    assert report["checkpoint"] == {"cid": job.checkpoint_cid, "hash": "0x" + job.checkpoint_hash.hex()}
    assert report["round"] == report["rounds"] == 2 and report["format"] == "transformers-gpt2"
    with net.store(0) as store:
        final = fetch_checkpoint(store, job.checkpoint_cid, job.checkpoint_hash, max_size=2**24)
        held = decode_text_shard(store.fetch(manifest.test_set.cid, manifest.test_set.hash, max_size=2**24))
    hf = GPT2LMHeadModel.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    seq = manifest.model.seq_len
    assert tokenizer(held.decode())["input_ids"] == list(held)  # text maps to ids byte by byte
    ids = torch.tensor([list(held[i:i + seq]) for i in range(0, 16 * seq, seq)])
    with torch.no_grad():
        theirs = hf(ids).logits
        ours = TransformerLM(manifest.model, load_checkpoint(final).group("model")).eval()(ids)
    assert (theirs - ours).abs().max() <= 1e-5
    prompt = "import os\ndef "
    length = seq - len(prompt)  # GPT-2 holds n_positions = seq_len ids; `job sample` slides past that
    sampled = cli(net, "job", "sample", job_id, "--prompt", prompt, "--length", length)
    generated = hf.generate(torch.tensor([list(prompt.encode())]), max_new_tokens=length, do_sample=False)
    new = bytes(generated[0, len(prompt):].tolist())
    assert new == sample(manifest, final, prompt.encode(), length)  # the bytes `job sample` decodes
    assert sampled["text"] == new.decode("utf-8", errors="replace") and sampled["checkpoint_cid"] == job.checkpoint_cid


def test_mlp_job_round_exports_safetensors_and_a_module_with_equal_outputs(finished_job, tmp_path):
    import importlib.util

    from truetrain.training import decode_shard, load_checkpoint
    from truetrain.training.models import build_model

    net, job_id, manifest, *_ = finished_job
    report = cli(net, "job", "export", job_id, "--out", tmp_path, "--round", 2)
    with net.store(0) as store:
        reader = net.reader(store)
        cid, digest = reader.rounds_advanced(job_id)[2]
        params = load_checkpoint(reader.fetch_checkpoint(cid, digest), digest).group("model")
        x = torch.from_numpy(decode_shard(reader.test_set(job_id)).x)
    assert report["checkpoint"] == {"cid": cid, "hash": "0x" + digest.hex()} and report["round"] == 2
    spec = importlib.util.spec_from_file_location("exported_digits", tmp_path / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the module alone: torch and safetensors, no truetrain
    classifier = module.TruetrainClassifier.from_pretrained(tmp_path)
    with torch.no_grad():
        assert torch.equal(classifier(x), build_model(manifest.model, params).eval()(x))


@pytest.fixture(scope="module")
def init_lm_job(exported_lm, tmp_path_factory):
    """`job submit --init` from the exported LM folder (its config.json sets --model lm and the
    shape), one shard and one round, trained by the same daemons."""
    from truetrain.training.text import demo_corpus

    net, _, _, out, _ = exported_lm
    text = tmp_path_factory.mktemp("init") / "corpus.txt"
    text.write_bytes(demo_corpus(40_000))
    created = cli(net, "job", "submit", "--account", SUBMITTER_ACCOUNT, "--init", out, "--data", text,
                  "--shards", 1, "--rounds", 1, "--steps", 10, "--checkpoint-interval", 5, "--batch-size", 4,
                  "--collateral", 20, "--accept-window", TERMS.accept_window, "--compute-window",
                  TERMS.compute_window, "--reveal-window", TERMS.reveal_window, "--challenge-window",
                  TERMS.challenge_window)
    return net, created, out, net.wait_job(created["job_id"])


def test_a_job_started_from_an_export_continues_from_it_through_the_market(init_lm_job, exported_lm):
    from truetrain.export import read_init
    from truetrain.training import load_checkpoint
    from truetrain.training.aggregate import global_checkpoint

    net, created, out, status = init_lm_job
    source = exported_lm[1]
    assert status == JobStatus.COMPLETED
    job_id = created["job_id"]
    with net.store(0) as store:
        reader = net.reader(store)
        manifest = reader.manifest(job_id)
        assert manifest.raw["model"] == {"kind": "lm", "d_model": 32, "n_layers": 1, "n_heads": 2, "seq_len": 32}
        assert manifest.raw["initial_checkpoint"] == created["initial_checkpoint"]
        start = reader.round_start(job_id, 0)  # fetched against the hash the manifest binds
        exported = read_init(out, manifest.model, "export")
        # Round 0's checkpoint is the export's tensors, which are the source job's final model, bit for bit.
        assert checkpoint_hash(start) == global_checkpoint(manifest, 0, exported).hash() == manifest.initial_checkpoint.hash
        source_final = load_checkpoint(reader.final_checkpoint(source)[2]).group("model")
        assert all(torch.equal(exported[k], source_final[k]) for k in source_final)
        # The worker's committed checkpoint 0 holds them, and training went on from there: the
        # market's final model is local training from the export, bit for bit.
        bundle = reader.result(encode_task_id(job_id, 0, 0))
        first = load_checkpoint(reader.fetch_checkpoint(bundle.checkpoints[0].cid, bundle.checkpoints[0].hash))
        assert all(torch.equal(first.group("model")[k], exported[k]) for k in exported)
        shard = reader.shard(job_id, 0)
    local = aggregate(manifest, 0, [run_task(manifest, shard, start, 0, 0)], start).to_bytes()
    final = JobView.read(net.contracts.market, job_id).checkpoint_hash
    assert checkpoint_hash(local) == final != manifest.initial_checkpoint.hash


def test_checkpoints_cross_ipfs_nodes_over_the_peer_to_peer_exchange(finished_job):
    """Worker 2 is the only one on node 0 besides the data; what it published was read by
    the aggregator or the auditor on node 1 (or the reverse) for the job to complete."""
    net, job_id, manifest, *_ = finished_job
    revealed = {e["args"]["taskId"]: e["args"] for e in net.events("ResultRevealed")}
    by_node0 = [t for t, a in revealed.items() if a["worker"] == dev_account(2).address and t & 0xFFFFFFFF < 3]
    by_node1 = [t for t, a in revealed.items() if a["worker"] != dev_account(2).address]
    assert by_node0 and by_node1
    with net.store(0) as first, net.store(1) as second:
        assert second.id().peer_id != first.id().peer_id
        assert any(p.peer_id == second.id().peer_id for p in first.peers())
        # Node 1 holds a bundle only node 0 was given (its worker published it there) ...
        cid = revealed[by_node0[0]]["resultCid"]
        assert second.fetch_unverified(cid, max_size=2**20)
        # ... and node 0 a bundle published on node 1.
        assert first.fetch_unverified(revealed[by_node1[0]]["resultCid"], max_size=2**20)


def metric(text: str, series: str, default: float | None = None) -> float:
    """The value of ``series`` (a name with its labels as Prometheus prints them)."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    if default is not None:
        return default
    raise AssertionError(f"no series {series} in:\n{text}")


def test_daemons_expose_prometheus_metrics(finished_job):
    net, job_id, *_ = finished_job
    worker = requests.get(f"http://127.0.0.1:{net.metrics_ports['worker']}/metrics", timeout=5).text
    verifier = requests.get(f"http://127.0.0.1:{net.metrics_ports['verifier']}/metrics", timeout=5).text
    assert metric(worker, "truetrain_training_steps_total") >= 60
    assert metric(worker, "truetrain_training_steps_per_second") > 0
    assert metric(worker, 'truetrain_transactions_total{function="commitResult"}') >= 1
    assert metric(worker, 'truetrain_tasks{kind="work",state="done"}') >= 1
    gpu = metric(worker, "truetrain_gpu_utilization_percent")
    assert gpu >= 0 if detect(measure=False).gpus else gpu == -1
    assert metric(verifier, 'truetrain_audits_total{kind="audit",outcome="match"}') >= 1
    finalize = 'truetrain_transactions_total{function="finalize"}'
    assert metric(verifier, finalize, 0) + metric(verifier, finalize[:-2] + 'Many"}', 0) >= 1
    assert metric(verifier, "truetrain_chain_block") > 0
    assert metric(worker, 'truetrain_gemm_route{device="cpu",route="int8"}') == 1
    assert metric(verifier, 'truetrain_gemm_route{device="cpu",route="float64"}') == 1


def test_verifier_audited_and_every_daemon_stops_cleanly_on_sigterm(finished_job):
    net, job_id, *_, verifier = finished_job
    revealed = [e for e in net.events("AuditRevealed") if e["args"]["taskId"] >> 64 == job_id]
    assert revealed and all(e["args"]["auditor"] == dev_account(VERIFIER).address for e in revealed)
    assert not [e for e in net.events("TaskDisputed")]
    assert not [(e["args"]["taskId"], e["args"]["phase"], e["args"]["account"]) for e in net.events("TaskTimedOut")]
    codes = [d.terminate() for d in net.daemons]
    assert codes == [0, 0, 0, 0]
    assert "verifier stopped" in verifier.log_text()
