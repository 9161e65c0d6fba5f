"""Content-addressed storage over the Kubo RPC API (a Kubo daemon or the Helia dev node).

Everything large (manifests, shards, checkpoints, metrics) goes through :class:`StorageClient`.
Reads are never trusted: :meth:`StorageClient.fetch` checks the keccak256 of what arrived
against the hash recorded on chain or in the manifest, and refuses oversized content before
it has all arrived.
"""

from __future__ import annotations

import io
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import ipfshttpclient
from eth_hash.auto import keccak

from truetrain.errors import ContentMismatch, ContentTooLarge, StorageError, StorageTimeout, StorageUnavailable
from truetrain.hashing import keccak256, to_hex32
from truetrain.storage.failures import is_retryable, translate
from truetrain.storage.models import NodeInfo, PeerInfo, StoredObject
from truetrain.retry import RetriesExhausted, RetryPolicy, call_with_retries
from truetrain.storage.settings import StorageSettings

T = TypeVar("T")

# ipfshttpclient 0.7 passes urllib3 a `strict` argument that urllib3 2.x only warns about.
warnings.filterwarnings("ignore", message="The 'strict' parameter is no longer needed", category=FutureWarning)

_FILE_CHUNK = 1 << 20
#: Extra seconds the socket waits beyond the fetch deadline, so the node's own
#: "context deadline exceeded" answer (sent at the deadline) arrives before the socket gives up.
_DEADLINE_GRACE_S = 1.0


def _raw(response: Any) -> dict:
    """ipfshttpclient wraps JSON objects in ResponseBase; hand back the plain dict."""
    return response.as_json() if hasattr(response, "as_json") else dict(response)


def _check_expected_hash(expected_hash: bytes) -> None:
    if not isinstance(expected_hash, (bytes, bytearray)) or len(expected_hash) != 32:
        raise ValueError("expected_hash must be the 32-byte keccak256 of the content")


def _check_max_size(max_size: int) -> None:
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 0:
        raise ValueError(f"max_size must be an integer >= 0, got {max_size!r}")


class _BytesSink:
    """Collects fetched bytes in memory; restartable when a retry begins again."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def reset(self) -> None:
        self.parts.clear()

    def write(self, chunk: bytes) -> None:
        self.parts.append(chunk)


class _FileSink:
    """Writes fetched bytes to an open temporary file; restartable when a retry begins again."""

    def __init__(self, handle: io.BufferedRandom) -> None:
        self.handle = handle

    def reset(self) -> None:
        self.handle.seek(0)
        self.handle.truncate()

    def write(self, chunk: bytes) -> None:
        self.handle.write(chunk)


class StorageClient:
    """A Kubo RPC client with retries, deadlines and mandatory hash verification on reads.

    It speaks only standard Kubo RPC calls, so it works unchanged against a real Kubo daemon
    (``StorageSettings(api_addr="/ip4/HOST/tcp/5001")``) or the local Helia dev node.
    """

    def __init__(self, settings: StorageSettings | None = None, *, sleep: Callable[[float], None] = time.sleep):
        self.settings = settings if settings is not None else StorageSettings()
        self._policy = RetryPolicy(self.settings.retries, self.settings.backoff_s, self.settings.backoff_max_s)
        self._sleep = sleep
        # Constructed directly: ipfshttpclient.connect() refuses daemons newer than 0.8.
        self._ipfs = ipfshttpclient.Client(self.settings.api_addr, timeout=self.settings.timeout_s)

    # --- plumbing ------------------------------------------------------------------------

    def _call(self, what: str, operation: Callable[[], T], *, deadline: float | None = None) -> T:
        """Run one RPC with retries on connection failures; translate every failure."""
        try:
            return call_with_retries(operation, self._policy, is_retryable=is_retryable, deadline=deadline, sleep=self._sleep)
        except RetriesExhausted as exhausted:
            raise StorageUnavailable(
                f"IPFS node at {self.settings.api_addr} unreachable for {what} after "
                f"{exhausted.attempts} attempt(s): {exhausted.last}"
            ) from exhausted.last
        except Exception as error:  # noqa: BLE001 - translate() keeps truetrain errors as they are
            raise translate(error, what) from error

    def _add_options(self) -> dict[str, Any]:
        # Kubo's own default for CIDv1 is raw leaves; ipfshttpclient would send raw-leaves=false.
        if self.settings.cid_version == 1:
            return {"cid_version": 1, "raw_leaves": True}
        return {"cid_version": 0}

    # --- writing -------------------------------------------------------------------------

    def add_bytes(self, data: bytes, pin: bool = True) -> StoredObject:
        """Add ``data`` as one UnixFS file; pin it unless ``pin`` is false."""
        data = bytes(data)

        def add() -> dict:
            return _raw(self._ipfs.add(io.BytesIO(data), pin=pin, timeout=self.settings.timeout_s, **self._add_options()))

        result = self._call(f"add ({len(data)} bytes)", add)
        return StoredObject(cid=result["Hash"], hash=keccak256(data), size=len(data))

    def add_file(self, path: str | os.PathLike[str], pin: bool = True) -> StoredObject:
        """Add the regular file at ``path``, streaming it from disk; pin it unless ``pin`` is false."""
        path = Path(path)
        if not path.is_file():
            raise StorageError(f"cannot add {path}: not a regular file")
        digest = keccak.new(b"")
        size = 0
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(_FILE_CHUNK), b""):
                digest.update(chunk)
                size += len(chunk)

        def add() -> dict:
            return _raw(self._ipfs.add(str(path), pin=pin, timeout=self.settings.timeout_s, **self._add_options()))

        result = self._call(f"add {path.name} ({size} bytes)", add)
        return StoredObject(cid=result["Hash"], hash=digest.digest(), size=size)

    def pin(self, cid: str) -> None:
        """Pin ``cid`` recursively (fetching it from peers first if this node lacks it)."""
        self._call(f"pin add {cid}", lambda: self._ipfs.pin.add(cid, timeout=self.settings.timeout_s))

    def unpin(self, cid: str) -> None:
        """Remove the recursive pin of ``cid`` (its blocks go at the node's next GC)."""
        self._call(f"pin rm {cid}", lambda: self._ipfs.pin.rm(cid, timeout=self.settings.timeout_s))

    def pins(self) -> set[str]:
        """The CIDs pinned recursively on the node (the roots, not their child blocks)."""
        result = self._call("pin ls", lambda: _raw(self._ipfs.pin.ls(type="recursive", timeout=self.settings.timeout_s)))
        return set((result.get("Keys") or {}).keys())

    # --- reading -------------------------------------------------------------------------

    def fetch(self, cid: str, expected_hash: bytes, *, max_size: int, timeout: float | None = None) -> bytes:
        """Return the bytes of ``cid`` after checking their keccak256 equals ``expected_hash``.

        Raises :class:`ContentTooLarge` as soon as more than ``max_size`` bytes arrive,
        :class:`ContentMismatch` when the hash differs, :class:`StorageTimeout` when the whole
        fetch takes longer than ``timeout`` seconds (default ``settings.timeout_s``),
        :class:`ContentNotFound`/:class:`StorageError` for node refusals and
        :class:`StorageUnavailable` when the node cannot be reached after the retries.
        """
        _check_expected_hash(expected_hash)
        sink = _BytesSink()
        self._fetch_into(sink, cid, expected_hash, max_size=max_size, timeout=timeout)
        return b"".join(sink.parts)

    def fetch_unverified(self, cid: str, *, max_size: int, timeout: float | None = None) -> bytes:
        """Return the bytes of ``cid`` without a hash check, for content the caller checks
        another way (a result bundle is checked against the Merkle root revealed on chain)."""
        sink = _BytesSink()
        self._fetch_into(sink, cid, None, max_size=max_size, timeout=timeout)
        return b"".join(sink.parts)

    def fetch_to_file(
        self,
        cid: str,
        path: str | os.PathLike[str],
        expected_hash: bytes,
        *,
        max_size: int,
        timeout: float | None = None,
    ) -> Path:
        """Like :meth:`fetch`, but stream to ``path``; the file appears only once verified."""
        _check_expected_hash(expected_hash)
        path = Path(path)
        handle = tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".part", delete=False)
        try:
            with handle:
                self._fetch_into(_FileSink(handle), cid, expected_hash, max_size=max_size, timeout=timeout)
            os.replace(handle.name, path)
        except BaseException:
            Path(handle.name).unlink(missing_ok=True)
            raise
        return path

    def _fetch_into(self, sink: Any, cid: str, expected_hash: bytes | None, *, max_size: int,
                    timeout: float | None) -> None:
        if expected_hash is not None:  # None only from fetch_unverified
            _check_expected_hash(expected_hash)
        _check_max_size(max_size)
        budget = self.settings.timeout_s if timeout is None else timeout
        if not budget > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        deadline = time.monotonic() + budget
        what = f"cat {cid}"

        def attempt() -> tuple[bytes, int]:
            sink.reset()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StorageTimeout(f"IPFS fetch of {cid} exceeded {budget:g} s")
            # `length` keeps an honest node from sending more than we would accept; the local
            # count below protects against one that ignores it. `timeout` is Kubo's own
            # deadline option, so the node stops searching the network when we stop waiting.
            opts = {"length": max_size + 1, "timeout": f"{remaining:.3f}s"}
            stream = self._ipfs.cat(cid, stream=True, opts=opts, timeout=(min(remaining, self.settings.timeout_s), remaining + _DEADLINE_GRACE_S))
            digest = keccak.new(b"")
            total = 0
            with stream:
                for chunk in _chunks(stream):
                    total += len(chunk)
                    if total > max_size:
                        raise ContentTooLarge(f"content {cid} is larger than the limit of {max_size} bytes")
                    if time.monotonic() > deadline:
                        raise StorageTimeout(f"IPFS fetch of {cid} exceeded {budget:g} s")
                    digest.update(chunk)
                    sink.write(chunk)
            return digest.digest(), total

        digest, total = self._call(what, attempt, deadline=deadline)
        if expected_hash is not None and digest != bytes(expected_hash):
            if time.monotonic() >= deadline:
                # A node cut the stream at our deadline (Kubo reports that only in a trailer).
                raise StorageTimeout(f"IPFS fetch of {cid} exceeded {budget:g} s after {total} bytes")
            raise ContentMismatch(
                f"content {cid} ({total} bytes) hashes to {to_hex32(digest)}, "
                f"expected {to_hex32(bytes(expected_hash))}: refusing it"
            )

    # --- node and swarm ------------------------------------------------------------------

    def id(self) -> NodeInfo:
        """The node's peer id, public key, listen addresses and agent version."""
        result = self._call("id", lambda: _raw(self._ipfs.id(timeout=self.settings.timeout_s)))
        return NodeInfo(
            peer_id=result["ID"],
            public_key=result.get("PublicKey") or "",
            addresses=tuple(result.get("Addresses") or ()),
            agent_version=result.get("AgentVersion") or "",
        )

    def version(self) -> str:
        """The node's version string (e.g. ``0.30.0`` for Kubo)."""
        result = self._call("version", lambda: _raw(self._ipfs.version(timeout=self.settings.timeout_s)))
        return str(result["Version"])

    def connect(self, multiaddr: str) -> None:
        """Connect the node to a peer at ``multiaddr`` (which must end in ``/p2p/<peer id>``)."""
        # Not ipfshttpclient's swarm.connect: 0.7.0 sends every *character* of the address as
        # one more `arg` (`*(str(a) for a in address)`), which Kubo rejects as well.
        def connect() -> dict:
            answer = self._ipfs._client.request(  # noqa: SLF001 - see above
                "/swarm/connect", (multiaddr,), decoder="json", timeout=self.settings.timeout_s
            )
            return answer[0] if isinstance(answer, list) else answer

        result = self._call(f"swarm connect {multiaddr}", connect)
        strings = result.get("Strings") or []
        if not any("success" in s for s in strings):
            raise StorageError(f"IPFS node could not connect to {multiaddr}: {strings}")

    def peers(self) -> list[PeerInfo]:
        """The peers the node is connected to right now."""
        result = self._call("swarm peers", lambda: _raw(self._ipfs.swarm.peers(timeout=self.settings.timeout_s)))
        return [PeerInfo(peer_id=p["Peer"], addr=p["Addr"]) for p in (result.get("Peers") or [])]

    # --- lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        """Release the HTTP session, if one is open."""
        self._ipfs.close()

    def __enter__(self) -> StorageClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _chunks(stream: Iterable[bytes]) -> Iterable[bytes]:
    """Skip the empty keep-alive chunks a streamed body may yield."""
    for chunk in stream:
        if chunk:
            yield chunk


def connect_store(settings: StorageSettings) -> StorageClient:
    """A client whose node has answered once: "no IPFS node answers at …" in one line when
    none does (not the HTTP library's retries), the node's own failure otherwise."""
    store = StorageClient(settings)
    try:
        store.id()
    except (StorageUnavailable, StorageTimeout):
        store.close()
        raise StorageUnavailable(f"no IPFS node answers at {settings.api_addr}") from None
    except StorageError as exc:
        store.close()
        raise type(exc)(f"the IPFS node at {settings.api_addr} failed: {exc}") from None
    return store
