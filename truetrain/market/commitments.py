"""The two commitments of the commit-reveal protocol, encoded exactly as JobMarket checks them."""

from __future__ import annotations

import secrets

from eth_abi import encode
from web3 import Web3

from truetrain.hashing import keccak256


def new_salt() -> bytes:
    """32 random bytes that keep a committed root secret until it is revealed."""
    return secrets.token_bytes(32)


def result_commitment(task_id: int, root: bytes, cid: str, salt: bytes, worker: str) -> bytes:
    """``keccak256(abi.encode(taskId, root, resultCid, salt, worker))``: bound to the task and
    the worker, so one commitment cannot be revealed on another task."""
    return keccak256(encode(["uint256", "bytes32", "string", "bytes32", "address"],
                            [task_id, root, cid, salt, Web3.to_checksum_address(worker)]))


def audit_commitment(task_id: int, root: bytes, salt: bytes, auditor: str) -> bytes:
    """``keccak256(abi.encode(taskId, root, salt, auditor))``."""
    return keccak256(encode(["uint256", "bytes32", "bytes32", "address"],
                            [task_id, root, salt, Web3.to_checksum_address(auditor)]))
