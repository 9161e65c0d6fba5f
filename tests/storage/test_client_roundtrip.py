"""The client against one real dev node: round trips, verification, limits, pins, timeouts."""

from __future__ import annotations

import os
import time

import pytest
import torch

from truetrain.errors import ContentMismatch, ContentNotFound, ContentTooLarge, InvalidCid, StorageTimeout
from truetrain.hashing import keccak256
from truetrain.training import Checkpoint
from truetrain.training.checkpoint import fetch_checkpoint

# A CID of content no node here ever held (CIDv1 raw leaf of b"nobody has this").
ABSENT_CID = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"


def test_add_bytes_then_fetch_returns_the_same_bytes(client):
    data = os.urandom(700_000)  # three 256 KiB chunks: a real DAG, not one block
    stored = client.add_bytes(data)
    assert stored.hash == keccak256(data) and stored.size == len(data)
    assert client.fetch(stored.cid, stored.hash, max_size=len(data)) == data


def test_add_file_then_fetch_to_file_round_trips(client, tmp_path):
    source = tmp_path / "checkpoint.bin"
    source.write_bytes(os.urandom(300_000))
    stored = client.add_file(source)
    assert stored.hash == keccak256(source.read_bytes()) and stored.size == 300_000
    target = client.fetch_to_file(stored.cid, tmp_path / "copy.bin", stored.hash, max_size=300_000)
    assert target.read_bytes() == source.read_bytes()


def test_add_gives_kubo_cids_for_known_content(client):
    # The CIDs Kubo itself gives with default settings (CIDv0, dag-pb, 256 KiB chunks).
    assert client.add_bytes(b"hello world\n").cid == "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o"
    assert client.add_bytes(b"Mary had a little lamb").cid == "QmZfF6C9j4VtoCsTp4KSrhYH47QMd3DNXVZBKaxJdhaPab"


def test_fetch_wrong_expected_hash_raises_content_mismatch(client):
    stored = client.add_bytes(b"the real content")
    with pytest.raises(ContentMismatch, match="refusing it"):
        client.fetch(stored.cid, keccak256(b"some other content"), max_size=1000)


def test_fetch_to_file_mismatch_leaves_no_file(client, tmp_path):
    stored = client.add_bytes(b"file content")
    with pytest.raises(ContentMismatch):
        client.fetch_to_file(stored.cid, tmp_path / "out.bin", keccak256(b"other"), max_size=1000)
    assert list(tmp_path.iterdir()) == []


def test_fetch_over_max_size_raises_content_too_large(client):
    stored = client.add_bytes(b"x" * 10_000)
    with pytest.raises(ContentTooLarge, match="larger than the limit of 9999 bytes"):
        client.fetch(stored.cid, stored.hash, max_size=9_999)
    assert client.fetch(stored.cid, stored.hash, max_size=10_000) == b"x" * 10_000


def test_fetch_of_content_nobody_has_times_out(client):
    started = time.monotonic()
    with pytest.raises(StorageTimeout, match="context deadline exceeded"):
        client.fetch(ABSENT_CID, keccak256(b""), max_size=100, timeout=0.5)
    assert time.monotonic() - started < 3


def test_fetch_of_malformed_cid_raises_invalid_cid(client):
    with pytest.raises(InvalidCid, match='invalid path "not-a-cid"'):
        client.fetch("not-a-cid", keccak256(b""), max_size=100)


def test_add_pins_by_default_and_pin_false_does_not(client):
    pinned = client.add_bytes(b"keep me")
    loose = client.add_bytes(b"do not keep me", pin=False)
    pins = client.pins()
    assert pinned.cid in pins and loose.cid not in pins
    client.pin(loose.cid)
    assert loose.cid in client.pins()
    client.pin(loose.cid)  # pinning twice is fine, as in Kubo
    client.unpin(loose.cid)
    assert loose.cid not in client.pins()


def test_unpin_of_unpinned_content_raises_content_not_found(client):
    stored = client.add_bytes(b"never pinned", pin=False)
    with pytest.raises(ContentNotFound, match="not pinned"):
        client.unpin(stored.cid)


def test_id_and_version_describe_the_node(client, shared_node):
    info = client.id()
    assert info.peer_id == shared_node.peer_id
    assert info.public_key and info.agent_version.startswith("truetrain-devnode/")
    assert all(addr.startswith("/ip4/127.0.0.1/tcp/") for addr in info.addresses)
    assert client.version() == "0.30.0-truetrain-devnode"


def test_fetch_checkpoint_checksTheCommitment_notTheBytes(client):
    """A checkpoint is fetched against its checkpoint hash (decoded, then its commitment):
    the bytes' keccak256 is refused, as is a wrong hash, content that is no checkpoint, or
    more bytes than the limit."""
    ckpt = Checkpoint(3, b"\x11" * 32, {"model.w": torch.tensor([1.0, -2.0]), "optim.step": torch.tensor(7)})
    data = ckpt.to_bytes()
    stored = client.add_bytes(data)
    assert fetch_checkpoint(client, stored.cid, ckpt.hash(), max_size=len(data)) == data
    with pytest.raises(ContentMismatch, match=f"hashes to 0x{ckpt.hash().hex()}, expected 0x{stored.hash.hex()}"):
        fetch_checkpoint(client, stored.cid, stored.hash, max_size=len(data))
    other = client.add_bytes(b"not a checkpoint")
    with pytest.raises(ContentMismatch, match="is not a checkpoint \\(not a truetrain checkpoint"):
        fetch_checkpoint(client, other.cid, ckpt.hash(), max_size=100)
    with pytest.raises(ContentTooLarge):
        fetch_checkpoint(client, stored.cid, ckpt.hash(), max_size=len(data) - 1)
