"""Typed, validated settings for the chain client and the event follower.

Both are frozen dataclasses checked in ``__post_init__``, so a zero poll interval or a
negative confirmation count is refused with :class:`ConfigError` before anything runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from truetrain.errors import ConfigError


def _number(owner: str, name: str, value: object, *, minimum: float, strict: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or math.isinf(value):
        raise ConfigError(f"{owner} setting {name} must be a finite number, got {value!r}")
    if value < minimum or (strict and value == minimum):
        sign = ">" if strict else ">="
        raise ConfigError(f"{owner} setting {name} must be {sign} {minimum:g}, got {value!r}")


def _integer(owner: str, name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{owner} setting {name} must be an integer, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{owner} setting {name} must be >= {minimum}, got {value!r}")


@dataclass(frozen=True)
class ClientSettings:
    """How :class:`~truetrain.chain.client.ChainClient` talks to a node.

    ``timeout_s`` bounds each HTTP request; a connection failure or timeout is retried
    ``retries`` times, waiting about ``backoff_s``, 2 x ``backoff_s``, ... (capped at
    ``backoff_max_s``, with jitter). Gas is estimated and multiplied by ``gas_buffer``.
    A transaction returns once ``confirmations`` more blocks sit on top of its block, or
    :class:`~truetrain.errors.ReceiptTimeout` after ``receipt_timeout_s``.
    """

    timeout_s: float = 30.0
    retries: int = 5
    backoff_s: float = 0.1
    backoff_max_s: float = 2.0
    gas_buffer: float = 1.2
    confirmations: int = 0
    receipt_timeout_s: float = 60.0
    poll_s: float = 0.05

    def __post_init__(self) -> None:
        owner = "chain client"
        for name in ("timeout_s", "receipt_timeout_s", "poll_s"):
            _number(owner, name, getattr(self, name), minimum=0, strict=True)
        _number(owner, "backoff_s", self.backoff_s, minimum=0, strict=False)
        _number(owner, "backoff_max_s", self.backoff_max_s, minimum=self.backoff_s, strict=False)
        _number(owner, "gas_buffer", self.gas_buffer, minimum=1.0, strict=False)
        _integer(owner, "retries", self.retries, minimum=0)
        _integer(owner, "confirmations", self.confirmations, minimum=0)


@dataclass(frozen=True)
class FollowerSettings:
    """How :class:`~truetrain.chain.events.EventFollower` scans logs.

    Logs are read up to ``head - confirmations`` in ranges of at most ``max_span`` blocks,
    starting at ``start_block`` on a fresh cursor, every ``poll_interval_s`` seconds.
    ``checkpoints_kept`` recent (block, hash) pairs are kept to find where a reorg forked;
    ``processed_kept_blocks`` is how far behind the cursor processed-event rows survive.
    After a failed poll :meth:`run` waits ``backoff_s`` doubling up to ``backoff_max_s``.
    """

    poll_interval_s: float = 1.0
    max_span: int = 1000
    confirmations: int = 0
    start_block: int = 0
    checkpoints_kept: int = 64
    processed_kept_blocks: int = 10_000
    backoff_s: float = 0.2
    backoff_max_s: float = 10.0

    def __post_init__(self) -> None:
        owner = "event follower"
        _number(owner, "poll_interval_s", self.poll_interval_s, minimum=0, strict=True)
        _number(owner, "backoff_s", self.backoff_s, minimum=0, strict=False)
        _number(owner, "backoff_max_s", self.backoff_max_s, minimum=self.backoff_s, strict=False)
        _integer(owner, "max_span", self.max_span, minimum=1)
        _integer(owner, "confirmations", self.confirmations, minimum=0)
        _integer(owner, "start_block", self.start_block, minimum=0)
        _integer(owner, "checkpoints_kept", self.checkpoints_kept, minimum=1)
        _integer(owner, "processed_kept_blocks", self.processed_kept_blocks, minimum=0)
