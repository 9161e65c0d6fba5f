"""Deliberately faulty daemons, for the fault and adversarial tests: off unless
``TRUETRAIN_FAULT`` is set. Each fault is named, so a test (and a log reader) can tell a
cheater from a bug. ``TRUETRAIN_FAULT`` holds one or more comma-separated faults:

* ``hang-after:<function>`` — hang for good right after the first transaction calling
  ``<function>`` was mined (logs ``fault: hanging after …``), so a test can ``kill -9`` the
  daemon at a known point of a task's life;
* worker cheats (``truetrain.market.faulty`` computes them): ``perturb-step:<step>`` trains
  honestly but perturbs the model at checkpoint step ``<step>``; ``lazy`` returns its start
  checkpoint as every checkpoint; ``wrong-start`` trains from a wrong checkpoint 0;
  ``withhold`` publishes nothing it commits to (its CIDs resolve nowhere);
  ``flip-element:<step>[@<kind>]`` flips one element of one operator's output in task step
  ``<step>`` (the program's first entry, or its first of that kind: ``@adam`` corrupts only
  the update) and plays its dispute game consistently with it (``truetrain.market.faulty_step``);
* ``corrupt-sent:<step>`` — a pipeline stage that adds noise to the activations and
  gradients it sends its neighbours from step ``<step>`` on, while its own parameters stay
  honest (logs ``fault: corrupting what the stage sends``);
* ``slow-compute:<seconds>`` — a slow machine: every computation of the worker's lane
  waits that long before training (logs ``fault: slow compute``);
* dispute behaviour: ``stall-dispute`` never moves in a dispute game (loses on its clock);
* verifier cheats: ``false-challenge`` challenges every sampled result with a wrong root
  (its replay has one element flipped in the middle step, as ``flip-element``'s);
  ``lying-referee`` votes for the wrong side; ``silent-referee`` never votes.
"""

from __future__ import annotations

import logging
import os
import threading

from truetrain.errors import ConfigError
from truetrain.trace.kind_names import KINDS as KIND_NAMES

log = logging.getLogger("truetrain.fault")
ENV = "TRUETRAIN_FAULT"

#: Fault name → whether it takes an argument.
KNOWN = {
    "hang-after": True, "perturb-step": True, "lazy": False, "wrong-start": False, "withhold": False,
    "stall-dispute": False, "false-challenge": False, "lying-referee": False, "silent-referee": False,
    "slow-compute": True, "corrupt-sent": True, "flip-element": True,
}
#: Faults that change the result a worker computes (at most one of them at a time).
CHEATS = ("perturb-step", "lazy", "wrong-start", "flip-element")


class Faults:
    def __init__(self, spec: str | None):
        self._faults: dict[str, str | None] = {}
        for part in filter(None, (p.strip() for p in (spec or "").split(","))):
            kind, sep, arg = part.partition(":")
            if kind not in KNOWN:
                raise ConfigError(f"{ENV}: unknown fault {kind!r} (known: {', '.join(sorted(KNOWN))})")
            if KNOWN[kind] != bool(arg) or (sep and not arg):
                form = f"{kind}:<value>" if KNOWN[kind] else kind
                raise ConfigError(f"{ENV}: {part!r} must be written {form}")
            self._faults[kind] = arg or None
        cheats = [k for k in CHEATS if k in self._faults]
        if len(cheats) > 1:
            raise ConfigError(f"{ENV}: at most one of {', '.join(CHEATS)} at a time, got {', '.join(cheats)}")
        for kind in ("perturb-step", "flip-element"):
            step = self._faults.get(kind)
            if kind == "flip-element" and step is not None:
                step, _, entry = step.partition("@")
                if "@" in self._faults[kind] and entry not in KIND_NAMES:
                    raise ConfigError(f"{ENV}: flip-element names no kind {entry!r} after its '@'")
            if step is not None and not step.isdigit():
                raise ConfigError(f"{ENV}: {kind} takes a step number, got {step!r}")
        corrupt = self._faults.get("corrupt-sent")
        if corrupt is not None and not corrupt.isdigit():
            raise ConfigError(f"{ENV}: corrupt-sent takes a step number, got {corrupt!r}")
        slow = self._faults.get("slow-compute")
        if slow is not None and not slow.replace(".", "", 1).isdigit():
            raise ConfigError(f"{ENV}: slow-compute takes seconds, got {slow!r}")

    @classmethod
    def from_env(cls) -> Faults:
        return cls(os.environ.get(ENV))

    def __contains__(self, kind: str) -> bool:
        return kind in self._faults

    def arg(self, kind: str) -> str | None:
        return self._faults.get(kind)

    @property
    def hang_after(self) -> str | None:
        return self._faults.get("hang-after")

    @property
    def cheat(self) -> str | None:
        """The result-changing fault in force, if any."""
        return next((k for k in CHEATS if k in self._faults), None)

    def step_cheat(self, task_id: int, manifest):
        """The cheat this party plays a StepGame of task ``task_id`` with: ``flip-element``'s,
        or the false challenger's (its replay's flip in the middle step); None when honest."""
        from truetrain.market.faulty_step import FlipCheat

        if "flip-element" in self._faults:
            return FlipCheat.parse(self._faults["flip-element"])
        if "false-challenge" in self._faults:
            return FlipCheat(manifest.steps_per_task // 2)
        return None

    def before_compute(self) -> None:
        """The ``slow-compute`` fault: wait before a computation (in the lane's thread)."""
        seconds = self._faults.get("slow-compute")
        if seconds is not None:
            log.warning("fault: slow compute, waiting %s s", seconds)
            threading.Event().wait(float(seconds))

    def after_send(self, function: str) -> None:
        if function == self.hang_after:
            log.warning("fault: hanging after %s", function)
            threading.Event().wait()  # until SIGKILL
