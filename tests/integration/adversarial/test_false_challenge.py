"""A false challenger against an honest worker, then the dispute's guards on the same chain.

4. A ``false-challenge`` verifier (its replay has one element of one operator's output
   flipped in step 20, and it plays its game consistently with that) challenges an honest
   result: level 0 narrows it to one checkpoint interval, the StepGame to one step, one
   operator and one element, and the chain's own recomputation of that element agrees with
   the worker: no referee is drawn (none runs), the challenger loses its bond (the worker
   gets half, the rest is burned), the result gets its challenge window back and is paid;
   the job completes with the honest final checkpoint.
8. With the daemons stopped: ``truetrain challenge`` refuses what it cannot do in one line
   without sending anything, and opens a game on a wrong result; then a second concurrent
   challenge, a move out of turn, a forged Merkle proof and a move after the clock ran out
   each revert with their custom error through the real client.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from web3.logs import DISCARD

from tests.integration.market_net import TOKEN, MarketNet
from truetrain.chain.client import dev_account
from truetrain.cli import main
from truetrain.dispute import GameView, Party, claims_for
from truetrain.errors import ContractRevert
from truetrain.hashing import keccak256
from truetrain.market import JobStatus, TaskStatus, TaskView, new_salt, result_commitment
from truetrain.market.jobs import JobTerms
from truetrain.market.randomness import draw_offers
from truetrain.market.views import JobView
from truetrain.training import aggregate, checkpoint_hash, run_task
from truetrain.training.merkle import merkle_root

TERMS = JobTerms(reward_per_task=10 * TOKEN, audit_fee=2 * TOKEN, worker_collateral=20 * TOKEN,
                 accept_window=20, compute_window=60, reveal_window=60, challenge_window=60, audit_rate_bps=0)
WORKER, KEEPER, LIAR = 2, 5, 12
STEPS, INTERVAL = 40, 5


def address(index: int) -> str:
    return dev_account(index).address


@pytest.fixture(scope="module")
def false_challenge(tmp_path_factory, TrainToken):  # TrainToken: brownie has compiled build/
    with MarketNet(tmp_path_factory.mktemp("false-challenge")) as net:
        net.fund(LIAR)
        net.start("verifier", KEEPER, extra=["--keeper"])
        net.start("verifier", LIAR, extra=["--sample-rate", "1"], env={"TRUETRAIN_FAULT": "false-challenge"})
        net.start("worker", WORKER)
        job_id, manifest, _ = net.submit(shards=1, rounds=1, steps=STEPS, interval=INTERVAL, terms=TERMS)
        status = net.wait_job(job_id)
        yield net, job_id, manifest, status


def test_false_challenger_loses_its_bond_and_the_honest_result_is_paid(false_challenge):
    net, job_id, manifest, status = false_challenge
    assert status == JobStatus.COMPLETED
    opened = [e["args"] for e in net.game_events("DisputeOpened")]
    assert len(opened) == 1 and opened[0]["challenger"] == address(LIAR) and opened[0]["worker"] == address(WORKER)
    game_id, task_id = opened[0]["gameId"], opened[0]["taskId"]
    outcome = net.game_events("DisputeSettled", gameId=game_id)[0]["args"]
    assert (outcome["workerWon"], outcome["loser"], outcome["slashed"]) == (True, address(LIAR), 20 * TOKEN)
    assert not net.game_events("RefereesRequested", gameId=game_id)
    # the liar's flip is in step 20 (checkpoint leaf 4 is step 20): level 0 ends on (5, 6)
    ended = net.game_events("BisectionEnded", gameId=game_id)[0]["args"]
    assert (ended["lo"], ended["hi"]) == (5, 6)
    handed = net.game_events("StepGameOpened", gameId=game_id)[0]["args"]
    assert (handed["firstBatch"], handed["steps"]) == (4 * INTERVAL, INTERVAL)
    step_game = net.contracts.stepgame
    resolved = step_game.events.GameResolved().get_logs(from_block=0, argument_filters={"id": handed["stepGameId"]})
    assert [(e["args"]["winner"], e["args"]["loser"], e["args"]["reason"]) for e in resolved] == [
        (address(WORKER), address(LIAR), 0)]  # OneStepAgreed: the chain's element is the worker's
    step, app, _ = step_game.functions.disputed(handed["stepGameId"]).call()
    assert (step, app) == (0, 0)  # the liar's first step (task step 20), fc.0's linear
    stake, registry = net.contracts.stake.functions, net.contracts.registry.functions
    assert stake.stakeOf(address(LIAR)).call()[0] == 500 * TOKEN - 20 * TOKEN
    credited = sum(e["args"]["amount"] for e in net.contracts.stake.events.Credited().get_logs(
        from_block=0, argument_filters={"account": address(WORKER)}))
    assert credited == 10 * TOKEN  # half the bond
    assert registry.identityOf(address(WORKER)).call()[-1][3] == 1  # disputesWon
    assert registry.identityOf(address(LIAR)).call()[-1][4] == 1  # disputesLost
    # the result stood: its window resumed, then it was finalized and paid to the worker
    resumed = [e for e in net.events("ChallengeWindowOpened", taskId=task_id)]
    assert len(resumed) == 2
    paid = net.events("TaskFinalized", taskId=task_id)[0]["args"]
    assert (paid["worker"], paid["reward"]) == (address(WORKER), 10 * TOKEN)
    with net.store(0) as store:
        shard = store.fetch(manifest.shards[0].cid, manifest.shards[0].hash, max_size=2**24)
    final = aggregate(manifest, 0, [run_task(manifest, shard, None, 0, 0)]).to_bytes()
    assert JobView.read(net.contracts.market, job_id).checkpoint_hash == checkpoint_hash(final)


def _mine_past(w3):
    def mine_past(block: int) -> None:
        if w3.eth.block_number <= block:
            w3.provider.make_request("anvil_mine", [hex(block + 1 - w3.eth.block_number)])
    return mine_past


def _cli(net, *args):
    return CliRunner().invoke(main, [*args, "--rpc", net.rpc, "--ipfs", net.nodes[0].api_addr,
                                     "--deployments", str(net.deployments)])


def test_challenge_command_refuses_then_opens_a_game_and_the_game_guards_hold(false_challenge):
    net, *_ = false_challenge
    for daemon in net.daemons:
        daemon.terminate()
    client, market, game = net.contracts.client, net.contracts.market, net.contracts.game
    w3 = client.w3
    challenger, rival = dev_account(6), dev_account(7)
    for account in (challenger, rival):  # bonds come from free stake
        client.transact(net.contracts.token.functions.approve(net.contracts.stake.address, 100 * TOKEN), account)
        client.transact(net.contracts.stake.functions.stake(100 * TOKEN), account)

    # a finalized task cannot be challenged: one line, exit 1, nothing sent
    done = net.events("TaskFinalized")[0]["args"]["taskId"]
    nonce = w3.eth.get_transaction_count(challenger.address)
    result = _cli(net, "challenge", str(done), "--account", "6")
    assert result.exit_code == 1
    assert result.stderr.strip() == f"error: task {done} is not in its challenge window (finalized)"
    assert w3.eth.get_transaction_count(challenger.address) == nonce

    # a worker reveals a made-up result (no checkpoint of it replays)
    job_id, manifest, _ = net.submit(shards=1, rounds=1, steps=STEPS, interval=INTERVAL, terms=TERMS)
    keeper, worker = dev_account(KEEPER), dev_account(WORKER)
    receipt = draw_offers(market, job_id, lambda call: client.transact(call, keeper, gas=3_000_000), _mine_past(w3),
                          lambda: w3.eth.block_number)
    task = market.events.TaskDrawn().process_receipt(receipt.raw, errors=DISCARD)[0]["args"]["taskId"]
    fake = [keccak256(f"made-up:{i}".encode()) for i in range(manifest.checkpoint_leaves)]
    root, salt = merkle_root(fake), new_salt()
    client.transact(market.functions.acceptTask(task), worker)
    client.transact(market.functions.commitResult(task, result_commitment(task, root, "bafyfake", salt, worker.address)),
                    worker, gas=3_000_000)
    client.transact(market.functions.revealResult(task, root, "bafyfake", salt), worker)
    assert TaskView.read(market, task).status == TaskStatus.CHALLENGE_WINDOW

    bad_root = "0x" + "ab" * 32
    result = _cli(net, "challenge", str(task), "--account", "6", "--root", bad_root)
    assert result.exit_code == 1 and result.stderr.startswith(f"error: your replay of task {task} gives root 0x")
    assert result.stderr.strip().endswith(f"not --root {bad_root}")
    assert w3.eth.get_transaction_count(challenger.address) == nonce

    result = _cli(net, "challenge", str(task), "--account", "6", "--json")
    assert result.exit_code == 0, result.output
    opened = json.loads(result.stdout)
    game_id = opened["game_id"]
    g = GameView.read(game, game_id)
    assert (g.task_id, g.challenger, g.turn, g.worker_root) == (task, challenger.address, Party.WORKER, root)

    with pytest.raises(ContractRevert) as second:
        client.transact(game.functions.challenge(task, "0x" + "cd" * 32, []), rival)
    assert second.value.error == "DisputeAlreadyOpen"
    with pytest.raises(ContractRevert) as out_of_turn:
        client.transact(game.functions.move(game_id, []), challenger)
    assert out_of_turn.value.error == "DisputeNotYourTurn"
    due = [c.as_tuple() for c in claims_for(g, fake, ["bafyfake"] * len(fake), Party.WORKER)]
    forged = [(bytes(32), due[0][1], due[0][2])] + due[1:]
    with pytest.raises(ContractRevert) as bad_proof:
        client.transact(game.functions.move(game_id, forged), worker)
    assert bad_proof.value.error == "DisputeProofInvalid"
    w3.provider.make_request("anvil_mine", [hex(g.worker_clock + 1)])
    with pytest.raises(ContractRevert) as late:
        client.transact(game.functions.move(game_id, due), worker)
    assert late.value.error == "DisputeClockExpired"
    client.transact(game.functions.timeout(game_id), challenger)
    assert GameView.read(game, game_id).worker_won is False
    assert TaskView.read(market, task).status == TaskStatus.PENDING
