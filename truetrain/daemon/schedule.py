"""The order a daemon works its book in: what has a clock running first.

A game move, a referee's vote or opening a game must land within a few blocks; replaying or
training a task takes seconds to minutes. A tick steps every open entry of the urgent kinds,
then the slow kinds one entry at a time, and after each slow entry reads the chain's new
events and steps the urgent kinds again, so a game move never waits behind a queue of
replays (a challenger that replayed four results in a row once ran out of its dispute clock).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from truetrain.daemon.book import Book, Entry


def work_book(book: Book, kinds: Iterable[str], slow: frozenset[str], step: Callable[[Entry], None],
              refresh: Callable[[], None], stopped: Callable[[], bool]) -> None:
    """Step every open entry of ``kinds`` (in that order of priority) once; ``slow`` kinds are
    interleaved with the urgent ones as described above. ``refresh`` reads new events (it may
    open urgent entries); ``stopped`` ends the pass early."""
    kinds = tuple(kinds)
    urgent = [k for k in kinds if k not in slow]

    def step_urgent() -> bool:
        for kind in urgent:
            for entry in book.open_entries(kind):
                if stopped():
                    return False
                step(entry)
        return True

    if not step_urgent():
        return
    for kind in (k for k in kinds if k in slow):
        for entry in book.open_entries(kind):
            if stopped():
                return
            step(entry)
            refresh()
            if not step_urgent():
                return
