"""A background thread for the long computations of a daemon (training, replays).

A game move, an audit reveal or a referee's vote must land within a few blocks, and the
daemon's loop sends them. If that loop trained or replayed a task itself, one replay that
runs slow on a loaded machine (9 s for a 1 s replay, 43 blocks) would hold every clock the
daemon has: a challenger once lost a game on its clock that way and a cheater's result
stood. So the loop hands each computation to the lane and goes on; the step that asked
for it asks again on later ticks and gets the value once it is ready. torch releases the
GIL in its kernels, so the loop keeps stepping while the lane trains.

Only the computation runs in the lane: book writes and transactions stay in the loop's
thread. A lane of ``threads`` threads runs that many computations at once (a worker's
declared ``max_concurrent``), started in the order asked for; a daemon that stops does not
wait for the running ones (their results are not in the book, so a restart computes them
again, and sends nothing twice: the book holds what was sent).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any

log = logging.getLogger("truetrain.daemon")


class Pending(Exception):
    """The computation asked for runs in the lane (or waits for it): ask again later."""


class Lane:
    """``threads`` daemon threads that run submitted computations, started in order."""

    def __init__(self, name: str = "lane", threads: int = 1, on_done: Callable[[], None] | None = None):
        if threads < 1:
            raise ValueError(f"a lane needs at least one thread, got {threads}")
        self.name = name
        #: called in the lane's thread each time a computation ends (the daemon's loop wakes
        #: on it rather than sleeping out its poll interval)
        self.on_done = on_done
        self._jobs: dict[Hashable, Future] = {}
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True) for i in range(threads)]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, compute = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(compute())
            except BaseException as exc:  # noqa: BLE001 - handed to the step that asked
                future.set_exception(exc)
            if self.on_done is not None:
                self.on_done()

    def take(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The value of ``compute`` for ``key``: started in the lane on the first ask
        (:class:`Pending`), :class:`Pending` while it runs, then its value once (or its
        exception, raised here; the next ask starts it again)."""
        future = self._jobs.get(key)
        if future is None:
            self.start(key, compute)
            raise Pending(key)
        if not future.done():
            raise Pending(key)
        del self._jobs[key]
        return future.result()

    def start(self, key: Hashable, compute: Callable[[], Any]) -> None:
        """Start ``compute`` for ``key`` in the lane now unless it was asked for already: a
        later :meth:`take` gets its value (a step that knows it will need it starts it early)."""
        if key not in self._jobs:
            future = Future()
            self._jobs[key] = future
            self._queue.put((future, compute))

    def forget(self, key: Hashable) -> None:
        """Drop the computation asked for ``key`` (its task is no longer ours, or came back
        as a new attempt with other inputs): one still queued never runs, a running one's value
        is dropped when it ends, and the next ``take`` for ``key`` starts afresh."""
        future = self._jobs.pop(key, None)
        if future is not None:
            future.cancel()

    def ready(self) -> int:
        """How many computations have finished and wait to be taken."""
        return sum(1 for future in list(self._jobs.values()) if future.done())

    def busy(self) -> int:
        """How many computations were asked for and not yet taken."""
        return len(self._jobs)

    def close(self) -> None:
        """Drop what has not started and let the threads end after the running ones."""
        for future in self._jobs.values():
            future.cancel()
        self._jobs.clear()
        for _ in self._threads:
            self._queue.put(None)
