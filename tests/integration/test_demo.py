"""`make demo` runs the main job end to end with the daemons as processes, leaves the devnet
and the explorer serving it, and `truetrain devnet down` stops all of it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import requests

from truetrain.chain.devnet import free_port, port_is_free

ROOT = Path(__file__).resolve().parents[2]


def test_demo_trains_pays_everyone_conserves_tokens_and_leaves_the_explorer_until_devnet_down(TrainToken, tmp_path):
    # TrainToken: the fixture makes brownie compile build/ first
    port, ipfs_port, explorer_port = free_port(), free_port(), free_port()
    env = {**os.environ, "TRUETRAIN_HOME": str(tmp_path)}
    down = [sys.executable, "-c", "from truetrain.cli import main; main()", "devnet", "down"]
    try:
        out = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo.py"), "--port", str(port),
                              "--ipfs-port", str(ipfs_port), "--explorer-port", str(explorer_port),
                              "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=650, env=env)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        text = out.stdout
        assert len(re.findall(r"finalized: 10\.00 TRAIN to worker-\d", text)) == 12  # (3 shards + 1) x 3 rounds
        # the windows sized from a replay timed on this machine, at least the 4 s floor
        sized = re.search(r"a task replays here in [\d.]+ s \(machine load [\d.]+ a core\): compute and challenge "
                          r"windows (\d+) blocks", text)
        assert sized and int(sized.group(1)) >= 16, text[:3000]
        accuracy = float(re.search(r"job 1 completed [\d.]+ s after its submission: .* held-out accuracy (\d+\.\d)%",
                                   text).group(1))
        assert accuracy >= 93.0
        assert "escrowed by the submitter                            144.00 TRAIN" in text
        # the job bound its program (the MLP's 28 operators a step) before any draw
        assert re.search(r"its program bound on chain \(28 operators a step, data root 0x[0-9a-f]{12}…\)", text)
        assert "(conserved); escrow left 0.00" in text
        assert re.search(r"worker-2 exit 0, worker-3 exit 0, worker-4 exit 0, verifier-5 exit 0", text)
        assert (tmp_path / "out" / "model.ckpt").stat().st_size > 0
        assert (tmp_path / "out" / "training.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        url = f"http://127.0.0.1:{explorer_port}/"
        assert f"      explorer: {url} (open it to watch the job; read-only, loopback only)" in text
        assert f"The devnet is still up and the explorer serves it at {url}" in text

        # the demo has exited; its explorer still serves the job from the chain
        job = requests.get(url + "api/jobs/1", timeout=30).json()["data"]
        assert (job["status"], job["rounds_done"], job["escrow_left"]) == ("completed", 3, "0")
        assert [t["status"] for t in job["tasks"]] == ["finalized"] * 12
        assert requests.get(url + "api/flows", timeout=30).json()["data"]["conserved"] is True
        page = requests.get(url + "jobs/1", timeout=30)
        assert page.status_code == 200 and '<span class="state completed" id="job-state">completed</span>' in page.text

        stopped = subprocess.run(down, capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
        assert stopped.returncode == 0, stopped.stderr
        assert re.fullmatch(r"devnet down \(anvil pid \d+, ipfs pid \d+, explorer pid \d+ stopped\)\n", stopped.stdout)
    finally:
        subprocess.run(down, capture_output=True, timeout=60, env=env, cwd=ROOT)  # nothing left if a check failed
    assert port_is_free(port) and port_is_free(ipfs_port) and port_is_free(explorer_port)
