"""The daemon's persisted book of tasks: what it must drive and the secrets it committed to.

The chain is the truth about where a task stands; the book keeps only what the chain cannot:
which tasks concern this daemon, the root and CID it computed (so a restart does not train
again) and the salt of each commitment (without it a commit could never be revealed). A
salt is written, and the write committed to SQLite, *before* the commitment is sent, so a
``kill -9`` at any point leaves a book the restarted daemon can finish from.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    task_id  TEXT NOT NULL,
    kind     TEXT NOT NULL,          -- work | audit | sample | keep
    state    TEXT NOT NULL,          -- open | done | lost | failed
    root     BLOB,
    cid      TEXT,
    salt     BLOB,
    note     TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    due      INTEGER NOT NULL DEFAULT 0,  -- keeper: the block after which to look again
    updated  REAL NOT NULL,
    PRIMARY KEY (task_id, kind)
);
CREATE TABLE IF NOT EXISTS jobs (
    job_id   TEXT PRIMARY KEY,
    active   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS kv (
    key      TEXT PRIMARY KEY,
    value    TEXT NOT NULL
);
"""


@dataclass(frozen=True)
class Entry:
    task_id: int
    kind: str
    state: str
    root: bytes | None
    cid: str | None
    salt: bytes | None
    note: str | None
    attempts: int
    due: int


class Book:
    """SQLite-backed book in ``path`` (WAL, every write committed at once)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(_SCHEMA)

    def close(self) -> None:
        self.db.close()

    # --- tasks -------------------------------------------------------------------------

    def open(self, task_id: int, kind: str, *, due: int = 0) -> bool:
        """Start tracking (task, kind); re-opens a finished entry (a task drawn again, a
        challenge window opened again) with its root, CID and salt forgotten: what was
        computed for an earlier attempt is not this one's (a pipeline stage redone with its
        group has other inputs). True if new or re-opened."""
        now = time.time()
        row = self.db.execute("SELECT state FROM tasks WHERE task_id = ? AND kind = ?", (str(task_id), kind)).fetchone()
        if row is None:
            self.db.execute("INSERT INTO tasks (task_id, kind, state, due, updated) VALUES (?, ?, 'open', ?, ?)",
                            (str(task_id), kind, due, now))
            return True
        if row[0] != "open":
            self.db.execute("UPDATE tasks SET state = 'open', due = ?, attempts = 0, updated = ?, root = NULL, "
                            "cid = NULL, salt = NULL WHERE task_id = ? AND kind = ?", (due, now, str(task_id), kind))
            return True
        if due:
            self.db.execute("UPDATE tasks SET due = MIN(due, ?) WHERE task_id = ? AND kind = ?",
                            (due, str(task_id), kind))
        return False

    def get(self, task_id: int, kind: str) -> Entry | None:
        row = self.db.execute("SELECT task_id, kind, state, root, cid, salt, note, attempts, due FROM tasks "
                              "WHERE task_id = ? AND kind = ?", (str(task_id), kind)).fetchone()
        return _entry(row) if row else None

    def open_entries(self, kind: str, *, due_by: int | None = None) -> list[Entry]:
        sql = "SELECT task_id, kind, state, root, cid, salt, note, attempts, due FROM tasks WHERE kind = ? AND state = 'open'"
        args: tuple = (kind,)
        if due_by is not None:
            sql += " AND due <= ?"
            args += (due_by,)
        return [_entry(r) for r in self.db.execute(sql + " ORDER BY CAST(task_id AS INTEGER)", args)]

    def clear_result(self, task_id: int, kind: str) -> None:
        """Forget a computed result (it belongs to an earlier attempt at the task)."""
        self.db.execute("UPDATE tasks SET root = NULL, cid = NULL, salt = NULL, attempts = 0, updated = ? "
                        "WHERE task_id = ? AND kind = ?", (time.time(), str(task_id), kind))

    def record_result(self, task_id: int, kind: str, root: bytes, cid: str | None, salt: bytes) -> None:
        """Persist what will be committed (before the commitment is sent)."""
        self.db.execute("UPDATE tasks SET root = ?, cid = ?, salt = ?, updated = ? WHERE task_id = ? AND kind = ?",
                        (root, cid, salt, time.time(), str(task_id), kind))

    def set_due(self, task_id: int, kind: str, due: int) -> None:
        self.db.execute("UPDATE tasks SET due = ? WHERE task_id = ? AND kind = ?", (due, str(task_id), kind))

    def failed_attempt(self, task_id: int, kind: str, note: str) -> int:
        self.db.execute("UPDATE tasks SET attempts = attempts + 1, note = ?, updated = ? WHERE task_id = ? AND kind = ?",
                        (note[:500], time.time(), str(task_id), kind))
        return self.get(task_id, kind).attempts

    def close_entry(self, task_id: int, kind: str, state: str, note: str | None = None) -> None:
        self.db.execute("UPDATE tasks SET state = ?, note = COALESCE(?, note), updated = ? WHERE task_id = ? AND kind = ?",
                        (state, note, time.time(), str(task_id), kind))

    def counts(self) -> dict[tuple[str, str], int]:
        return {(k, s): n for k, s, n in self.db.execute("SELECT kind, state, COUNT(*) FROM tasks GROUP BY kind, state")}

    def bind_chain(self, chain_key: str) -> bool:
        """Tie the book to one chain (genesis hash and market address); a book written for
        another chain (a restarted devnet reuses task ids) is emptied. True if it was."""
        known = self.get_value("chain")
        if known == chain_key:
            return False
        self.db.execute("DELETE FROM tasks")
        self.db.execute("DELETE FROM jobs")
        self.set_value("chain", chain_key)
        return known is not None

    # --- jobs and small values -----------------------------------------------------------

    def set_job(self, job_id: int, active: bool) -> None:
        self.db.execute("INSERT INTO jobs (job_id, active) VALUES (?, ?) ON CONFLICT(job_id) DO UPDATE SET active = ?",
                        (str(job_id), int(active), int(active)))

    def active_jobs(self) -> list[int]:
        return [int(r[0]) for r in self.db.execute("SELECT job_id FROM jobs WHERE active = 1 ORDER BY CAST(job_id AS INTEGER)")]

    def get_value(self, key: str, default: str | None = None) -> str | None:
        row = self.db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def set_value(self, key: str, value: str) -> None:
        self.db.execute("INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = ?",
                        (key, value, value))


def _entry(row) -> Entry:
    task_id, kind, state, root, cid, salt, note, attempts, due = row
    return Entry(int(task_id), kind, state, bytes(root) if root else None, cid, bytes(salt) if salt else None,
                 note, attempts, due)
