"""`job status --follow`'s arithmetic and line (issue 31, item 4), from reports shaped as
`job status --json` prints them; the command itself follows a real job in test_cli_market."""

from __future__ import annotations

import pytest

from submitter.follow import Block, duration, progress, progress_line


def report(status="active", current_round=2, finalized=(3, 1, 0), tasks=("finalized", "committed", "not drawn")):
    """A 2-shard, 3-round job's report (3 tasks a round: 2 shards and the aggregation)."""
    return {"status": status, "active": status == "active", "current_round": current_round,
            "rounds": [{"round": r + 1, "finalized": f, "tasks": 3} for r, f in enumerate(finalized)],
            "tasks": [{"index": i, "status": s} for i, s in enumerate(tasks)]}


def test_progress_eta_isTasksLeft_timesBlocksPerTask_timesBlockTime():
    # 4 of 9 tasks final 120 blocks after creation, which took 60 s: 30 blocks a task, 0.5 s a block
    prog = progress(report(), Block(100, 1_000), Block(220, 1_060))
    assert prog == {"tasks_finalized": 4, "tasks_total": 9, "round": 2, "rounds": 3, "round_finalized": 1,
                    "round_tasks": 3, "created_block": 100, "block": 220, "blocks_per_task": 30.0,
                    "block_time_s": 0.5, "eta_s": 5 * 30 * 0.5}


def test_progress_beforeAnyFinalizedTask_noEta():
    prog = progress(report(current_round=1, finalized=(0, 0, 0), tasks=("running", "pending", "not drawn")),
                    Block(100, 1_000), Block(150, 1_025))
    assert (prog["blocks_per_task"], prog["block_time_s"], prog["eta_s"]) == (None, 0.5, None)
    assert progress(report(), Block(100, 1_000), Block(100, 1_000))["eta_s"] is None  # no block yet


@pytest.mark.parametrize("status, eta", [("completed", 0.0), ("cancelled", None), ("expired", None)])
def test_progress_endedJob_etaZeroOnlyWhenCompleted(status, eta):
    done = report(status, current_round=3, finalized=(3, 3, 3), tasks=())
    assert progress(done, Block(1, 0), Block(91, 45))["eta_s"] == eta


@pytest.mark.parametrize("seconds, shown", [(None, "--"), (0, "0 s"), (42.4, "42 s"), (59.6, "1m 00s"), (65, "1m 05s"),
                                            (3599, "59m 59s"), (7_380, "2h 03m")])
def test_duration_readable(seconds, shown):
    assert duration(seconds) == shown


def test_progressLine_barInTasks_roundByState_eta():
    line = progress_line(7, report(), progress(report(), Block(100, 1_000), Block(220, 1_060)))
    assert line == "job 7 [########------------] 4/9 tasks | round 2/3: 1/3 finalized, 1 committed, 1 not drawn | ETA 1m 15s"


def test_progressLine_endedJob_saysHow():
    done = report("cancelled", current_round=2, finalized=(3, 1, 0), tasks=("finalized", "revealed", "not drawn"))
    line = progress_line(7, done, progress(done, Block(1, 0), Block(91, 45)))
    assert line == "job 7 [########------------] 4/9 tasks | round 2/3: 1/3 finalized, 1 revealed, 1 not drawn | cancelled"
