"""``truetrain job status JOB --follow``: a job's progress, read from the chain until it ends.

Each poll reads the job as ``job status`` does (its rounds and its current round's tasks)
and the chain's head block. The pace is the chain's own: the blocks since the job was
created (its ``JobCreated`` log) per finalized task, times the seconds a block takes by
those blocks' timestamps; the ETA is that pace over the tasks left. It needs no history of
its own, so a follow started half-way through a job shows an ETA on its first line.

On a terminal one line is redrawn in place; otherwise (a pipe, a file, a CI log) a line is
printed whenever something moved (a task's state, a round), and with ``--json`` that is one
JSON object a line. The command ends with the job: exit 0 when it completed,
:class:`~truetrain.errors.JobNotCompleted` (exit 3) when it was cancelled or expired.
Ctrl-C stops following (exit 130) and leaves the job as it is.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import dataclass

import click

from truetrain.errors import JobNotCompleted

#: Width of the whole job's progress bar in characters.
BAR = 20
#: Exit status of a follow stopped by Ctrl-C (128 + SIGINT, as shells report it).
INTERRUPTED = 130
#: Erase from the cursor to the end of the line (after a redrawn line shorter than the last).
CLEAR_TO_END = "\x1b[K"


@dataclass(frozen=True)
class Block:
    number: int
    timestamp: int


def progress(report: dict, created: Block, head: Block) -> dict:
    """The job's progress in tasks (aggregations included) and its pace from the chain.

    ``eta_s`` = tasks left × ``blocks_per_task`` (blocks since creation per finalized task)
    × ``block_time_s`` (seconds a block since creation): None while no task is final or no
    block has passed, 0 once the job completed, None once it ended otherwise."""
    rounds = report["rounds"]
    total = sum(r["tasks"] for r in rounds)
    done = sum(r["finalized"] for r in rounds)
    current = rounds[report["current_round"] - 1]
    blocks = head.number - created.number
    block_time = (head.timestamp - created.timestamp) / blocks if blocks > 0 else None
    per_task = blocks / done if done else None
    if report["status"] == "completed":
        eta = 0.0
    elif report["active"] and per_task is not None and block_time is not None:
        eta = (total - done) * per_task * block_time
    else:
        eta = None
    return {"tasks_finalized": done, "tasks_total": total, "round": report["current_round"], "rounds": len(rounds),
            "round_finalized": current["finalized"], "round_tasks": current["tasks"], "created_block": created.number,
            "block": head.number, "blocks_per_task": per_task, "block_time_s": block_time, "eta_s": eta}


def duration(seconds: float | None) -> str:
    """``None`` → ``--``; 42.4 → ``42 s``; 65 → ``1m 05s``; 7,380 → ``2h 03m``."""
    if seconds is None:
        return "--"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def progress_line(job_id: int, report: dict, prog: dict) -> str:
    """One line: the whole job's bar in tasks, the current round's tasks by state, the ETA
    (or how the job ended)."""
    done, total = prog["tasks_finalized"], prog["tasks_total"]
    filled = BAR * done // total if total else 0
    states: dict[str, int] = {}
    for task in report["tasks"]:
        if task["status"] != "finalized":
            states[task["status"]] = states.get(task["status"], 0) + 1
    moving = "".join(f", {n} {state}" for state, n in states.items())
    end = f"ETA {duration(prog['eta_s'])}" if report["active"] else report["status"]
    return (f"job {job_id} [{'#' * filled}{'-' * (BAR - filled)}] {done}/{total} tasks | round "
            f"{prog['round']}/{prog['rounds']}: {prog['round_finalized']}/{prog['round_tasks']} finalized{moving} | {end}")


def _moved(report: dict, prog: dict) -> tuple:
    """What a change is: the job's state, its finalized tasks, its round and each task's state
    (not the ETA, which moves with every block)."""
    return (report["status"], prog["tasks_finalized"], prog["round"],
            tuple((t["index"], t["status"]) for t in report["tasks"]))


class _Printer:
    """Shows each poll: JSON lines, a line per change, or one line redrawn on a terminal."""

    def __init__(self, job_id: int, as_json: bool, tty: bool):
        self.job_id, self.as_json, self.tty = job_id, as_json, tty and not as_json
        self.last_change, self.last_line, self.drawn = None, None, False

    def show(self, report: dict, prog: dict) -> None:
        change = _moved(report, prog)
        if self.as_json:
            if change != self.last_change:
                click.echo(json.dumps({**report, "progress": prog}, default=str))
        elif self.tty:
            width = shutil.get_terminal_size((100, 24)).columns
            line = progress_line(self.job_id, report, prog)[:max(width - 1, 20)]
            if line != self.last_line:
                click.echo("\r" + line + CLEAR_TO_END, nl=False)
                self.last_line, self.drawn = line, True
        elif change != self.last_change:
            click.echo(progress_line(self.job_id, report, prog))
        self.last_change = change

    def close(self) -> None:
        """End the redrawn line, so that what is printed next starts on a line of its own."""
        if self.drawn:
            click.echo()
            self.drawn = False


def _block(w3, number) -> Block:
    block = w3.eth.get_block(number)
    return Block(block["number"], block["timestamp"])


def _created(session, job_id: int) -> int | None:
    """The block the job was created in (its ``JobCreated`` log), or None where the node will
    not search its logs from block 0 (public RPCs cap the range)."""
    from web3.exceptions import Web3Exception

    try:
        found = session.contracts.market.events.JobCreated().get_logs(from_block=0,
                                                                      argument_filters={"jobId": job_id})
    except Web3Exception:
        return None
    return found[-1]["blockNumber"] if found else None


def _poll(session, job_id: int, read_report, interval: float, printer: _Printer) -> tuple[dict, dict]:
    w3 = session.client.w3
    report = read_report(session, job_id)  # an unknown job is refused here
    number = _created(session, job_id)
    head = _block(w3, "latest")
    created = head if number is None else _block(w3, number)  # no log: the pace from now on
    while True:
        prog = progress(report, created, head)
        printer.show(report, prog)
        if not report["active"]:
            return report, prog
        time.sleep(interval)
        report = read_report(session, job_id)
        head = _block(w3, "latest")


def follow_job(session, job_id: int, read_report, as_json: bool, interval: float) -> None:
    """Follow job ``job_id`` until it ends (``read_report(session, job_id)`` is `job status`'s
    report); return when it completed, raise :class:`JobNotCompleted` when it did not, exit
    130 on Ctrl-C."""
    printer = _Printer(job_id, as_json, sys.stdout.isatty())
    try:
        report, prog = _poll(session, job_id, read_report, interval, printer)
    except KeyboardInterrupt:
        printer.close()
        click.echo(f"stopped following job {job_id}; it goes on (`truetrain job status {job_id}` shows it)", err=True)
        raise click.exceptions.Exit(INTERRUPTED) from None
    finally:
        printer.close()
    done = f"{prog['tasks_finalized']}/{prog['tasks_total']} tasks finalized"
    if report["status"] == "completed":
        if not as_json:
            click.echo(f"job {job_id} completed: {done} in {prog['rounds']} round(s); final model "
                       f"{report['checkpoint_cid']} (`truetrain job results {job_id} --out DIR` evaluates it)")
        return
    ended = "was cancelled" if report["status"] == "cancelled" else report["status"]
    raise JobNotCompleted(f"job {job_id} {ended} with {done}, in round {prog['round']} of {prog['rounds']}")
