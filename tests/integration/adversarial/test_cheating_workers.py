"""Cheating workers against real daemons, one job of five shards, one cheater a shard:

1. ``flip-element:15`` flips one element of one operator's output in step 15 of 40 and plays
   its game consistently with it: level 0 narrows to one checkpoint interval, the StepGame to
   one step, one operator and one element, which the chain recomputes: the verdict is that
   computation (no referee is drawn);
2. ``lazy`` returns its start checkpoint as every checkpoint: its own training cannot back
   its claim in the StepGame, so its moves are refused and it loses on its clock there;
3. ``wrong-start`` trains from a wrong checkpoint 0 (the one dispute that still ends with a
   committee: no checkpoint leaf holds the task's inputs for the chain to start from);
5. ``perturb-step:10,stall-dispute`` cheats, then stops answering in the game;
6. ``withhold,perturb-step:5`` cheats and publishes nothing it committed to;
7. one of the three referees of that committee is a ``lying-referee``.

A verifier samples every result and challenges what does not replay; three verifier
daemons referee. Every cheater must lose its collateral (split 50 / 20 / 30), its task be
redone by the honest worker, and the job end with the same final checkpoint as training
the manifest in one process with no chain. The cheaters and the lying referee are the real
daemons with a named ``TRUETRAIN_FAULT``; nothing of the chain, IPFS or training is mocked.
"""

from __future__ import annotations

import time

import pytest

from tests.integration.market_net import TOKEN, MarketNet
from truetrain.chain.client import dev_account
from truetrain.errors import TruetrainError
from truetrain.market import JobStatus, encode_task_id
from truetrain.market.jobs import JobTerms
from truetrain.market.views import JobView
from truetrain.training import aggregate, checkpoint_hash, run_task

# The challenge window leaves the sampling verifier time to replay all five results one
# after the other on a loaded 2-core machine: the devnet mines every 0.5 s and on every
# transaction, so 60 blocks once passed in 13 s and three cheaters were paid unchallenged.
TERMS = JobTerms(reward_per_task=10 * TOKEN, audit_fee=2 * TOKEN, worker_collateral=20 * TOKEN,
                 accept_window=20, compute_window=60, reveal_window=60, challenge_window=150, audit_rate_bps=0)
CHALLENGER, REFEREES, LIAR = 5, (6, 7), 8
CHEATERS = {2: "flip-element:15", 3: "lazy", 4: "wrong-start", 9: "perturb-step:10,stall-dispute",
            10: "withhold,perturb-step:5"}
HONEST = 11
SHARDS, STEPS, INTERVAL = 5, 40, 5
LEAVES = STEPS // INTERVAL + 1


def address(index: int) -> str:
    return dev_account(index).address


@pytest.fixture(scope="module")
def cheated_job(tmp_path_factory, TrainToken):  # TrainToken: brownie has compiled build/
    with MarketNet(tmp_path_factory.mktemp("cheaters")) as net:
        net.fund(10, 11)
        net.start("verifier", CHALLENGER, extra=["--keeper", "--sample-rate", "1"])
        for index in REFEREES:
            net.start("verifier", index)
        net.start("verifier", LIAR, env={"TRUETRAIN_FAULT": "lying-referee"})
        for index, fault in CHEATERS.items():
            net.start("worker", index, extra=["--max-concurrent", "1"], env={"TRUETRAIN_FAULT": fault})
        job_id, manifest, escrow = net.submit(shards=SHARDS, rounds=1, steps=STEPS, interval=INTERVAL, terms=TERMS)
        net.wait_for("every cheater committed", lambda: len(net.events("ResultCommitted")) >= SHARDS)
        # The cheaters' operators walk away (their running tasks and games go on); an honest
        # worker joins to redo what they lose, all five at once (a task holds its worker's slot
        # until it is finalized, a challenge window later: one at a time took five windows).
        for index in CHEATERS:
            leave_pool(net, index)
        net.start("worker", HONEST, extra=["--max-concurrent", str(SHARDS)])
        status = net.wait_job(job_id, timeout=600)
        yield net, job_id, manifest, status


def leave_pool(net, index: int) -> None:
    """Send ``leavePool`` with the cheater's key; its daemon uses the same key, so a nonce may
    collide once: the client resyncs after a failed send and the next try goes through."""
    pool, client = net.contracts.pool, net.contracts.client
    for _ in range(5):
        try:
            # (gas for the costlier path: a hold may start or end between estimate and block)
            client.transact(pool.functions.leavePool(), dev_account(index), gas=500_000)
            return
        except TruetrainError:
            time.sleep(0.5)
    raise AssertionError(f"worker {index} could not leave the pool")


def games_of(net, job_id: int) -> dict[int, dict]:
    """Each cheater's game: {worker index: DisputeOpened args}."""
    opened = [e["args"] for e in net.game_events("DisputeOpened") if e["args"]["taskId"] >> 64 == job_id]
    by_worker = {a["worker"]: a for a in opened}
    return {index: by_worker[address(index)] for index in CHEATERS if address(index) in by_worker}


def settled(net, game_id: int) -> dict:
    return net.game_events("DisputeSettled", gameId=game_id)[0]


def test_job_completes_with_the_honest_final_checkpoint(cheated_job):
    net, job_id, manifest, status = cheated_job
    assert status == JobStatus.COMPLETED
    with net.store(0) as store:
        shards = [store.fetch(ref.cid, ref.hash, max_size=2**24) for ref in manifest.shards]
    results = [run_task(manifest, shards[i], None, i, 0) for i in range(SHARDS)]
    honest_final = aggregate(manifest, 0, results).to_bytes()
    assert JobView.read(net.contracts.market, job_id).checkpoint_hash == checkpoint_hash(honest_final)
    # every shard task was redone by the honest worker
    finalized = {e["args"]["taskId"]: e["args"]["worker"] for e in net.events("TaskFinalized")}
    assert all(finalized[encode_task_id(job_id, 0, i)] == address(HONEST) for i in range(SHARDS))


def test_every_cheater_is_challenged_loses_and_is_slashed(cheated_job):
    net, job_id, *_ = cheated_job
    games = games_of(net, job_id)
    assert set(games) == set(CHEATERS)
    stake, registry = net.contracts.stake.functions, net.contracts.registry.functions
    for index, opened in games.items():
        outcome = settled(net, opened["gameId"])["args"]
        assert (outcome["workerWon"], outcome["loser"], outcome["winner"]) == (False, address(index), address(CHALLENGER))
        assert outcome["slashed"] == 20 * TOKEN
        # a cheater whose leavePool was deferred (a draw held the pool) may have been offered a
        # redone task and let it lapse: that costs it its timeout penalty besides, by the event
        lapsed = sum(e["args"]["penalty"] for e in net.events("TaskTimedOut", account=address(index)))
        assert lapsed in (0, 2 * TOKEN)
        assert stake.stakeOf(address(index)).call()[0] == 500 * TOKEN - 20 * TOKEN - lapsed
        history = registry.identityOf(address(index)).call()[-1]
        assert history[4] == 1  # disputesLost
        # 5,000 halved by the lost dispute (and a tenth off that for a lapsed offer, as above)
        assert registry.reputationOf(address(index)).call() == (2_500 if not lapsed else 2_250)


def test_flipped_element_is_found_and_recomputed_by_the_chain(cheated_job):
    net, job_id, *_ = cheated_job
    game_id = games_of(net, job_id)[2]["gameId"]
    ended = net.game_events("BisectionEnded", gameId=game_id)[0]
    # flipped in the step from 15 (leaf 3, position 4): leaf 4 (step 20) is the first to differ
    assert (ended["args"]["lo"], ended["args"]["hi"]) == (4, 5)
    moves = net.game_events("DisputeBisected", gameId=game_id)
    # at most ceil(log2(leaves)) moves after the opening (exactly that for a power of two)
    assert (LEAVES - 1).bit_length() - 1 <= len(moves) - 1 <= (LEAVES - 1).bit_length()
    handed = net.game_events("StepGameOpened", gameId=game_id)[0]["args"]
    slot = games_of(net, job_id)[2]["taskId"] & 0xFFFFFFFF  # round 0: the shard index
    assert (handed["firstBatch"], handed["steps"]) == (slot * 64 + 3 * INTERVAL, INTERVAL)  # 40 steps a task: width 64
    step_game = net.contracts.stepgame
    sid = handed["stepGameId"]
    resolved = step_game.events.GameResolved().get_logs(from_block=0, argument_filters={"id": sid})
    assert [(e["args"]["winner"], e["args"]["loser"], e["args"]["reason"]) for e in resolved] == [
        (address(CHALLENGER), address(2), 1)]  # OneStepDiffered: the chain's element is not the worker's
    assert tuple(step_game.functions.disputed(sid).call())[:2] == (0, 0)  # step 15, fc.0's linear
    assert not net.game_events("RefereesRequested", gameId=game_id)
    block = settled(net, game_id)["blockNumber"]
    slashed = net.contracts.stake.events.StakeSlashed().get_logs(from_block=block, to_block=block)
    assert [(e["args"]["toReferees"], e["args"]["burned"]) for e in slashed] == [(0, 10 * TOKEN)]
    opened_block = net.game_events("DisputeOpened", gameId=game_id)[0]["blockNumber"]
    print(f"\nscenario 1: {len(moves) - 1} level-0 moves after the opening, dispute took "
          f"{block - opened_block} blocks from challenge to the chain's verdict")


def test_lazy_worker_loses_on_the_first_interval_on_its_step_game_clock(cheated_job):
    net, job_id, *_ = cheated_job
    game_id = games_of(net, job_id)[3]["gameId"]
    ended = net.game_events("BisectionEnded", gameId=game_id)[0]["args"]
    assert (ended["lo"], ended["hi"]) == (1, 2)  # agrees on checkpoint 0, not on step 5
    sid = net.game_events("StepGameOpened", gameId=game_id)[0]["args"]["stepGameId"]
    resolved = net.contracts.stepgame.events.GameResolved().get_logs(from_block=0, argument_filters={"id": sid})
    assert [(e["args"]["winner"], e["args"]["reason"]) for e in resolved] == [(address(CHALLENGER), 2)]  # ClockExpired
    assert not net.game_events("RefereesRequested", gameId=game_id)


def test_wrong_start_loses_on_leaf_zero(cheated_job):
    net, job_id, *_ = cheated_job
    ended = net.game_events("BisectionEnded", gameId=games_of(net, job_id)[4]["gameId"])[0]["args"]
    assert (ended["lo"], ended["hi"]) == (0, 1)  # the referees rebuild checkpoint 0 from the inputs


@pytest.mark.parametrize("index", [9, 10], ids=["stops-answering", "withholds-its-checkpoints"])
def test_worker_that_cannot_or_will_not_answer_loses_on_its_clock(cheated_job, index):
    net, job_id, *_ = cheated_job
    game_id = games_of(net, job_id)[index]["gameId"]
    expired = net.game_events("ClockExpired", gameId=game_id)
    assert [e["args"]["party"] for e in expired] == [address(index)]
    assert not net.game_events("RefereesDrawn", gameId=game_id)
    assert not [e for e in net.game_events("DisputeBisected", gameId=game_id) if e["args"]["mover"] == address(index)]


def test_lying_referee_is_outvoted_and_penalised_honest_referees_paid(cheated_job):
    net, job_id, *_ = cheated_job
    decided = [games_of(net, job_id)[4]["gameId"]]  # the one game a committee decides
    # The committee as drawn (read from the chain, not assumed): drawn without replacement
    # from the three eligible verifiers, it seats all three, the liar included.
    committees = [list(e["args"]["referees"]) for g in decided for e in net.game_events("RefereesDrawn", gameId=g)]
    assert [sorted(c) for c in committees] == [sorted(address(i) for i in REFEREES + (LIAR,))]
    penalised = [e["args"] for g in decided for e in net.game_events("RefereePenalized", gameId=g)]
    assert [(p["referee"], p["penalty"], p["revealed"]) for p in penalised] == [(address(LIAR), 5 * TOKEN, True)]
    stake, registry = net.contracts.stake.functions, net.contracts.registry.functions
    assert stake.stakeOf(address(LIAR)).call()[0] == 500 * TOKEN - 5 * TOKEN
    assert registry.identityOf(address(LIAR)).call()[-1][1] == 1  # tasksFailed
    # the decided game: 20 % of the 20 TRAIN slashed, shared by the two honest referees
    credited = {a: 0 for a in REFEREES}
    for g in decided:
        for e in net.contracts.stake.events.StakeSlashed().get_logs(from_block=settled(net, g)["blockNumber"],
                                                                    to_block=settled(net, g)["blockNumber"]):
            assert e["args"]["toReferees"] == 4 * TOKEN and e["args"]["burned"] == 6 * TOKEN
        for a in REFEREES:
            credited[a] += 2 * TOKEN
    for index, amount in credited.items():
        earned = sum(e["args"]["amount"] for e in net.contracts.stake.events.Credited().get_logs(
            from_block=0, argument_filters={"account": address(index)}))
        assert earned == amount


def test_cheated_job_conserves_tokens(cheated_job):
    net, *_ = cheated_job
    token, stake, market = net.contracts.token, net.contracts.stake, net.contracts.market
    holders = [dev_account(i).address for i in range(12)] + [stake.address, market.address, net.contracts.game.address]
    at = {"block_identifier": net.contracts.client.w3.eth.block_number}  # one block: daemons may still move tokens
    held = sum(token.functions.balanceOf(a).call(**at) for a in holders)
    assert token.functions.totalMinted().call(**at) == held + token.functions.totalBurned().call(**at)
    assert token.functions.balanceOf(net.contracts.game.address).call(**at) == 0
    assert token.functions.balanceOf(stake.address).call(**at) == \
        stake.functions.totalStaked().call(**at) + stake.functions.totalCredits().call(**at)
