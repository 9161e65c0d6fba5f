"""`make test`'s lanes (scripts/run_tests.py) run every test module exactly once."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _runner():
    spec = importlib.util.spec_from_file_location("run_tests", ROOT / "scripts" / "run_tests.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lanes_cover_every_test_module_exactly_once():
    runner = _runner()
    lanes = runner.modules(runner.LANES)
    placed = [m for lane in lanes for m in lane]
    every = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py"))
    assert sorted(placed) == every
    assert len(lanes) == len(runner.LANES) + 1  # the named lanes, then the rest


def test_every_path_a_lane_names_exists():
    runner = _runner()
    missing = [p for lane in runner.LANES for p in lane if not (ROOT / p).exists()]
    assert missing == []


def test_a_folder_leaves_modules_named_elsewhere_to_their_lane():
    runner = _runner()
    lanes = runner.modules([["tests/contracts"], ["tests/contracts/test_dispute_open.py"]])
    assert "tests/contracts/test_dispute_open.py" not in lanes[0]
    assert lanes[1] == ["tests/contracts/test_dispute_open.py"]
