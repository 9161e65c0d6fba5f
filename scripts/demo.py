"""`make demo`: run the main job end to end (see truetrain/demo/run.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from truetrain.demo_cli import demo  # noqa: E402

if __name__ == "__main__":
    demo()
