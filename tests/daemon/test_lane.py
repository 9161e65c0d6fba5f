"""truetrain.daemon.lane: a daemon's long computations never hold its loop.

Real threads; a computation that blocks on an event stands for a replay on a loaded
machine (the adversarial suite once saw one replay hold a challenger's loop for 43 blocks,
past its move window). Waits are bounded; nothing here asserts a timing.
"""

from __future__ import annotations

import threading

import pytest

from truetrain.daemon.lane import Lane, Pending

WAIT_S = 10


def take_when_ready(lane: Lane, key, compute=None):
    """Ask until the value is there (the lane finished), as the daemon's ticks do."""
    done = threading.Event()
    for _ in range(1000):
        try:
            return lane.take(key, compute)
        except Pending:
            done.wait(0.01)
    raise AssertionError(f"{key} never finished")


def test_take_isPendingWhileTheComputationRuns_andTheLoopGoesOn():
    lane = Lane("test")
    release, started = threading.Event(), threading.Event()

    def replay():
        started.set()
        assert release.wait(WAIT_S)
        return b"root", "cid"

    with pytest.raises(Pending):
        lane.take(("task", "sample"), replay)
    assert started.wait(WAIT_S)
    # The computation is blocked; the caller (the daemon's loop) is not: it asks and goes on.
    for _ in range(3):
        with pytest.raises(Pending):
            lane.take(("task", "sample"), replay)
    assert lane.busy() == 1
    release.set()
    assert take_when_ready(lane, ("task", "sample")) == (b"root", "cid")
    assert lane.busy() == 0
    lane.close()


def test_take_givesTheValueOnce_thenComputesAgain():
    lane = Lane("test")
    calls = []

    def compute():
        calls.append(1)
        return len(calls)

    with pytest.raises(Pending):
        lane.take("k", compute)
    assert take_when_ready(lane, "k") == 1
    with pytest.raises(Pending):
        lane.take("k", compute)  # taken already: a new ask starts a new computation
    assert take_when_ready(lane, "k") == 2
    lane.close()


def test_take_raisesTheComputationsError_andTheNextAskRetries():
    lane = Lane("test")
    attempts = []

    def flaky():
        attempts.append(1)
        if len(attempts) == 1:
            raise ValueError("shard not retrievable")
        return "ok"

    with pytest.raises(Pending):
        lane.take("t", flaky)
    with pytest.raises(ValueError, match="shard not retrievable"):
        take_when_ready(lane, "t")
    with pytest.raises(Pending):
        lane.take("t", flaky)
    assert take_when_ready(lane, "t") == "ok"
    lane.close()


def test_computations_runOneAtATime_inTheOrderAskedFor():
    lane = Lane("test")
    order, running, overlap = [], [], []
    gate = threading.Event()

    def job(name):
        def run():
            if running:
                overlap.append(name)
            running.append(name)
            if name == "a":
                assert gate.wait(WAIT_S)
            order.append(name)
            running.remove(name)
            return name
        return run

    for name in ("a", "b", "c"):
        with pytest.raises(Pending):
            lane.take(name, job(name))
    gate.set()
    assert [take_when_ready(lane, n) for n in ("c", "b", "a")] == ["c", "b", "a"]
    assert order == ["a", "b", "c"]
    assert overlap == []
    lane.close()


def test_close_dropsWhatHasNotStarted():
    lane = Lane("test")
    gate, ran = threading.Event(), []
    with pytest.raises(Pending):
        lane.take("first", lambda: gate.wait(WAIT_S))
    with pytest.raises(Pending):
        lane.take("queued", lambda: ran.append("queued"))
    lane.close()
    gate.set()
    [thread] = lane._threads
    thread.join(WAIT_S)
    assert not thread.is_alive()
    assert ran == []
    assert lane.busy() == 0


def test_lane_ofTwoThreads_runsTwoComputationsAtOnce_andAThirdWaits():
    lane = Lane("test", threads=2)
    release = threading.Event()
    running, lock, peak = [], threading.Lock(), []

    def task(name):
        def run():
            with lock:
                running.append(name)
                peak.append(len(running))
            assert release.wait(WAIT_S)
            with lock:
                running.remove(name)
            return name
        return run

    for name in ("a", "b", "c"):
        with pytest.raises(Pending):
            lane.take(name, task(name))
    for _ in range(500):  # both threads busy: a and b run together, c waits for a free thread
        if len(peak) >= 2:
            break
        threading.Event().wait(0.01)
    assert sorted(running) == ["a", "b"] and max(peak) == 2
    release.set()
    assert [take_when_ready(lane, name) for name in ("a", "b", "c")] == ["a", "b", "c"]
    assert max(peak) == 2
    lane.close()


def test_lane_refusesNoThreads():
    with pytest.raises(ValueError, match="^a lane needs at least one thread, got 0$"):
        Lane("test", threads=0)


def test_ready_countsFinishedComputationsUntilTaken():
    """The daemon's tick runs a pass at an unchanged block only when ready() > 0."""
    lane = Lane("test")
    release = threading.Event()
    with pytest.raises(Pending):
        lane.take("slow", lambda: release.wait(WAIT_S))
    with pytest.raises(Pending):
        lane.take("fast", lambda: "done")
    assert lane.ready() == 0  # one thread: "fast" waits behind "slow"
    release.set()
    for _ in range(1000):
        if lane.ready() == 2:
            break
        threading.Event().wait(0.01)
    assert (lane.ready(), lane.busy()) == (2, 2)
    assert lane.take("fast", None) == "done"
    assert (lane.ready(), lane.busy()) == (1, 1)
    lane.close()


def test_forget_dropsAFinishedOrQueuedValue_andTheNextTakeComputesAfresh():
    """A task that stops being ours (an aggregation reset when a shard it read lost its
    dispute) may come back as a new attempt with other inputs: what was computed for the
    earlier one is never handed to it."""
    lane = Lane("test")
    runs = []

    def compute(tag):
        def run():
            runs.append(tag)
            return tag
        return run

    assert take_when_ready(lane, "agg", compute("first")) == "first"
    with pytest.raises(Pending):
        lane.take("agg", compute("stale"))  # asked, then the task was reset
    while lane.ready() == 0:
        threading.Event().wait(0.01)
    lane.forget("agg")
    assert lane.busy() == 0
    assert take_when_ready(lane, "agg", compute("fresh")) == "fresh"
    assert runs == ["first", "stale", "fresh"]
    # a computation still queued behind a running one never runs once forgotten
    release = threading.Event()
    with pytest.raises(Pending):
        lane.take("long", lambda: release.wait(WAIT_S))
    with pytest.raises(Pending):
        lane.take("queued", compute("never"))
    lane.forget("queued")
    release.set()
    assert take_when_ready(lane, "long") is True
    assert "never" not in runs
    lane.forget("unknown")  # nothing asked for it: nothing to do


def test_start_runsOnce_andTakeGetsItsValue_andOnDoneWakesTheLoop():
    woke = threading.Event()
    lane = Lane("test", on_done=woke.set)
    runs = []

    def train():
        runs.append(1)
        return b"root", "cid"

    lane.start(("task", "work"), train)
    lane.start(("task", "work"), train)  # asked again before it ran: nothing more starts
    assert woke.wait(WAIT_S)  # the computation ended: the loop is woken
    assert lane.ready() == 1
    assert lane.take(("task", "work"), train) == (b"root", "cid")  # the early start's value, no new run
    assert runs == [1]
    assert lane.busy() == 0
    lane.close()


def test_start_thenForget_dropsTheValue_andTheNextTakeStartsAfresh():
    lane = Lane("test")
    lane.start(("task", "work"), lambda: "first attempt")
    take_when_ready(lane, ("warm",), lambda: None)  # the lane ran past the early start
    lane.forget(("task", "work"))  # the offer was made again: its result is not this attempt's
    with pytest.raises(Pending):
        lane.take(("task", "work"), lambda: "second attempt")
    assert take_when_ready(lane, ("task", "work")) == "second attempt"
    lane.close()
