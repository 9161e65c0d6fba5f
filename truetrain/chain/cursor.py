"""The event follower's persisted state: a cursor, recent checkpoints and processed events.

One SQLite file may hold many followers, each under its own ``name``. Every change is one
transaction, so a crash leaves either the old or the new state, never half of each.

- ``cursor``: the last delivered position (block, log index, that block's hash) and the
  chain's genesis hash. ``log_index == WHOLE_BLOCK`` means the whole block is done.
- ``checkpoints``: (block, hash) at the end of recent scanned ranges; after a reorg the
  newest one whose hash the chain still has is where scanning resumes.
- ``processed``: delivered events keyed by (block hash, log index). The block hash, not
  the transaction hash, is the key because a fresh devnet replays the same deterministic
  transactions with the same hashes, and a reorg may re-include a transaction elsewhere:
  both are new events that must be delivered again.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

#: ``log_index`` of a position that covers every log of its block.
WHOLE_BLOCK = 2**31 - 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cursor (
    name TEXT PRIMARY KEY, block INTEGER NOT NULL, log_index INTEGER NOT NULL,
    block_hash TEXT, genesis_hash TEXT);
CREATE TABLE IF NOT EXISTS checkpoints (
    name TEXT NOT NULL, block INTEGER NOT NULL, block_hash TEXT NOT NULL, PRIMARY KEY (name, block));
CREATE TABLE IF NOT EXISTS processed (
    name TEXT NOT NULL, block_hash TEXT NOT NULL, log_index INTEGER NOT NULL,
    block INTEGER NOT NULL, tx_hash TEXT NOT NULL, PRIMARY KEY (name, block_hash, log_index));
"""


@dataclass(frozen=True)
class Position:
    """Everything up to and including log ``log_index`` of ``block`` has been delivered."""

    block: int
    log_index: int = WHOLE_BLOCK
    block_hash: str | None = None

    def before(self, block: int, log_index: int) -> bool:
        """True when (block, log_index) comes after this position (so it is still to deliver)."""
        return (block, log_index) > (self.block, self.log_index)


class CursorStore:
    """The SQLite state of the follower called ``name`` (thread-safe)."""

    def __init__(self, path: Path | str, name: str = "default"):
        self.path = Path(path)
        self.name = name
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")  # readers (seen()) do not block the writer
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _write(self, statements: list[tuple[str, tuple]]) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for sql, args in statements:
                    self._db.execute(sql, args)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _read(self, sql: str, args: tuple) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def load(self) -> tuple[Position | None, str | None]:
        """The stored position and genesis hash; (None, None) for a follower never run."""
        rows = self._read("SELECT block, log_index, block_hash, genesis_hash FROM cursor WHERE name = ?", (self.name,))
        if not rows:
            return None, None
        block, log_index, block_hash, genesis = rows[0]
        return Position(block, log_index, block_hash), genesis

    def _cursor_sql(self, position: Position) -> tuple[str, tuple]:
        return (
            "INSERT INTO cursor (name, block, log_index, block_hash) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(name) DO UPDATE SET block = excluded.block, log_index = excluded.log_index, "
            "block_hash = excluded.block_hash",
            (self.name, position.block, position.log_index, position.block_hash),
        )

    def delivered(self, position: Position, tx_hash: str) -> None:
        """Record one delivered event: move the cursor onto it and mark it processed."""
        self._write([
            self._cursor_sql(position),
            ("INSERT OR IGNORE INTO processed (name, block_hash, log_index, block, tx_hash) VALUES (?, ?, ?, ?, ?)",
             (self.name, position.block_hash, position.log_index, position.block, tx_hash)),
        ])

    def range_done(self, position: Position, *, keep_checkpoints: int, keep_processed_blocks: int) -> None:
        """Move the cursor to the end of a scanned range, checkpoint it, prune old rows."""
        assert position.block_hash is not None
        self._write([
            self._cursor_sql(position),
            ("INSERT OR REPLACE INTO checkpoints (name, block, block_hash) VALUES (?, ?, ?)",
             (self.name, position.block, position.block_hash)),
            ("DELETE FROM checkpoints WHERE name = ? AND block NOT IN "
             "(SELECT block FROM checkpoints WHERE name = ? ORDER BY block DESC LIMIT ?)",
             (self.name, self.name, keep_checkpoints)),
            ("DELETE FROM processed WHERE name = ? AND block < ?",
             (self.name, position.block - keep_processed_blocks)),
        ])

    def rewind(self, position: Position, *, fresh_chain: bool, genesis_hash: str | None) -> None:
        """Move the cursor back to ``position`` and drop checkpoints after it.

        On a fresh chain (genesis changed) every checkpoint and processed row is dropped too:
        nothing of the old chain will ever be seen again.
        """
        statements = [
            self._cursor_sql(position),
            ("DELETE FROM checkpoints WHERE name = ? AND block > ?", (self.name, position.block)),
            ("UPDATE cursor SET genesis_hash = ? WHERE name = ?", (genesis_hash, self.name)),
        ]
        if fresh_chain:
            statements += [
                ("DELETE FROM checkpoints WHERE name = ?", (self.name,)),
                ("DELETE FROM processed WHERE name = ?", (self.name,)),
            ]
        self._write(statements)

    def set_genesis(self, position: Position, genesis_hash: str) -> None:
        """Record the chain's genesis hash (first poll), creating the cursor row if needed."""
        self._write([self._cursor_sql(position),
                     ("UPDATE cursor SET genesis_hash = ? WHERE name = ?", (genesis_hash, self.name))])

    def checkpoints(self) -> list[tuple[int, str]]:
        """Stored (block, hash) checkpoints, newest first."""
        return self._read("SELECT block, block_hash FROM checkpoints WHERE name = ? ORDER BY block DESC", (self.name,))

    def seen(self, block_hash: str, log_index: int) -> bool:
        """True when the event at (block hash, log index) was delivered and its handler returned."""
        rows = self._read("SELECT 1 FROM processed WHERE name = ? AND block_hash = ? AND log_index = ?",
                          (self.name, block_hash, log_index))
        return bool(rows)
