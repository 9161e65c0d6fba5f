"""The two commitments of the commit-reveal protocol, encoded exactly as JobMarket checks them."""

from __future__ import annotations

import secrets

from eth_abi import encode
from web3 import Web3

from truetrain.hashing import keccak256


def new_salt() -> bytes:
    """32 random bytes that keep a committed root secret until it is revealed."""
    return secrets.token_bytes(32)


def result_commitment(root: bytes, cid: str, salt: bytes, worker: str) -> bytes:
    """``keccak256(abi.encode(root, resultCid, salt, worker))``."""
    return keccak256(encode(["bytes32", "string", "bytes32", "address"],
                            [root, cid, salt, Web3.to_checksum_address(worker)]))


def audit_commitment(root: bytes, salt: bytes, auditor: str) -> bytes:
    """``keccak256(abi.encode(root, salt, auditor))``."""
    return keccak256(encode(["bytes32", "bytes32", "address"], [root, salt, Web3.to_checksum_address(auditor)]))
