"""How long the demo's compute and challenge windows are: sized from a replay timed here.

Every task stands for its challenge window before it is paid, so the window is most of a
round's time; it must still let an honest verifier that was *not* drawn as the auditor see
the reveal, fetch the task's inputs and result, replay it and land a challenge. So the demo
times one replay of the job's first task on this machine, as it is loaded now (the three
workers and the verifier are about to share it), and gives a verifier

    ``OVERHEAD_S`` (a poll, the fetches from the local node, the challenge's block)
    + ``MARGIN`` × the replay (three workers and a verifier replay at once on 2 cores)

with ``FLOOR_S`` at least, all times the machine's load (the run queue per core over the
last minute, at least 1: a daemon's poll, its fetches and its transactions slow down with
everything else running, and a small model's replay is too short to show it), converted to
the devnet's blocks (a block every
``BLOCK_TIME_S``, only on the interval: transactions wait for the next block, so N blocks
last N × BLOCK_TIME_S whatever the traffic). The compute window is the same length: the
contracts want it no longer than the challenge window (a verifier gets as long to replay as
the worker had to train), and an honest worker needs the same replay's time plus its commit.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

from truetrain.devnet import BLOCK_TIME_S
from truetrain.market.reader import MAX_OBJECT_BYTES

#: Seconds a verifier needs besides the replay: its poll, the fetches, the challenge's block.
OVERHEAD_S = 2.0
#: Replays a window holds: the three workers and the verifier train side by side on 2 cores.
MARGIN = 4.0
#: The shortest window in seconds, however fast the replay.
FLOOR_S = 4.0


@dataclass(frozen=True)
class WindowSizing:
    replay_s: float
    load: float
    window_s: float
    blocks: int


def window_blocks(replay_s: float, load: float = 1.0, block_time_s: float = BLOCK_TIME_S) -> WindowSizing:
    """The compute and challenge window for a task whose replay takes ``replay_s`` seconds on
    a machine whose run queue holds ``load`` processes a core."""
    seconds = max(FLOOR_S, OVERHEAD_S + MARGIN * replay_s) * max(1.0, load)
    blocks = math.ceil(seconds / block_time_s)
    return WindowSizing(replay_s, max(1.0, load), blocks * block_time_s, blocks)


def machine_load() -> float:
    """Runnable processes a core over the last minute."""
    return os.getloadavg()[0] / (os.cpu_count() or 1)


def time_replay(manifest, store) -> float:
    """Seconds to train the job's first task here, warm (the second of two runs: the first
    builds the kernels, as a daemon's warm-up does before it takes tasks)."""
    from truetrain.training.checkpoint import fetch_checkpoint
    from truetrain.training.task import run_task

    shard = manifest.shards[0]
    shard_bytes = store.fetch(shard.cid, shard.hash, max_size=MAX_OBJECT_BYTES)
    start = None
    if manifest.initial_checkpoint is not None:
        ref = manifest.initial_checkpoint
        start = fetch_checkpoint(store, ref.cid, ref.hash, max_size=MAX_OBJECT_BYTES)
    run_task(manifest, shard_bytes, start, 0, 0)
    began = time.perf_counter()
    run_task(manifest, shard_bytes, start, 0, 0)
    return time.perf_counter() - began
