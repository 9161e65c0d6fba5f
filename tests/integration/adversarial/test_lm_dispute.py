"""Disputes on a language-model job, against real daemons, ended by the chain's own
computation. A byte-level transformer (AdamW with warm-up, dropout, a checkpoint every step)
is trained on two shards by two named cheaters:

* ``flip-element:5`` flips one element of one operator's output (the embedding's) in step 5;
* ``flip-element:3@adam`` corrupts only the AdamW update of step 3 (one element of the first
  parameter's new value);

each plays its dispute consistently with its flip. A sampling verifier replays and
challenges each; level 0 narrows the disagreement to one step (a checkpoint every step), the
StepGame to the flipped operator and one element of its output, and the chain recomputes that
element: unlike the worker's (``OneStepDiffered``). No referee runs or is drawn. Each cheater
is slashed, an honest worker redoes both tasks, and the job ends on the checkpoint of the
same manifest trained in one process with no chain."""

from __future__ import annotations

import pytest

from tests.integration.adversarial.test_cheating_workers import address, leave_pool, settled
from tests.integration.market_net import TOKEN, MarketNet
from truetrain.market import JobStatus, encode_task_id
from truetrain.market.jobs import JobTerms
from truetrain.market.views import JobView
from truetrain.trace import derive
from truetrain.training import aggregate, build_manifest, checkpoint_hash, run_task
from truetrain.training.text import demo_corpus, publish_text, split_text

CHALLENGER, HONEST = 5, 11
#: worker account -> (its named fault, the step it flips in, the kind of entry flipped)
CHEATERS = {2: ("flip-element:5", 5, "embedding"), 3: ("flip-element:3@adam", 3, "adam")}
SHARDS, STEPS, INTERVAL = 2, 8, 1
# Two tasks to replay: a challenge window of 80 blocks leaves the sampling verifier ample time.
TERMS = JobTerms(reward_per_task=10 * TOKEN, audit_fee=2 * TOKEN, worker_collateral=20 * TOKEN,
                 accept_window=20, compute_window=40, reveal_window=40, challenge_window=80, audit_rate_bps=0)
LM = {"kind": "lm", "d_model": 32, "n_layers": 1, "n_heads": 2, "seq_len": 16, "dropout": 0.1}


def build_lm(store):
    shards, held = split_text(demo_corpus(40_000), SHARDS, seq_len=LM["seq_len"])
    return build_manifest(name="lm-dispute", seed=5, model=LM, optimizer={"kind": "adamw", "lr": 0.003, "warmup_steps": 2},
                          batch_size=4, steps_per_task=STEPS, checkpoint_interval=INTERVAL, rounds=1,
                          outer={"lr": 0.7, "momentum": 0.9}, **publish_text(store, shards, held))


@pytest.fixture(scope="module")
def lm_dispute(tmp_path_factory, TrainToken):  # TrainToken: brownie has compiled build/
    with MarketNet(tmp_path_factory.mktemp("lm-dispute")) as net:
        net.fund(HONEST)
        net.start("verifier", CHALLENGER, extra=["--keeper", "--sample-rate", "1"])
        for index, (fault, *_) in CHEATERS.items():
            net.start("worker", index, extra=["--max-concurrent", "1"], env={"TRUETRAIN_FAULT": fault})
        job_id, manifest, _ = net.submit(shards=SHARDS, rounds=1, steps=STEPS, terms=TERMS, build=build_lm)
        net.wait_for("both cheaters committed", lambda: len(net.events("ResultCommitted")) >= SHARDS)
        for index in CHEATERS:
            leave_pool(net, index)
        net.start("worker", HONEST, extra=["--max-concurrent", str(SHARDS)])
        status = net.wait_job(job_id, timeout=600)
        yield net, job_id, manifest, status


def test_lm_job_completes_on_the_honest_single_process_checkpoint(lm_dispute):
    net, job_id, manifest, status = lm_dispute
    assert status == JobStatus.COMPLETED
    with net.store(0) as store:
        shards = [store.fetch(ref.cid, ref.hash, max_size=2**24) for ref in manifest.shards]
    honest = aggregate(manifest, 0, [run_task(manifest, shards[i], None, i, 0) for i in range(SHARDS)]).to_bytes()
    assert JobView.read(net.contracts.market, job_id).checkpoint_hash == checkpoint_hash(honest)
    finalized = {e["args"]["taskId"]: e["args"]["worker"] for e in net.events("TaskFinalized")}
    assert all(finalized[encode_task_id(job_id, 0, i)] == address(HONEST) for i in range(SHARDS))


@pytest.mark.parametrize("cheater", list(CHEATERS), ids=["one-operator-element", "adamw-update-only"])
def test_lm_cheater_is_found_to_one_element_that_the_chain_recomputes(lm_dispute, cheater):
    net, job_id, manifest, _ = lm_dispute
    _, step, kind = CHEATERS[cheater]
    [opened] = [e for e in net.game_events("DisputeOpened")
                if e["args"]["taskId"] >> 64 == job_id and e["args"]["worker"] == address(cheater)]
    game_id = opened["args"]["gameId"]
    assert opened["args"]["challenger"] == address(CHALLENGER)
    ended = net.game_events("BisectionEnded", gameId=game_id)[0]["args"]
    # flipped in the step from `step`: leaf step + 1 (position step + 2) is the first to differ
    assert (ended["lo"], ended["hi"]) == (step + 1, step + 2)
    sid = net.game_events("StepGameOpened", gameId=game_id)[0]["args"]["stepGameId"]
    step_game = net.contracts.stepgame
    [resolved] = step_game.events.GameResolved().get_logs(from_block=0, argument_filters={"id": sid})
    assert (resolved["args"]["winner"], resolved["args"]["loser"], resolved["args"]["reason"]) == (
        address(CHALLENGER), address(cheater), 1)  # OneStepDiffered: the chain's element is not the worker's
    disputed_step, app, _ = step_game.functions.disputed(sid).call()
    program = derive(manifest)
    first = next(t for t, a in enumerate(program.entries) if a.kind == kind)
    assert (disputed_step, app) == (0, first)  # the one step of the interval, the flipped operator
    assert not net.game_events("RefereesRequested", gameId=game_id)
    outcome = settled(net, game_id)["args"]
    assert (outcome["workerWon"], outcome["loser"], outcome["slashed"]) == (False, address(cheater), 20 * TOKEN)
    assert net.contracts.stake.functions.stakeOf(address(cheater)).call()[0] == 500 * TOKEN - 20 * TOKEN
    w3 = net.contracts.client.w3
    level0 = {e["transactionHash"] for name in ("DisputeOpened", "DisputeBisected")
              for e in net.game_events(name, gameId=game_id)}
    moves = {e["transactionHash"] for name in ("StepsCommitted", "ChildrenRevealed", "TraceCommitted", "OutputOpened",
                                               "ChildPicked", "ChunkRevealed", "GameResolved")
             for e in getattr(step_game.events, name)().get_logs(from_block=0, argument_filters={"id": sid})}
    gas = {tx: w3.eth.get_transaction_receipt(tx)["gasUsed"] for tx in level0 | moves}
    print(f"\nLM dispute ({kind} flipped): {len(level0)} level-0 and {len(moves)} StepGame transactions, "
          f"{sum(gas.values()):,} gas in all, the dearest {max(gas.values()):,}")
