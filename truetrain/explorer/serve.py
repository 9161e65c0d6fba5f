"""Run the explorer: in this process (uvicorn), or as a background process for the devnet."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import requests

from truetrain.errors import DevnetError
from truetrain.paths import ROOT

from . import DEFAULT_HOST

#: Hosts a loopback explorer answers to (a page on another site that rebinds its DNS name to
#: 127.0.0.1 sends its own name and is refused).
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "[::1]", "::1"]


def open_source(rpc: str, ipfs: str, deployments: Path):
    from .source import Source

    return Source(rpc, ipfs, deployments)


def serve(source, host: str = DEFAULT_HOST, port: int = 8600) -> None:
    import uvicorn

    from .app import create_app

    loopback = host in ("127.0.0.1", "localhost", "::1")
    app = create_app(source, allowed_hosts=LOOPBACK_HOSTS if loopback else None)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, server_header=False)


def wait_until_serving(url: str, proc: subprocess.Popen | None = None, timeout: float = 60.0) -> None:
    """Return once ``url`` answers; raise :class:`DevnetError` when the process exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise DevnetError(f"the explorer exited with code {proc.returncode} before it served {url}")
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise DevnetError(f"the explorer did not answer at {url} within {timeout:.0f} s")


def start_explorer(rpc: str, ipfs: str, deployments: Path, port: int, log_path: Path, *,
                   host: str = DEFAULT_HOST, timeout: float = 60.0) -> subprocess.Popen:
    """Start ``truetrain explorer`` in the background (its own session, so it outlives the
    caller) and return once it serves its jobs page."""
    args = [sys.executable, "-m", "truetrain.explorer", "--host", host, "--port", str(port), "--rpc", rpc,
            "--ipfs", ipfs, "--deployments", str(deployments)]
    with open(log_path, "ab") as log:
        # cwd: the checkout this code came from, so the child imports the same truetrain.
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=ROOT, start_new_session=True)
    try:
        wait_until_serving(f"http://{host}:{port}/api/jobs", proc, timeout)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc
