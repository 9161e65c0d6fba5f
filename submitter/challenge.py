"""``truetrain challenge``: dispute a revealed result with a bond.

The command replays the task from its verified inputs (the same manifest, shard and start
checkpoint the worker used), publishes the replay's checkpoints to IPFS so referees can
fetch them, and opens a dispute game with the replay's root, locking a bond equal to the
task's worker collateral from your free stake. Everything it can check it checks before it
sends anything: the task is in its challenge window, on a ``repro`` job, not already under
dispute; your free stake covers the bond; your replay disagrees with the revealed root (and
equals ``--root`` when given). With ``--follow`` it then plays your side of the game until
the game is resolved (otherwise run ``truetrain verifier run`` with the same account).
"""

from __future__ import annotations

import time

import click

from truetrain.cli_options import Refused, emit, format_tokens, json_option, session_options

FOLLOW_POLL_S = 1.0


class Hex32Type(click.ParamType):
    """A 32-byte hex value, ``0x`` + 64 hex digits."""

    name = "0xHEX32"

    def convert(self, value, param, ctx):
        text = value[2:] if isinstance(value, str) and value.startswith("0x") else ""
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            raw = b""
        if len(raw) != 32:
            self.fail(f"expected 0x and 64 hex digits, got {value!r}", param, ctx)
        return raw


def _refuse_unless_challengeable(session, task_id: int):
    from truetrain.dispute import GameStatus, GameView
    from truetrain.market import TaskStatus

    task = session.reader.task(task_id)
    block = session.client.w3.eth.block_number
    if task.status != TaskStatus.CHALLENGE_WINDOW or block > task.deadline:
        state = task.status.name.lower().replace("_", " ") if task.status != TaskStatus.NONE else "never drawn"
        raise Refused(f"task {task_id} is not in its challenge window ({state}"
                      f"{', window ended at block ' + str(task.deadline) if task.status == TaskStatus.CHALLENGE_WINDOW else ''})")
    game = session.contracts.game
    open_id = game.functions.gameOfTask(task_id).call()
    if open_id and GameView.read(game, open_id).status not in (GameStatus.RESOLVED, GameStatus.VOIDED):
        raise Refused(f"task {task_id} is already under dispute (game {open_id})")
    if not session.reader.manifest(task.job_id).repro:
        raise Refused(f"task {task_id} belongs to a stock-numerics job: only repro jobs can be disputed")
    return task


@click.command("challenge")
@click.argument("task_id", type=click.IntRange(1))
@click.option("--root", "expected_root", type=Hex32Type(), help="The root you expect your replay to give; "
              "refused unless it does.")
@click.option("--follow", is_flag=True, help="Play your side of the game until it is resolved.")
@json_option
@session_options(signing=True)
def challenge(session, as_json, task_id, expected_root, follow):
    """Challenge task TASK_ID's revealed result: replay it, bond its collateral, open the dispute game."""
    from web3.logs import DISCARD

    from truetrain.dispute import opening_claims
    from truetrain.market import compute_task, publish_result

    task = _refuse_unless_challengeable(session, task_id)
    me = session.account.address
    if me.lower() == task.worker.lower():
        raise Refused(f"task {task_id} is your own result: a worker may not challenge itself")
    bond = session.reader.job(task.job_id).worker_collateral
    free = session.contracts.stake.functions.freeStake(me).call()
    if free < bond:
        raise Refused(f"challenging task {task_id} bonds {format_tokens(bond)} TRAIN of free stake; {me} has "
                      f"{format_tokens(free)} TRAIN free (stake more with `truetrain worker stake`)")
    if session.reader.is_stage_task(task_id):
        computed, hashes, cids = _replay_stage(session, task_id)
    else:
        computed = compute_task(session.reader, task_id)
    if expected_root is not None and computed.root != expected_root:
        raise Refused(f"your replay of task {task_id} gives root 0x{computed.root.hex()}, not --root 0x{expected_root.hex()}")
    if computed.root == task.result:
        raise Refused(f"your replay of task {task_id} gives the revealed root 0x{computed.root.hex()}: nothing to challenge")
    if not session.reader.is_stage_task(task_id):
        hashes, cids = [], []
        if computed.training is not None:
            manifest = session.reader.manifest(task.job_id)
            _, bundle = publish_result(session.store, task_id, computed.training, manifest.checkpoint_interval)
            hashes, cids = [c.hash for c in bundle.checkpoints], [c.cid for c in bundle.checkpoints]
    game = session.contracts.game
    claims = [c.as_tuple() for c in opening_claims(hashes, cids)] if hashes else []
    receipt = session.send(game.functions.challenge(task_id, computed.root, claims))
    opened = game.events.DisputeOpened().process_receipt(receipt.raw, errors=DISCARD)[0]["args"]
    game_id = opened["gameId"]
    result = {"task_id": task_id, "game_id": game_id, "root": "0x" + computed.root.hex(),
              "bond_wei": bond, "tx": receipt.tx_hash}
    if not follow:
        emit(result, as_json, f"task {task_id} challenged: game {game_id}, your root 0x{computed.root.hex()[:12]}…, "
                              f"bond {format_tokens(bond)} TRAIN locked (play it out with --follow or `truetrain verifier run`)")
        return
    if not as_json:
        click.echo(f"task {task_id} challenged: game {game_id}; following it (Ctrl-C stops following, the game goes on)")
    result["outcome"] = _follow(session, game_id, hashes, cids, as_json)
    emit(result, as_json, f"game {game_id}: you {result['outcome']}")


def _replay_stage(session, task_id: int):
    """A pipeline stage replayed on the inputs its group's other stages committed to sending
    it (refused until they all revealed), its leaves published: (result, hashes, CIDs)."""
    from truetrain.market import ComputedResult, decode_task_id, encode_task_id
    from truetrain.market.stage_run import publish_stage, replay_stage_task
    from truetrain.market.stages import group_indices

    job_id, round_index, index = decode_task_id(task_id)
    manifest = session.reader.manifest(job_id)
    waiting = [i for i in group_indices(manifest, index)
               if i != index and session.reader.current_reveal(encode_task_id(job_id, round_index, i)) is None]
    if waiting:
        raise Refused(f"task {task_id} is a pipeline stage: it replays on the other stages' revealed results, "
                      f"and tasks {', '.join(str(encode_task_id(job_id, round_index, i)) for i in waiting)} "
                      f"have not revealed yet")
    _, bundle = publish_stage(session.store, replay_stage_task(session.reader, task_id, session.store), manifest)
    hashes, cids = bundle.trace()
    return ComputedResult(task_id, bundle.root), hashes, cids


def _describe(session, g, me: str) -> str:
    """One line on where game ``g`` stands, from the challenger's side."""
    from truetrain.dispute import GameStatus, Party

    if g.status == GameStatus.BISECTING:
        turn = "your move" if g.party(me) == g.turn else f"{g.turn.name.lower()}'s move"
        return f"bisecting checkpoints ({g.lo}, {g.hi}) of {g.leaves}: {turn}"
    if g.status == GameStatus.AWAITING_REFEREES:
        return (f"bisection ended on checkpoints ({g.lo}, {g.hi}): referees drawn from the hash of block "
                f"{g.deadline}")
    if g.status == GameStatus.COMMITTING:
        return f"{g.seats} referee(s) replaying the interval, committing votes until block {g.deadline}"
    if g.status == GameStatus.REVEALING:
        return f"referees revealing until block {g.deadline} ({g.revealed}/{g.committed} revealed)"
    if g.status == GameStatus.STEPPING:
        return f"bisection ended on checkpoints ({g.lo}, {g.hi}): {_step_stage(session, g, me)}"
    if g.status == GameStatus.VOIDED:
        return f"voided: {g.committee} committees could not judge; no one slashed or paid, the task is redone"
    winner = "the worker" if g.worker_won else "the challenger"
    sid = session.contracts.game.functions.linkOf(g.game_id).call()[2]
    if sid:
        return f"resolved: {winner} won ({_step_verdict(session, sid)})"
    return (f"resolved: {winner} won (votes worker {g.votes_worker}, challenger {g.votes_challenger}, "
            f"neither {g.votes_neither})")


#: StepGame's stages (truetrain/trace/game.py), as the follow line names them
STAGES = {1: "committing the interval's steps", 2: "bisecting the interval's steps", 3: "committing the step's trace",
          4: "bisecting the step's operators", 5: "opening the operator's output", 6: "bisecting its elements",
          7: "revealing the disputed chunk", 8: "the one-step: the chain recomputes one element", 9: "decided"}
#: StepGame.Reason, as the verdict line names it
REASONS = ("the chain's recomputation agreed with the worker", "the chain's recomputation differed from the worker",
           "the other party's clock ran out")


def _step_stage(session, g, me: str) -> str:
    from truetrain.dispute import Party

    sid = session.contracts.game.functions.linkOf(g.game_id).call()[2]
    stage, turn = session.contracts.stepgame.functions.status(sid).call()[:2]
    if stage == 9:  # decided: the dispute settles on the verdict
        return f"step game {sid} decided"
    mine = 0 if g.party(me) == Party.WORKER else 1  # StepGame: the worker defends
    return f"step game {sid}, {STAGES.get(stage, stage)}: {'your' if turn == mine else 'their'} move"


def _step_verdict(session, sid: int) -> str:
    resolved = session.contracts.stepgame.events.GameResolved().get_logs(from_block=0, argument_filters={"id": sid})
    return f"step game {sid}: {REASONS[resolved[0]['args']['reason']]}" if resolved else f"step game {sid}"


def _follow(session, game_id: int, hashes, cids, quiet: bool) -> str:
    """Drive our side of the game until it is resolved, printing each change; return "won" or "lost"."""
    from truetrain.daemon.stepping import Stepping
    from truetrain.dispute import GameDriver, GameStatus, GameView
    from truetrain.paths import HOME

    game, me = session.contracts.game, session.account.address
    send = lambda name, call, random_path=False: session.send(call)  # noqa: E731
    driver = GameDriver(game, session.client.w3, me, send)
    # the levels after level 0, in the game's StepGame: played from our own replay, as a daemon plays them
    stepping = Stepping(session.contracts, session.client.w3, me, send, session.reader,
                        HOME / ".state" / f"challenge-{me.lower()}")
    last = None
    while True:
        g = GameView.read(game, game_id)
        if g.status == GameStatus.STEPPING:
            outcome = None
            stepping.step(g, lambda: (hashes, cids))
        else:
            outcome = driver.step(game_id, lambda: (hashes, cids))
        line = _describe(session, GameView.read(game, game_id), me)
        if line != last and not quiet:
            click.echo(f"  block {session.client.w3.eth.block_number:>6}  {line}")
        last = line
        if outcome is not None:
            return outcome
        time.sleep(FOLLOW_POLL_S)
