"""Bounded retries with exponential backoff and jitter (like Flower's RetryInvoker)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """``retries`` extra attempts after the first; waits grow as ``base_s * 2**n``, capped."""

    retries: int
    base_s: float
    max_s: float

    def delay(self, failed_attempts: int, rng: Callable[[], float] = random.random) -> float:
        """Wait before the next attempt: half the exponential step plus up to half again.

        The jitter spreads retries of many clients that failed together (a node restart),
        while the fixed half keeps the wait from collapsing to zero.
        """
        step = min(self.max_s, self.base_s * (2 ** (failed_attempts - 1)))
        return step / 2 + rng() * step / 2


class RetriesExhausted(Exception):
    """Raised by :func:`call_with_retries` with the last error and the attempt count."""

    def __init__(self, last: BaseException, attempts: int) -> None:
        super().__init__(f"{attempts} attempt(s) failed; last error: {last}")
        self.last = last
        self.attempts = attempts


def call_with_retries(
    operation: Callable[[], T],
    policy: RetryPolicy,
    *,
    is_retryable: Callable[[BaseException], bool],
    deadline: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run ``operation``; on a retryable error wait and try again, at most ``policy.retries``
    more times and never past ``deadline`` (a ``time.monotonic()`` value).

    A non-retryable error propagates at once; when retries run out, :class:`RetriesExhausted`
    carries the last retryable error.
    """
    attempts = 0
    while True:
        attempts += 1
        try:
            return operation()
        except Exception as error:  # noqa: BLE001 - classified just below
            if not is_retryable(error):
                raise
            if attempts > policy.retries:
                raise RetriesExhausted(error, attempts) from error
            wait = policy.delay(attempts)
            if deadline is not None and time.monotonic() + wait >= deadline:
                raise RetriesExhausted(error, attempts) from error
            sleep(wait)
