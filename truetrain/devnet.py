"""The one background devnet of a checkout: Anvil, an IPFS dev node, the deployed contracts.

``truetrain devnet up`` starts what is not running (pids, logs and state in ``.devnet/``;
port 0 takes a free port), deploys the contracts (reusing a live deployment) and funds
Anvil's well-known accounts with TRAIN, each once; running it again changes nothing. ``make demo`` adds the web explorer over it
(:func:`devnet_explorer`). ``down`` stops every process it recorded, by pid.
"""

from __future__ import annotations

import json
import os

import requests

from truetrain.chain.client import ChainClient, dev_accounts
from truetrain.chain.deploy import deploy_stack
from truetrain.chain.devnet import DEV_CHAIN_ID, free_port, port_is_free, rpc_chain_id, start_anvil, stop_pid
from truetrain.errors import DevnetError
from truetrain.paths import DEPLOYMENTS, HOME
from truetrain.storage import start_devnode, stop_devnode

STATE_DIR = HOME / ".devnet"
STATE_FILE = STATE_DIR / "devnet.json"
DEPLOYMENTS_DIR = DEPLOYMENTS
#: What `up` mints to each of Anvil's accounts 1..FUNDED_ACCOUNTS, once per deployment.
FUND_WEI = 10_000 * 10**18
FUNDED_ACCOUNTS = 9
#: Seconds between blocks. Transactions wait for the next block (no mining on demand), so a
#: deadline or window of N blocks lasts N × BLOCK_TIME_S whatever the traffic: a busy round
#: cannot shorten an honest party's window by mining extra blocks.
BLOCK_TIME_S = 0.25


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _read() -> dict:
    return json.loads(STATE_FILE.read_text()) if STATE_FILE.exists() else {}


def _running(state: dict, key: str) -> dict | None:
    part = state.get(key)
    return part if part and _alive(part["pid"]) else None


def fund_dev_accounts(client: ChainClient, token_address: str, from_block: int = 0) -> list[str]:
    """Mint ``FUND_WEI`` to each of Anvil's accounts 1..FUNDED_ACCOUNTS that the token has
    not minted to since ``from_block`` (its deployment); return the addresses funded now.

    An account funded before is not funded again, however much it has spent: a second `up`
    leaves every balance as the accounts' own transactions made it (`token faucet` gives
    more). The token's mint events are the record, so a run cut short funds the rest next time.
    """
    deployer, *others = dev_accounts(FUNDED_ACCOUNTS + 1)
    token = client.contract("TrainToken", token_address)
    wanted = [account.address for account in others]
    mints = token.events.Transfer().get_logs(from_block=from_block, argument_filters={
        "from": "0x0000000000000000000000000000000000000000", "to": wanted})
    minted = {entry["args"]["to"] for entry in mints}
    funded = []
    for address in wanted:
        if address not in minted:
            client.transact(token.functions.mint(address, FUND_WEI), deployer)
            funded.append(address)
    return funded


def _port(port: int, flag: str, what: str) -> int:
    """``port``, or a free one for 0; :class:`DevnetError` when ``port`` is taken."""
    if port == 0:
        return free_port()
    if not port_is_free(port):
        raise DevnetError(f"{what} port {port} is already in use: stop what listens there, pick another "
                          f"port, or pass {flag} 0 for a free one")
    return port


def devnet_up(port: int, ipfs_port: int) -> dict:
    """Start Anvil on ``port`` and an IPFS dev node on ``ipfs_port`` (0: a free port) unless
    they run, deploy and fund; return the devnet's state. A taken port starts nothing."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    state = _read()
    anvil, ipfs = _running(state, "anvil"), _running(state, "ipfs")
    started_anvil = anvil is None
    if anvil is None:
        port = _port(port, "--port", "Anvil")
    if ipfs is None:
        ipfs_port = _port(ipfs_port, "--ipfs-port", "IPFS API")
    if anvil is None:
        node = start_anvil(port, block_time=BLOCK_TIME_S, log_path=STATE_DIR / "anvil.log")
        anvil = {"pid": node.pid, "port": port, "url": node.url, "chain_id": DEV_CHAIN_ID}
    if ipfs is None:
        try:
            node = start_devnode(STATE_DIR / "ipfs", ipfs_port, pid_file=STATE_DIR / "ipfs.pid",
                                 log_path=STATE_DIR / "ipfs.log")
        except Exception:
            if started_anvil:  # leave nothing half up
                stop_pid(anvil["pid"])
            raise
        ipfs = {"pid": node.pid, "api_addr": node.api_addr, "url": node.api_url, "peer_id": node.peer_id}
    state = {"anvil": anvil, "ipfs": ipfs, **({"explorer": state["explorer"]} if _running(state, "explorer") else {})}
    STATE_FILE.write_text(json.dumps(state))
    client = ChainClient(anvil["url"])
    report = deploy_stack(client, dev_accounts(1)[0], folder=DEPLOYMENTS_DIR)
    contracts = {k: c.address for k, c in report.deployment.contracts.items()}
    funded = fund_dev_accounts(client, contracts["token"], report.deployment.block)
    return {**state, "contracts": contracts, "deployed": report.deployed, "funded": funded}


def devnet_explorer(port: int) -> str:
    """(Re)start the web explorer over the running devnet on ``127.0.0.1:port`` (0: a free
    port), record it so that ``down`` stops it too, and return its URL. A running one is
    replaced: the devnet under it may have been restarted since."""
    from truetrain.explorer.serve import start_explorer

    state = _read()
    if _running(state, "anvil") is None or _running(state, "ipfs") is None:
        raise DevnetError("no devnet is running (start one with `truetrain devnet up`)")
    old = _running(state, "explorer")
    if old is not None:
        stop_pid(old["pid"])
    port = port or free_port()
    proc = start_explorer(state["anvil"]["url"], state["ipfs"]["api_addr"], DEPLOYMENTS_DIR, port,
                          STATE_DIR / "explorer.log")
    url = f"http://127.0.0.1:{port}/"
    state["explorer"] = {"pid": proc.pid, "port": port, "url": url}
    STATE_FILE.write_text(json.dumps(state))
    return url


def devnet_down() -> dict:
    """Stop this checkout's Anvil, IPFS node and explorer; raise :class:`DevnetError` when
    none runs."""
    state = _read()
    anvil, ipfs, explorer = _running(state, "anvil"), _running(state, "ipfs"), _running(state, "explorer")
    if anvil is None and ipfs is None and explorer is None:
        STATE_FILE.unlink(missing_ok=True)
        raise DevnetError("no devnet is running (start one with `truetrain devnet up`)")
    if explorer is not None:  # first: it reads the other two
        stop_pid(explorer["pid"])
    if anvil is not None:
        stop_pid(anvil["pid"])
    if ipfs is not None:
        stop_devnode(ipfs["pid"])
    STATE_FILE.unlink(missing_ok=True)
    return {"anvil": anvil, "ipfs": ipfs, "explorer": explorer}


def devnet_status() -> dict:
    """Whether Anvil and the IPFS node run, with the chain's current block."""
    state = _read()
    anvil, ipfs = _running(state, "anvil"), _running(state, "ipfs")
    if anvil is None or rpc_chain_id(anvil["url"]) is None:
        return {"running": False, "ipfs": ipfs}
    reply = requests.post(
        anvil["url"], json={"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []}, timeout=2
    )
    return {"running": ipfs is not None, "block": int(reply.json()["result"], 16), "anvil": anvil, "ipfs": ipfs,
            "explorer": _running(state, "explorer")}
