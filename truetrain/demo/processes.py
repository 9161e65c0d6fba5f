"""Start and stop worker and verifier daemons as separate processes (the demo and the tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

#: How each role's daemon is started: its own module, in its own interpreter.
ENTRY = {"worker": "from worker.run import run; run()", "verifier": "from verifier.run import run; run()"}


@dataclass
class DaemonProcess:
    role: str
    account: int
    address: str
    proc: subprocess.Popen
    log_path: Path
    state_dir: Path
    #: Where this process's lines start in its log file (a restarted daemon appends to the
    #: same file: what an earlier process logged is not this one's).
    log_offset: int = 0

    @property
    def name(self) -> str:
        return f"{self.role}-{self.account}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM, wait for a clean exit (SIGKILL after ``timeout``); return the exit code."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self) -> None:
        """``kill -9``: no chance to finish anything."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def log_text(self) -> str:
        """What this process has logged so far."""
        if not self.log_path.exists():
            return ""
        with self.log_path.open("rb") as log:
            log.seek(self.log_offset)
            return log.read().decode(errors="replace")


def start_daemon(role: str, account: int, address: str, *, rpc: str, ipfs: str, home: Path,
                 deployments: Path, extra: list[str] | None = None, env: dict | None = None,
                 state_dir: Path | None = None, key: str | None = None) -> DaemonProcess:
    """Run ``truetrain <role> run`` for devnet account ``account`` in the background (signing
    with ``key`` through ``TRUETRAIN_KEY`` when given: an account past Anvil's first 20)."""
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    state_dir = state_dir or home / ".state" / f"{role}-{account}"
    log_path = logs / f"{role}-{account}.log"
    offset = log_path.stat().st_size if log_path.exists() else 0
    signer = [] if key else ["--account", str(account)]
    args = [sys.executable, "-c", ENTRY[role], *signer, "--rpc", rpc, "--ipfs", ipfs,
            "--deployments", str(deployments), "--state-dir", str(state_dir), "--log-file", str(log_path),
            "--log-format", "json", *(extra or [])]
    # The devnet's daemons share this machine's cores: torch's OpenMP threads sleep while they
    # wait for work instead of spinning (libgomp's default), which cost 5x the work's CPU when
    # processes outnumbered cores. A user's own OMP_WAIT_POLICY wins.
    environment = {"OMP_WAIT_POLICY": "PASSIVE", **os.environ, "TRUETRAIN_HOME": str(home), "PYTHONUNBUFFERED": "1",
                   **(env or {})}
    if key:
        environment["TRUETRAIN_KEY"] = key
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(logs / f"{role}-{account}.stderr", "ab"),
                            env=environment, start_new_session=True)
    return DaemonProcess(role, account, address, proc, log_path, state_dir, offset)


def wait_for_log(process: DaemonProcess, text: str, timeout: float = 60.0) -> bool:
    """Wait until ``text`` appears in the daemon's log (False on timeout or exit)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in process.log_text():
            return True
        if not process.alive():
            return False
        time.sleep(0.1)
    return False
