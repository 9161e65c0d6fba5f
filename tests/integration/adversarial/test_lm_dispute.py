"""A dispute on a language-model task, against real daemons: a worker trains a byte-level
transformer honestly but nudges its model after step 5 of 8 (``perturb-step:5``), a
sampling verifier replays the task and challenges, the bisection narrows the disagreement
to one inner AdamW step (a checkpoint every step), three verifier daemons recompute that
step as referees, the cheater is slashed, an honest worker redoes the task, and the
job ends on the checkpoint of the same manifest trained in one process with no chain."""

from __future__ import annotations

import pytest

from tests.integration.adversarial.test_cheating_workers import address, leave_pool, settled
from tests.integration.market_net import TOKEN, MarketNet
from truetrain.market import JobStatus, encode_task_id
from truetrain.market.jobs import JobTerms
from truetrain.market.views import JobView
from truetrain.training import aggregate, build_manifest, checkpoint_hash, run_task
from truetrain.training.text import demo_corpus, publish_text, split_text

CHALLENGER, REFEREES, CHEATER, HONEST = 5, (6, 7, 8), 2, 11
STEPS, INTERVAL = 8, 1
# One task to replay: a challenge window of 60 blocks leaves the sampling verifier ample time.
TERMS = JobTerms(reward_per_task=10 * TOKEN, audit_fee=2 * TOKEN, worker_collateral=20 * TOKEN,
                 accept_window=20, compute_window=40, reveal_window=40, challenge_window=60, audit_rate_bps=0)
LM = {"kind": "lm", "d_model": 32, "n_layers": 1, "n_heads": 2, "seq_len": 16}


def build_lm(store):
    shards, held = split_text(demo_corpus(40_000), 1, seq_len=LM["seq_len"])
    return build_manifest(name="lm-dispute", seed=5, model=LM, optimizer={"kind": "adamw", "lr": 0.003, "warmup_steps": 2},
                          batch_size=4, steps_per_task=STEPS, checkpoint_interval=INTERVAL, rounds=1,
                          outer={"lr": 0.7, "momentum": 0.9}, **publish_text(store, shards, held))


@pytest.fixture(scope="module")
def lm_dispute(tmp_path_factory, TrainToken):  # TrainToken: brownie has compiled build/
    with MarketNet(tmp_path_factory.mktemp("lm-dispute")) as net:
        net.fund(11)
        net.start("verifier", CHALLENGER, extra=["--keeper", "--sample-rate", "1"])
        for index in REFEREES:
            net.start("verifier", index)
        net.start("worker", CHEATER, extra=["--max-concurrent", "1"], env={"TRUETRAIN_FAULT": "perturb-step:5"})
        job_id, manifest, _ = net.submit(shards=1, rounds=1, steps=STEPS, terms=TERMS, build=build_lm)
        net.wait_for("the cheater committed", lambda: len(net.events("ResultCommitted")) >= 1)
        leave_pool(net, CHEATER)
        net.start("worker", HONEST)
        status = net.wait_job(job_id, timeout=600)
        yield net, job_id, manifest, status


def test_lm_job_completes_on_the_honest_single_process_checkpoint(lm_dispute):
    net, job_id, manifest, status = lm_dispute
    assert status == JobStatus.COMPLETED
    with net.store(0) as store:
        shard = store.fetch(manifest.shards[0].cid, manifest.shards[0].hash, max_size=2**24)
    honest = aggregate(manifest, 0, [run_task(manifest, shard, None, 0, 0)]).to_bytes()
    assert JobView.read(net.contracts.market, job_id).checkpoint_hash == checkpoint_hash(honest)
    finalized = {e["args"]["taskId"]: e["args"]["worker"] for e in net.events("TaskFinalized")}
    assert finalized[encode_task_id(job_id, 0, 0)] == address(HONEST)


def test_lm_cheater_bisected_to_one_interval_recomputed_by_the_referees_and_slashed(lm_dispute):
    net, job_id, *_ = lm_dispute
    [opened] = [e for e in net.game_events("DisputeOpened") if e["args"]["taskId"] >> 64 == job_id]
    game_id = opened["args"]["gameId"]
    assert (opened["args"]["worker"], opened["args"]["challenger"]) == (address(CHEATER), address(CHALLENGER))
    ended = net.game_events("BisectionEnded", gameId=game_id)[0]["args"]
    assert (ended["lo"], ended["hi"]) == (5, 6)  # nudged at step 5 = leaf 5 (position 6): agreed at leaf 4
    votes = [e["args"]["vote"] for e in net.game_events("VoteRevealed", gameId=game_id)]
    assert votes == [2, 2, 2]  # every referee recomputed the one step and sided with the challenger
    outcome = settled(net, game_id)["args"]
    assert (outcome["workerWon"], outcome["loser"], outcome["slashed"]) == (False, address(CHEATER), 20 * TOKEN)
    assert net.contracts.stake.functions.stakeOf(address(CHEATER)).call()[0] == 500 * TOKEN - 20 * TOKEN
    txs = {e["transactionHash"] for name in ("DisputeOpened", "DisputeBisected", "RefereesDrawn", "VoteCommitted",
                                              "VoteRevealed", "DisputeSettled")
           for e in net.game_events(name, gameId=game_id)}
    w3 = net.contracts.client.w3
    gas = sum(w3.eth.get_transaction_receipt(tx)["gasUsed"] for tx in txs)
    print(f"\nLM dispute: {len(txs)} transactions, {gas:,} gas from challenge to settlement")
