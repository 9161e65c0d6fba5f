"""`make demo`'s script runs one job through its whole life and leaves nothing running."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_demo_completes_job_pays_everyone_and_conserves_tokens(TrainToken):  # fixture: compiled build
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo.py")], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert len(re.findall(r"finalized, \+10\.00 TRAIN", out.stdout)) == 8  # (3 shards + 1 aggregation) × 2 rounds
    assert re.search(r"job 1 completed: .* held-out accuracy (\d+\.\d)%", out.stdout)
    accuracy = float(re.search(r"held-out accuracy (\d+\.\d)%", out.stdout).group(1))
    assert accuracy >= 90.0
    assert "(conserved); escrow left 0.00" in out.stdout
    assert "Anvil and the IPFS node are stopped" in out.stdout
