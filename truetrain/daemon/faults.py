"""A deliberately faulty daemon, for the fault tests: off unless ``TRUETRAIN_FAULT`` is set.

``TRUETRAIN_FAULT=hang-after:<function>`` makes the daemon hang for good right after its
first transaction calling ``<function>`` was mined (it logs ``fault: hanging after …``), so
a test can ``kill -9`` it at a known point of a task's life: after ``acceptTask`` (mid
training), after ``commitResult`` (committed, not revealed), after ``commitAudit``.
"""

from __future__ import annotations

import logging
import os
import threading

from truetrain.errors import ConfigError

log = logging.getLogger("truetrain.fault")
ENV = "TRUETRAIN_FAULT"


class Faults:
    def __init__(self, spec: str | None):
        self.hang_after: str | None = None
        if spec:
            kind, _, function = spec.partition(":")
            if kind != "hang-after" or not function:
                raise ConfigError(f"{ENV} must be hang-after:<function>, got {spec!r}")
            self.hang_after = function

    @classmethod
    def from_env(cls) -> Faults:
        return cls(os.environ.get(ENV))

    def after_send(self, function: str) -> None:
        if function == self.hang_after:
            log.warning("fault: hanging after %s", function)
            threading.Event().wait()  # until SIGKILL
