"""truetrain.daemon.schedule: a daemon's game moves never wait behind a queue of replays.

A real book (SQLite); the steps record the order they ran in and close what they finish,
as the daemons' steps do. The adversarial suite once saw a challenger replay four sampled
results in a row and run out of its dispute clock meanwhile.
"""

from __future__ import annotations

from truetrain.daemon.book import Book
from truetrain.daemon.schedule import work_book

KINDS = ("challenge", "referee", "audit", "sample")
SLOW = frozenset({"audit", "sample"})


def test_urgentEntries_areSteppedFirst_andAgainAfterEverySlowOne(tmp_path):
    book = Book(tmp_path / "book.sqlite")
    for task in (1, 2, 3):
        book.open(task, "sample")
    book.open(10, "audit")
    book.open(20, "challenge")  # a game in progress: stepped once per pass of the urgent kinds
    order = []

    def step(entry):
        order.append((entry.kind, entry.task_id))
        if entry.kind in SLOW:
            book.close_entry(entry.task_id, entry.kind, "done")

    work_book(book, KINDS, SLOW, step, refresh=lambda: None, stopped=lambda: False)
    assert order == [("challenge", 20), ("audit", 10), ("challenge", 20), ("sample", 1), ("challenge", 20),
                     ("sample", 2), ("challenge", 20), ("sample", 3), ("challenge", 20)]


def test_anEventReadBetweenSlowSteps_isSteppedBeforeTheNextReplay(tmp_path):
    book = Book(tmp_path / "book.sqlite")
    for task in (1, 2):
        book.open(task, "sample")
    order = []

    def step(entry):
        order.append((entry.kind, entry.task_id))
        book.close_entry(entry.task_id, entry.kind, "done")

    def refresh():  # the follower reads RefereesDrawn naming us after the first replay
        if len(order) == 1:
            book.open(7, "referee")

    work_book(book, KINDS, SLOW, step, refresh=refresh, stopped=lambda: False)
    assert order == [("sample", 1), ("referee", 7), ("sample", 2)]


def test_aStopRequest_endsThePassBeforeTheNextStep(tmp_path):
    book = Book(tmp_path / "book.sqlite")
    for task in (1, 2, 3):
        book.open(task, "sample")
    order = []
    work_book(book, KINDS, SLOW, lambda e: order.append(e.task_id), refresh=lambda: None,
              stopped=lambda: len(order) == 2)
    assert order == [1, 2]
    assert [e.task_id for e in book.open_entries("sample")] == [1, 2, 3]  # nothing closed: resumed next tick
