"""Classify ipfshttpclient/requests failures and turn them into truetrain storage errors.

Only the RPC error *messages* Kubo itself uses are matched, so the same mapping holds for a
real Kubo daemon and for the Helia dev node (which copies Kubo's messages on purpose).
"""

from __future__ import annotations

import requests
import urllib3
from ipfshttpclient import exceptions as ipfs_exc

from truetrain.errors import (
    ContentNotFound,
    InvalidCid,
    StorageError,
    StorageTimeout,
    TruetrainError,
)

#: HTTP statuses that mean "the node (or a proxy in front of it) is busy or restarting".
_RETRYABLE_STATUS = frozenset({502, 503, 504})

_TIMEOUT_MESSAGES = ("context deadline exceeded", "deadline exceeded", "timed out")
_NOT_FOUND_MESSAGES = ("not found", "could not find", "no link named", "is not pinned", "not pinned")
_INVALID_CID_MESSAGES = ("invalid path", "invalid cid", "selected encoding not supported", "multibase")


def http_status(error: BaseException) -> int | None:
    """The HTTP status behind an ipfshttpclient StatusError, when there is one."""
    original = getattr(error, "original", None)
    response = getattr(original, "response", None)
    return getattr(response, "status_code", None)


def is_read_timeout(error: BaseException) -> bool:
    """requests reports a read timeout *while streaming* as a ConnectionError; spot it."""
    if isinstance(error, (ipfs_exc.TimeoutError, requests.exceptions.Timeout)):
        return True
    return isinstance(error, requests.exceptions.ConnectionError) and any(
        isinstance(arg, urllib3.exceptions.ReadTimeoutError) for arg in error.args
    )


def is_retryable(error: BaseException) -> bool:
    """Connection-level failures and 'node busy' statuses; never timeouts or refusals."""
    if is_read_timeout(error):
        return False
    if isinstance(error, (ipfs_exc.ConnectionError, ipfs_exc.ProtocolError)):
        return True
    if isinstance(
        error,
        (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError, urllib3.exceptions.HTTPError),
    ):
        return True  # raised while a response body streams, outside ipfshttpclient's wrapper
    if isinstance(error, ipfs_exc.StatusError):
        return http_status(error) in _RETRYABLE_STATUS
    return False


def translate(error: BaseException, what: str) -> TruetrainError:
    """Map a failure of operation ``what`` (e.g. ``"cat Qm..."``) to a truetrain error."""
    if isinstance(error, TruetrainError):
        return error
    if is_read_timeout(error):
        return StorageTimeout(f"IPFS node did not answer {what} in time")
    if isinstance(error, ipfs_exc.ErrorResponse):
        message = str(error)
        lowered = message.lower()
        if any(m in lowered for m in _TIMEOUT_MESSAGES):
            return StorageTimeout(f"IPFS node gave up on {what}: {message}")
        if any(m in lowered for m in _INVALID_CID_MESSAGES):
            return InvalidCid(f"IPFS node refused {what}: {message}")
        if any(m in lowered for m in _NOT_FOUND_MESSAGES):
            return ContentNotFound(f"IPFS node could not produce {what}: {message}")
        return StorageError(f"IPFS node refused {what}: {message}")
    if isinstance(error, ipfs_exc.StatusError):
        return StorageError(f"IPFS node answered {what} with HTTP {http_status(error)}: {error}")
    if isinstance(error, ipfs_exc.Error):
        return StorageError(f"IPFS client failed on {what}: {error}")
    return StorageError(f"{what} failed: {type(error).__name__}: {error}")
