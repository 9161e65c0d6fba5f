"""Datasets: digits and .npz loading, seeded split and shards, canonical shard bytes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from truetrain.errors import DatasetError
from truetrain.hashing import keccak256, to_hex32
from truetrain.training import (decode_shard, encode_shard, load_dataset, prepare_dataset,
                                publish_dataset)


@dataclass(frozen=True)
class _Stored:
    cid: str
    hash: bytes
    size: int


class DictStore:
    """In-memory stand-in for the storage client's ``add_bytes`` (publish-shape test only)."""

    def __init__(self):
        self.blobs: dict[str, bytes] = {}

    def add_bytes(self, data: bytes, pin: bool = True) -> _Stored:
        cid = "bafk" + keccak256(data).hex()[:20]
        self.blobs[cid] = bytes(data)
        return _Stored(cid, keccak256(data), len(data))


def test_load_digits_scaledFloat32():
    ds = load_dataset("digits")
    assert ds.x.shape == (1797, 64) and ds.x.dtype == np.float32
    assert ds.x.max() == 1.0 and ds.x.min() == 0.0 and set(ds.y) == set(range(10))


def test_prepare_sameSeed_sameBytes_otherSeed_otherShards():
    a = prepare_dataset("digits", num_shards=3, seed=5)
    b = prepare_dataset("digits", num_shards=3, seed=5)
    c = prepare_dataset("digits", num_shards=3, seed=6)
    assert a == b
    assert a[0] != c[0]
    sizes = [len(decode_shard(s)) for s in a[0]]
    assert sum(sizes) + len(decode_shard(a[1])) == 1797
    assert max(sizes) - min(sizes) <= 1 and len(decode_shard(a[1])) == 359


def test_shard_encoding_layoutAndRoundTrip():
    x = np.array([[1.0, -2.0], [0.5, 3.0]], dtype=np.float32)
    data = encode_shard(x, np.array([3, 1]))
    assert data[:8] == b"TTSHARD1" and len(data) == 24 + 16 + 8
    assert data[24:28] == np.float32(1.0).tobytes() and data[-4:] == b"\x01\x00\x00\x00"
    shard = decode_shard(data)
    assert np.array_equal(shard.x, x) and shard.y.tolist() == [3, 1]
    with pytest.raises(DatasetError):
        decode_shard(data[:-1])
    with pytest.raises(DatasetError):
        decode_shard(b"NOTSHARD" + data[8:])


def test_load_npz_withAndWithoutTestSet(tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.random((50, 3, 4)), rng.integers(0, 4, 50)
    np.savez(tmp_path / "a.npz", x=x, y=y)
    np.savez(tmp_path / "b.npz", x=x, y=y, x_test=x[:5], y_test=y[:5])
    np.savez(tmp_path / "c.npz", x=x)
    a = load_dataset(tmp_path / "a.npz")
    assert a.x.shape == (50, 12) and a.x_test is None
    shards, test = prepare_dataset(tmp_path / "b.npz", num_shards=2, seed=1)
    assert len(decode_shard(test)) == 5 and sum(len(decode_shard(s)) for s in shards) == 50
    with pytest.raises(DatasetError, match="'x' and 'y'"):
        load_dataset(tmp_path / "c.npz")


def test_publish_dataset_manifestEntriesShape():
    store = DictStore()
    out = publish_dataset(store, "digits", num_shards=3, seed=5)
    assert len(out["shards"]) == 3 and len(store.blobs) == 4
    for ref in out["shards"] + [out["test_set"]]:
        assert set(ref) == {"cid", "hash", "samples"}
        assert ref["hash"] == to_hex32(keccak256(store.blobs[ref["cid"]]))
        assert ref["samples"] == len(decode_shard(store.blobs[ref["cid"]]))
