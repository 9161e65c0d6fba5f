"""A whole job through the worker and verifier daemons, each a separate process.

Three workers and a verifier on two IPFS nodes (the submitter's data and one worker on the
first, two workers and the verifier on the second, so shards and checkpoints cross the
peer-to-peer exchange), a digits MLP job of 3 shards x 3 rounds; then the same manifest
trained in this process with no chain at all must give the same final checkpoint bits.
"""

from __future__ import annotations

from collections import Counter

import pytest
import requests

from tests.integration.market_net import TOKEN, MarketNet
from truetrain.chain.client import dev_account
from truetrain.chain.devnet import free_port
from truetrain.hardware import detect
from truetrain.hashing import keccak256
from truetrain.market import JobStatus, TaskStatus, TaskView, encode_task_id
from truetrain.market.jobs import JobTerms
from truetrain.market.views import JobView
from truetrain.training import aggregate, evaluate, run_task

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
    assert keccak256(start) == JobView.read(net.contracts.market, job_id).checkpoint_hash


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
    assert keccak256(start) == JobView.read(net.contracts.market, job_id).checkpoint_hash
    assert heldout_metrics(manifest, start, held)["bits_per_byte"] < 7.0  # learned something in 20 steps


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
