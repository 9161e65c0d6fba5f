"""Where a round's time goes under load: each job's rounds cut into their phases from the
chain's events (bench/load.py prints the medians over every job and round).

A round is serial: its shards are offered (after the offer ticket's wait), trained and
revealed; the aggregation is drawn once the last shard has revealed (after its own ticket),
trained and revealed; the round advances when the aggregation is finalized, after its
challenge window. Times are block timestamps, so they carry the devnet's block time.
"""

from __future__ import annotations

import statistics

from truetrain.market import decode_task_id

#: (label, the phase's start event, its end event), per round.
PHASES = (
    ("round start -> shards offered", "start", "shards_drawn"),
    ("shards offered -> last revealed", "shards_drawn", "shards_revealed"),
    ("last shard revealed -> aggregation offered", "shards_revealed", "agg_drawn"),
    ("aggregation offered -> revealed", "agg_drawn", "agg_revealed"),
    ("aggregation revealed -> round advanced", "agg_revealed", "advanced"),
)


def round_phases(logs: dict[str, list], shards: dict[int, int], ts) -> dict[str, list[float]]:
    """Seconds of each phase over every (job, round) the logs show whole. ``logs`` maps an
    event name (JobCreated, TaskDrawn, ResultRevealed, RoundAdvanced) to its logs, ``shards``
    a job to its shard count, ``ts`` a block number to its timestamp."""
    marks: dict[tuple[int, int], dict[str, int]] = {}

    def mark(key, name, block, last=False):
        slot = marks.setdefault(key, {})
        if name not in slot or (last and block > slot[name]) or (not last and block < slot[name]):
            slot[name] = block

    for e in logs["JobCreated"]:
        if e["args"]["jobId"] in shards:
            mark((e["args"]["jobId"], 0), "start", e["blockNumber"])
    for e in logs["RoundAdvanced"]:
        job = e["args"]["jobId"]
        if job in shards:
            round_ = int(e["args"]["round"])  # the round now running (the last one's aggregation finalized)
            mark((job, round_ - 1), "advanced", e["blockNumber"])
            mark((job, round_), "start", e["blockNumber"])
    for name, phase in (("TaskDrawn", "drawn"), ("ResultRevealed", "revealed")):
        for e in logs[name]:
            job, round_, index = decode_task_id(e["args"]["taskId"])
            if job not in shards:
                continue
            if index < shards[job]:
                mark((job, round_), f"shards_{phase}", e["blockNumber"], last=phase == "revealed")
            else:
                mark((job, round_), f"agg_{phase}", e["blockNumber"])
    out: dict[str, list[float]] = {label: [] for label, _, _ in PHASES}
    for slot in marks.values():
        if all(k in slot for _, a, b in PHASES for k in (a, b)):
            for label, a, b in PHASES:
                out[label].append(ts(slot[b]) - ts(slot[a]))
    return out


def print_phases(phases: dict[str, list[float]]) -> None:
    rounds = len(next(iter(phases.values()), []))
    if not rounds:
        return
    total = sum(statistics.median(v) for v in phases.values())
    print(f"  a round's phases (median of {rounds} rounds, s; block timestamps)")
    for label, values in phases.items():
        print(f"    {label:44} {statistics.median(values):5.1f}  (max {max(values):.0f})")
    print(f"    {'sum of the medians':44} {total:5.1f}")
