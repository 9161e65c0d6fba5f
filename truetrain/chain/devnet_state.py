"""The one background devnet of a checkout: its pid and port live in ``.devnet/anvil.json``."""

from __future__ import annotations

import json
import os

import requests

from truetrain.chain.devnet import DEV_CHAIN_ID, rpc_chain_id, start_anvil, stop_pid
from truetrain.errors import DevnetError
from truetrain.paths import ROOT

STATE_DIR = ROOT / ".devnet"
STATE_FILE = STATE_DIR / "anvil.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _read() -> dict | None:
    if not STATE_FILE.exists():
        return None
    state = json.loads(STATE_FILE.read_text())
    return state if _alive(state["pid"]) else None


def devnet_up(port: int) -> dict:
    """Start Anvil on ``port`` unless this checkout's devnet already runs; return its state."""
    current = _read()
    if current is not None:
        return current
    STATE_DIR.mkdir(exist_ok=True)
    node = start_anvil(port, log_path=STATE_DIR / "anvil.log")
    state = {"pid": node.pid, "port": port, "url": node.url, "chain_id": DEV_CHAIN_ID}
    STATE_FILE.write_text(json.dumps(state))
    return state


def devnet_down() -> dict:
    """Stop this checkout's devnet; raise :class:`DevnetError` when none runs."""
    current = _read()
    if current is None:
        raise DevnetError("no devnet is running (start one with `truetrain devnet up`)")
    stop_pid(current["pid"])
    STATE_FILE.unlink(missing_ok=True)
    return current


def devnet_status() -> dict:
    """Running state, url and current block of this checkout's devnet."""
    current = _read()
    if current is None or rpc_chain_id(current["url"]) is None:
        return {"running": False}
    reply = requests.post(
        current["url"], json={"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []}, timeout=2
    )
    return {"running": True, "block": int(reply.json()["result"], 16), **current}
