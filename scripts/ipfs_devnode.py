#!/usr/bin/env python3
"""Start, stop or inspect a local IPFS dev node (Helia behind the Kubo RPC API).

    python scripts/ipfs_devnode.py start --repo .devnet/ipfs --api-port 5001 --pid-file .devnet/ipfs.pid
    python scripts/ipfs_devnode.py status --pid-file .devnet/ipfs.pid
    python scripts/ipfs_devnode.py stop --pid-file .devnet/ipfs.pid

Errors are one line on stderr and a non-zero exit (3 when the port is taken).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from truetrain.errors import NodePortInUse, TruetrainError  # noqa: E402
from truetrain.storage.devnode import devnode_status, start_devnode, stop_devnode  # noqa: E402

EXIT_PORT_IN_USE = 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("start", help="spawn a detached node and wait until its API answers")
    start.add_argument("--repo", required=True, help="data folder (blocks, pins, peer key)")
    start.add_argument("--api-port", type=int, required=True, help="Kubo RPC API port on 127.0.0.1")
    start.add_argument("--swarm-port", type=int, default=0, help="libp2p TCP port on 127.0.0.1 (0: any free port)")
    start.add_argument("--pid-file", required=True, help="where to write the node's pid")
    start.add_argument("--log-file", help="node output (default: REPO/devnode.log)")
    start.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for readiness")
    stop = commands.add_parser("stop", help="stop the node named by a pid file and wait until it is gone")
    stop.add_argument("--pid-file", required=True)
    stop.add_argument("--timeout", type=float, default=10.0, help="seconds before SIGTERM becomes SIGKILL")
    status = commands.add_parser("status", help="say whether the node runs and answers")
    status.add_argument("--pid-file", required=True)
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "start":
            node = start_devnode(args.repo, args.api_port, swarm_port=args.swarm_port, pid_file=args.pid_file,
                                 log_path=args.log_file, ready_timeout_s=args.timeout)
            print(f"IPFS dev node running: pid={node.pid} api={node.api_addr} peer={node.peer_id} swarm={node.swarm_addr}")
            return 0
        if args.command == "stop":
            print("IPFS dev node stopped" if stop_devnode(pid_file=args.pid_file, timeout_s=args.timeout)
                  else "IPFS dev node was not running")
            return 0
        state = devnode_status(args.pid_file)
        if args.json:
            print(json.dumps(state))
        elif state is None:
            print("IPFS dev node is not running")
        else:
            answering = "answering" if state["answering"] else "NOT answering"
            print(f"IPFS dev node running: pid={state['pid']} api={state['api_addr']} peer={state['peer_id']} ({answering})")
        return 0 if state is not None and state["answering"] else 1
    except NodePortInUse as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_PORT_IN_USE
    except TruetrainError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code


if __name__ == "__main__":
    sys.exit(main())
