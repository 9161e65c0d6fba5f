"""The daemon's SQLite book survives a reopen, re-opens redrawn tasks and forgets another chain."""

from __future__ import annotations

from truetrain.daemon.book import Book


def test_book_resultAndSaltSurviveReopen(tmp_path):
    book = Book(tmp_path / "book.sqlite")
    assert book.open(7, "work") is True
    assert book.open(7, "work") is False  # a re-delivered event changes nothing
    book.record_result(7, "work", b"\x01" * 32, "QmCid", b"\x02" * 32)
    book.close()
    again = Book(tmp_path / "book.sqlite")
    entry = again.get(7, "work")
    assert (entry.root, entry.cid, entry.salt, entry.state) == (b"\x01" * 32, "QmCid", b"\x02" * 32, "open")
    assert [e.task_id for e in again.open_entries("work")] == [7]


def test_book_closedEntry_reopensWhenTheTaskIsDrawnAgain(tmp_path):
    book = Book(tmp_path / "book.sqlite")
    book.open(9, "work")
    book.record_result(9, "work", b"\x01" * 32, "QmOld", b"\x02" * 32)
    book.close_entry(9, "work", "lost", "timed out")
    assert book.open_entries("work") == []
    assert book.open(9, "work") is True
    entry = book.get(9, "work")
    # the earlier attempt's result is not this attempt's
    assert (entry.state, entry.root, entry.cid, entry.salt) == ("open", None, None, None)


def test_book_dueEntries_onlyThoseReached(tmp_path):
    book = Book(tmp_path / "book.sqlite")
    book.open(1, "keep", due=10)
    book.open(2, "keep", due=20)
    assert [e.task_id for e in book.open_entries("keep", due_by=15)] == [1]
    book.set_due(1, "keep", 30)
    assert [e.task_id for e in book.open_entries("keep", due_by=25)] == [2]


def test_book_failedAttempts_count(tmp_path):
    book = Book(tmp_path / "book.sqlite")
    book.open(3, "audit")
    assert book.failed_attempt(3, "audit", "boom") == 1
    assert book.failed_attempt(3, "audit", "boom") == 2
    assert book.get(3, "audit").note == "boom"


def test_book_boundToAnotherChain_isEmptied(tmp_path):
    book = Book(tmp_path / "book.sqlite")
    assert book.bind_chain("genesis-a:market") is False  # first binding
    book.open(5, "work")
    book.set_job(1, True)
    assert book.bind_chain("genesis-a:market") is False
    assert book.get(5, "work") is not None
    assert book.bind_chain("genesis-b:market") is True
    assert book.get(5, "work") is None and book.active_jobs() == []


def test_book_clearResult_forgetsAnEarlierAttempt_keepsTheEntryOpen(tmp_path):
    book = Book(tmp_path / "book.sqlite")
    book.open(5, "work")
    book.record_result(5, "work", b"\x01" * 32, "QmOld", b"\x02" * 32)
    book.failed_attempt(5, "work", "boom")
    book.clear_result(5, "work")
    entry = book.get(5, "work")
    assert (entry.state, entry.root, entry.cid, entry.salt, entry.attempts) == ("open", None, None, None, 0)
