"""Warm-ups: one thrown-away training step of a job's model before its clock starts.

On large tensors the repro engine compiles its kernels per shape and self-tests them the
first time; in a fresh process that took 66 s for the default LM. A worker warms up before
it accepts a task (inside the offer's accept window, not the compute window); a verifier
warms up when a job is created, before it can be drawn to audit or referee it. Once per
model shape and process; small models, which compile nothing, skip it.
"""

from __future__ import annotations

import contextlib
import logging
import time

from truetrain.training import needs_warm_up, warm_up

log = logging.getLogger("truetrain.daemon")


class WarmUps:
    """The warm-ups of one daemon: ``ensure(job_id)`` returns once the job's model shape
    has run a step in this process, raising :class:`~truetrain.daemon.lane.Pending` while
    it runs in the daemon's lane. ``device`` gives a context manager yielding the device to
    run on (a worker takes one from its pool)."""

    def __init__(self, daemon, device=None):
        self.daemon = daemon
        self.device = device or (lambda: contextlib.nullcontext(daemon.device))
        self.done: set[str] = set()

    def ensure(self, job_id: int) -> None:
        manifest = self.daemon.reader.manifest(job_id)
        key = repr((manifest.model, manifest.batch_size, manifest.limbs))
        if key in self.done or not needs_warm_up(manifest):
            return
        seconds, error = self.daemon.lane.take(("warm-up", key), lambda: self._run(manifest))
        self.done.add(key)
        if error is None:
            log.info("warmed up for the job's model", extra={"job": job_id, "seconds": round(seconds, 2)})
        else:  # the task itself will meet it and say so; nothing is held up
            log.warning("warm-up failed: %s", error, extra={"job": job_id})

    def _run(self, manifest) -> tuple[float, str | None]:
        started = time.monotonic()
        try:
            with self.device() as device:
                warm_up(manifest, device=device)
        except Exception as exc:  # noqa: BLE001 - reported, never fatal to the daemon
            return time.monotonic() - started, f"{type(exc).__name__}: {exc}"
        return time.monotonic() - started, None
