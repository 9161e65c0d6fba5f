"""The named faults' spelling (truetrain/daemon/faults.py): what a fault test sets in
``TRUETRAIN_FAULT`` is refused in one line when misspelt, and the cheat a party plays its
StepGame with follows from it."""

from __future__ import annotations

import pytest

from truetrain.daemon.faults import Faults
from truetrain.errors import ConfigError
from truetrain.market.faulty_step import FlipCheat


class _Manifest:
    steps_per_task = 40


@pytest.mark.parametrize("spec,message", [
    ("flip-element", "'flip-element' must be written flip-element:<value>"),
    ("flip-element:x", "flip-element takes a step number, got 'x'"),
    ("perturb-step:3,flip-element:4", "at most one of perturb-step, lazy, wrong-start, flip-element at a time"),
    ("flip-elements:3", "unknown fault 'flip-elements'"),
    ("flip-element:3@adamw", "flip-element names no kind 'adamw' after its '@'"),
    ("flip-element:x@adam", "flip-element takes a step number, got 'x'"),
])
def test_misspeltFault_refusedInOneLine(spec, message):
    with pytest.raises(ConfigError) as refused:
        Faults(spec)
    assert message in str(refused.value)


def test_stepCheat_followsTheFault():
    assert Faults("flip-element:15").step_cheat(1, _Manifest()) == FlipCheat(15)
    assert Faults("flip-element:15").cheat == "flip-element"
    assert Faults("flip-element:5@adam").step_cheat(1, _Manifest()) == FlipCheat(5, kind="adam")
    # the false challenger replays with a flip in the task's middle step
    assert Faults("false-challenge").step_cheat(1, _Manifest()) == FlipCheat(20)
    for honest in (None, "lazy", "perturb-step:3", "stall-dispute"):
        assert Faults(honest).step_cheat(1, _Manifest()) is None
