"""`make demo` runs the main job end to end with the daemons as processes and leaves nothing running."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from truetrain.chain.devnet import free_port, port_is_free

ROOT = Path(__file__).resolve().parents[2]


def test_demo_trains_pays_everyone_conserves_tokens_and_stops(TrainToken, tmp_path):  # fixture: compiled build
    port, ipfs_port = free_port(), free_port()
    env = {**os.environ, "TRUETRAIN_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo.py"), "--port", str(port),
                          "--ipfs-port", str(ipfs_port), "--out", str(tmp_path / "out"), "--down"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    text = out.stdout
    assert len(re.findall(r"finalized: 10\.00 TRAIN to worker-\d", text)) == 12  # (3 shards + 1) x 3 rounds
    accuracy = float(re.search(r"job 1 completed: .* held-out accuracy (\d+\.\d)%", text).group(1))
    assert accuracy >= 93.0
    assert "escrowed by the submitter                            144.00 TRAIN" in text
    assert "(conserved); escrow left 0.00" in text
    assert re.search(r"worker-2 exit 0, worker-3 exit 0, worker-4 exit 0, verifier-5 exit 0", text)
    assert (tmp_path / "out" / "model.ckpt").stat().st_size > 0
    assert (tmp_path / "out" / "training.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Devnet stopped." in text
    assert port_is_free(port) and port_is_free(ipfs_port)
