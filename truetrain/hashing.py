"""Hash helpers shared by storage, training and chain code."""

from __future__ import annotations

from eth_hash.auto import keccak as _keccak


def keccak256(data: bytes) -> bytes:
    """Return the 32-byte keccak256 digest of ``data`` (Ethereum's hash, not SHA3-256)."""
    return _keccak(bytes(data))


def to_hex32(digest: bytes) -> str:
    """Return a 32-byte digest as ``0x``-prefixed lowercase hex."""
    if len(digest) != 32:
        raise ValueError(f"expected 32 bytes, got {len(digest)}")
    return "0x" + digest.hex()


def from_hex32(text: str) -> bytes:
    """Parse ``0x``-prefixed (or bare) 64-digit hex into 32 bytes."""
    body = text[2:] if text.startswith(("0x", "0X")) else text
    raw = bytes.fromhex(body)
    if len(raw) != 32:
        raise ValueError(f"expected 32 bytes of hex, got {len(raw)}")
    return raw
