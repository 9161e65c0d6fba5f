"""Syntactic CID checks, so a malformed CID is refused before any node or chain is asked."""

from __future__ import annotations

import re

from truetrain.errors import InvalidCid

_BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_CID_V0 = re.compile(rf"^Qm[{_BASE58}]{{44}}$")
# CIDv1 in multibase base32 (lowercase, prefix "b"), as Kubo and Helia print it.
_CID_V1 = re.compile(r"^b[a-z2-7]{20,200}$")


def is_cid(text: str) -> bool:
    """True for a CIDv0 (``Qm…``) or a base32 CIDv1 (``b…``)."""
    return isinstance(text, str) and bool(_CID_V0.match(text) or _CID_V1.match(text))


def check_cid(text: str) -> str:
    """Return ``text`` if it is a CID, else raise :class:`InvalidCid`."""
    if not is_cid(text):
        raise InvalidCid(f"not a CID: {text!r} (expected Qm… or a base32 b… CIDv1)")
    return text
