"""Start and stop a local Anvil devnet by process id, and wait until it answers."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from truetrain.errors import DevnetError
from truetrain.paths import project_binary

#: Anvil's well-known development mnemonic: its keys are public and only ever for devnets.
DEV_MNEMONIC = "test test test test test test test test test test test junk"
DEV_CHAIN_ID = 31337


#: Where :func:`free_port` looks: below Linux's ephemeral range (32768 up), from which every
#: outgoing connection takes its local port, and above `make test`'s lane ports (18545 up).
#: A port the kernel handed out by binding port 0 came from that range: in a loaded run a
#: daemon's metrics port was taken by someone's connection (or handed to another process by
#: the same bind) in the seconds before the daemon bound it.
FREE_PORTS = range(20000, 32000)
_draw = random.SystemRandom()


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now, drawn at random from
    :data:`FREE_PORTS` (two processes asking at once rarely get the same one)."""
    for _ in range(500):
        port = _draw.randrange(FREE_PORTS.start, FREE_PORTS.stop)
        if port_is_free(port):
            return port
    raise OSError(f"no free port in {FREE_PORTS.start}..{FREE_PORTS.stop - 1} after 500 draws")


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when a listener could bind ``host:port`` now, as Anvil will (SO_REUSEADDR, as
    tokio sets it: a closed node's lingering connections do not count as taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def rpc_chain_id(url: str, timeout: float = 1.0) -> int | None:
    """The chain id the node at ``url`` reports, or None when it does not answer."""
    try:
        reply = requests.post(
            url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}, timeout=timeout
        )
        return int(reply.json()["result"], 16)
    except (requests.RequestException, ValueError, KeyError):
        return None


@dataclass
class Devnet:
    """A running Anvil process on loopback."""

    port: int
    pid: int
    log_path: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the process by its pid and wait for it to exit."""
        stop_pid(self.pid, timeout)


def start_anvil(
    port: int,
    *,
    accounts: int = 20,
    balance_eth: int = 10_000,
    block_time: float | None = None,
    mixed_mining: bool = False,
    log_path: Path | None = None,
    ready_timeout: float = 20.0,
    chain_id: int = DEV_CHAIN_ID,
    state_path: Path | None = None,
    genesis_timestamp: int | None = None,
) -> Devnet:
    """Start Anvil on ``127.0.0.1:port`` and return once it answers JSON-RPC.

    ``block_time`` mines a block every so many seconds (deadlines in blocks then pass on
    their own); with ``mixed_mining`` transactions are still mined at once as well.
    ``state_path``: load the chain from that file when it exists and write it there when
    Anvil is stopped (SIGTERM), so a restart continues the same chain (same genesis, blocks
    and code). ``genesis_timestamp`` fixes the genesis block's time, so two fresh chains with
    the same settings have the same genesis hash.
    Raises :class:`DevnetError` when the port is taken or Anvil exits or stays silent.
    """
    if not port_is_free(port):
        raise DevnetError(f"port {port} is already in use: stop what listens there or pick another port")
    args = [
        project_binary("anvil"), "--host", "127.0.0.1", "--port", str(port),
        "--accounts", str(accounts), "--balance", str(balance_eth),
        "--mnemonic", DEV_MNEMONIC, "--chain-id", str(chain_id),
        # The last 256 states in memory and none on disk: Anvil otherwise writes every older
        # state to ~/.foundry/anvil/tmp (gigabytes over a long devnet) and leaves them there
        # when it is killed. Clients read state at most a block back (a reverted call's replay).
        "--prune-history", "256",
    ]
    if state_path is not None:
        args += ["--state", str(state_path)]
    if genesis_timestamp is not None:
        args += ["--timestamp", str(genesis_timestamp)]
    if block_time:
        args += ["--block-time", str(block_time)]
        if mixed_mining:  # transactions still mine at once; empty blocks keep time moving
            args += ["--mixed-mining"]
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL
    try:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        if log_path:
            log.close()
    devnet = Devnet(port=port, pid=proc.pid, log_path=log_path)
    deadline = time.monotonic() + ready_timeout
    url = devnet.url
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DevnetError(f"anvil exited with code {proc.returncode} before it was ready")
        if rpc_chain_id(url, timeout=0.5) == chain_id:
            return devnet
        time.sleep(0.1)
    stop_pid(proc.pid)
    raise DevnetError(f"anvil did not answer on {url} within {ready_timeout:.0f} s")


def stop_pid(pid: int, timeout: float = 10.0) -> None:
    """Send SIGTERM to ``pid``, wait up to ``timeout``, then SIGKILL. Quiet if already gone."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            finished, _ = os.waitpid(pid, os.WNOHANG)
            if finished == pid:
                return
        except ChildProcessError:  # not our child: poll for existence instead
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
