"""Dispute games: the bisection as a timeline of moves with both clocks, the disputed step,
the referees' votes, the verdict and where every token went, as JSON-ready dicts."""

from __future__ import annotations

from web3.logs import DISCARD

from truetrain.cli_options import format_tokens
from truetrain.dispute import GameStatus, GameView, Vote
from truetrain.market import decode_task_id

from .source import wei

#: DisputeGame events that carry ``gameId``, in the order a game emits them.
GAME_EVENTS = ("DisputeOpened", "DisputeBisected", "BisectionEnded", "RefereesRequested", "RefereesDrawn",
               "VoteCommitted", "RevealPhaseOpened", "VoteRevealed", "CommitteeFailed", "ClockExpired",
               "RefereePenalized", "AuditorSlashed", "DisputeSettled", "DisputeVoided")


def game_count(src) -> int:
    return src["game"].functions.gameCount().call()


def game_row(src, game_id: int) -> dict:
    g = GameView.read(src["game"], game_id)
    job_id, round_index, index = decode_task_id(g.task_id)
    return {"id": game_id, "task": str(g.task_id), "job": job_id, "round": round_index + 1, "index": index,
            "status": g.status.name.lower(), "audit": g.audit, "worker": g.worker, "challenger": g.challenger,
            "verdict": verdict(g), "moves": g.moves, "lo": g.lo, "hi": g.hi, "leaves": g.leaves}


def verdict(g: GameView) -> str | None:
    if g.status == GameStatus.RESOLVED:
        return "worker won" if g.worker_won else "challenger won"
    if g.status == GameStatus.VOIDED:
        return "voided"
    return None


def game_list(src) -> list[dict]:
    return [game_row(src, game_id) for game_id in range(game_count(src), 0, -1)]


def _describe(event: str, a, g: GameView) -> str:
    who = lambda address: ("worker" if address == g.worker else "challenger" if address == g.challenger  # noqa: E731
                           else address)
    if event == "DisputeOpened":
        return (f"{'audit mismatch' if a['audit'] else 'challenge'} opened over {a['leaves']} checkpoints, "
                f"bond {format_tokens(a['bond'])} TRAIN")
    if event == "DisputeBisected":
        return f"{who(a['mover'])} claims positions {', '.join(map(str, a['positions']))}; interval ({a['lo']}, {a['hi']})"
    if event == "BisectionEnded":
        return f"bisection ended on ({a['lo']}, {a['hi']})"
    if event == "RefereesRequested":
        return f"referees due, drawn from block {a['ticket']}"
    if event == "RefereesDrawn":
        return f"committee {a['committee']} drawn: {', '.join(a['referees'])}; votes until block {a['commitDeadline']}"
    if event == "VoteCommitted":
        return f"referee {a['referee']} committed a vote"
    if event == "RevealPhaseOpened":
        return f"reveal phase until block {a['revealDeadline']}"
    if event == "VoteRevealed":
        return f"referee {a['referee']} voted {Vote(a['vote']).name.lower()}"
    if event == "CommitteeFailed":
        return f"committee {a['committee']} failed"
    if event == "ClockExpired":
        return f"{who(a['party'])} ran out of clock"
    if event == "RefereePenalized":
        return (f"referee {a['referee']} penalized {format_tokens(a['penalty'])} TRAIN "
                f"({'wrong vote' if a['revealed'] else 'no reveal'})")
    if event == "AuditorSlashed":
        return f"auditor {a['auditor']} slashed {format_tokens(a['slashed'])} TRAIN"
    if event == "DisputeSettled":
        return (f"settled: {'worker' if a['workerWon'] else 'challenger'} won; {a['loser']} slashed "
                f"{format_tokens(a['slashed'])} TRAIN")
    return "voided: nobody slashed, the task is redone"


def timeline(src, g: GameView) -> list[dict]:
    """Every event of the game in chain order; each bisection move with both clocks after it."""
    events = sorted((log for name in GAME_EVENTS for log in src.logs("game", name, gameId=g.game_id)),
                    key=lambda e: (e["blockNumber"], e["logIndex"]))
    initial = src["game"].functions.clockBlocks().call()
    clocks = {"worker": initial, "challenger": initial}
    rows = []
    for log in events:
        a, row = log["args"], {"block": log["blockNumber"], "event": log["event"]}
        if log["event"] == "DisputeBisected":
            side = "worker" if a["mover"] == g.worker else "challenger"
            clocks[side] = a["clockLeft"]
            row.update(mover=side, positions=list(a["positions"]), lo=a["lo"], hi=a["hi"],
                       hashes=["0x" + bytes(h).hex() for h in a["hashes"]], cids=list(a["cids"]),
                       worker_clock=clocks["worker"], challenger_clock=clocks["challenger"])
        row["text"] = _describe(log["event"], a, g)
        rows.append(row)
    return rows


def disputed_step(src, g: GameView) -> dict | None:
    """The steps between the checkpoints at lo and hi once the bisection narrowed to one interval."""
    if g.hi - g.lo != 1:
        return None
    job_id = g.task_id >> 64
    try:
        manifest = src.reader.manifest(job_id)
    except Exception:  # noqa: BLE001 - the positions still say enough
        return {"lo": g.lo, "hi": g.hi}
    interval, steps = manifest.checkpoint_interval, manifest.steps_per_task

    def step(position: int) -> int:
        return min((position - 1) * interval, steps) if position else 0

    return {"lo": g.lo, "hi": g.hi, "from_step": step(g.lo), "to_step": step(g.hi), "from_inputs": g.lo == 0}


def token_moves(src, settled: list) -> list[dict]:
    """Where the settlement sent the tokens, from the stake manager's events in the settling
    transaction: what the loser lost, the winner's share, each referee's share, the burn,
    and any penalty."""
    stake = src["stake"]
    rows = []
    for log in settled:
        receipt = src.w3.eth.get_transaction_receipt(log["transactionHash"])
        events = {name: [e["args"] for e in getattr(stake.events, name)().process_receipt(receipt, errors=DISCARD)]
                  for name in ("StakeSlashed", "Credited", "StakePenalized")}
        for a in events["StakeSlashed"]:
            rows.append({"what": "slashed from the loser", "account": a["account"], "amount": wei(a["slashed"])})
            rows.append({"what": "to the winner", "account": a["winner"], "amount": wei(a["toWinner"])})
            shares = [c for c in events["Credited"] if c["account"] != a["winner"]]
            rows += [{"what": "to a referee", "account": c["account"], "amount": wei(c["amount"])} for c in shares]
            rest = a["toReferees"] - sum(c["amount"] for c in shares)
            if rest:
                rows.append({"what": "to the referees", "account": None, "amount": wei(rest)})
            rows.append({"what": "burned", "account": None, "amount": wei(a["burned"])})
        rows += [{"what": "penalty", "account": a["account"], "amount": wei(a["taken"])}
                 for a in events["StakePenalized"]]
    return rows


def game_detail(src, game_id: int) -> dict | None:
    """The dispute page's data (None when there is no such game)."""
    if not 1 <= game_id <= game_count(src):
        return None
    g = GameView.read(src["game"], game_id)
    seats = src.call("game", "committeeOf", game_id)
    settled = src.logs("game", "DisputeSettled", gameId=game_id)
    return {
        **game_row(src, game_id),
        "worker_root": "0x" + g.worker_root.hex(), "challenger_root": "0x" + g.challenger_root.hex(),
        "worker_clock": g.worker_clock, "challenger_clock": g.challenger_clock, "clock_blocks":
            src["game"].functions.clockBlocks().call(),
        "worker_stake": wei(g.worker_stake), "challenger_stake": wei(g.challenger_stake),
        "deadline": g.deadline, "disputed": disputed_step(src, g),
        "votes": {"worker": g.votes_worker, "challenger": g.votes_challenger, "neither": g.votes_neither},
        "committee": [{"referee": s["referee"], "vote": Vote(s["vote"]).name.lower(),
                       "committed": s["commitment"] != "0x" + "00" * 32} for s in seats],
        "timeline": timeline(src, g),
        "tokens": token_moves(src, settled),
        "slashed": wei(settled[-1]["args"]["slashed"]) if settled else None,
    }
