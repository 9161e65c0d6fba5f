"""Plain records the storage client returns."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StoredObject:
    """Content added to IPFS: its CID, the keccak256 of its bytes and its size in bytes.

    ``hash`` is what goes on chain or into a manifest next to ``cid``; a reader checks fetched
    bytes against it (the CID alone is only as trustworthy as the node that served it).
    """

    cid: str
    hash: bytes
    size: int


@dataclass(frozen=True)
class NodeInfo:
    """What ``/api/v0/id`` says about the node."""

    peer_id: str
    public_key: str
    addresses: tuple[str, ...]
    agent_version: str


@dataclass(frozen=True)
class PeerInfo:
    """One connected peer from ``/api/v0/swarm/peers``."""

    peer_id: str
    addr: str

    @property
    def multiaddr(self) -> str:
        """The peer's address including its ``/p2p/`` id, ready for ``connect``."""
        return f"{self.addr}/p2p/{self.peer_id}"
