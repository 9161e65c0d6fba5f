"""Datasets, deterministic test split and sharding, and the canonical shard encoding.

Shard bytes (also used for the test set), all little-endian::

    magic   8 bytes   b"TTSHARD1"
    n       uint64    number of samples
    d       uint64    features per sample
    x       n*d float32, row-major
    y       n int32 labels

The same arrays always give the same bytes, so the keccak256 in the manifest is stable.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

import numpy as np

from ..errors import DatasetError
from ..hashing import keccak256, to_hex32
from .rng import derive_key, permutation

SHARD_MAGIC = b"TTSHARD1"


@dataclass(frozen=True)
class Dataset:
    """Training arrays and an optional given test set (x float32 (n, d), y int64 (n,))."""

    x: np.ndarray
    y: np.ndarray
    x_test: np.ndarray | None = None
    y_test: np.ndarray | None = None


@dataclass(frozen=True)
class Shard:
    x: np.ndarray  # float32 (n, d)
    y: np.ndarray  # int64 (n,)

    def __len__(self) -> int:
        return len(self.y)


def _check_xy(x, y, what: str):
    x = np.asarray(x)
    y = np.asarray(y)
    if x.ndim < 2 or y.ndim != 1 or len(x) != len(y) or len(y) == 0:
        raise DatasetError(f"{what}: need x of shape (n, ...) and y of shape (n,), n > 0")
    if not np.issubdtype(y.dtype, np.integer) or y.min() < 0 or y.max() >= 2**31:
        raise DatasetError(f"{what}: labels must be integers in [0, 2**31)")
    x = np.ascontiguousarray(x.reshape(len(x), -1), dtype=np.float32)
    if not np.isfinite(x).all():
        raise DatasetError(f"{what}: x has inf or NaN")
    return x, y.astype(np.int64)


def load_dataset(source: str | os.PathLike = "digits") -> Dataset:
    """``"digits"`` (scikit-learn's 8x8 digits, x/16 as float32) or a ``.npz`` path with
    keys ``x``, ``y`` and optionally ``x_test``, ``y_test``."""
    if str(source) == "digits":
        from sklearn.datasets import load_digits

        d = load_digits()
        return Dataset(*_check_xy(d.data / 16.0, d.target, "digits"))
    arrays = _read_npz(source)
    if "x" not in arrays or "y" not in arrays:
        raise DatasetError(f"{source}: .npz needs keys 'x' and 'y'")
    x, y = _check_xy(arrays["x"], arrays["y"], f"{source}")
    if ("x_test" in arrays) != ("y_test" in arrays):
        raise DatasetError(f"{source}: give both 'x_test' and 'y_test' or neither")
    if "x_test" in arrays:
        xt, yt = _check_xy(arrays["x_test"], arrays["y_test"], f"{source} test set")
        if xt.shape[1] != x.shape[1]:
            raise DatasetError(f"{source}: x_test has {xt.shape[1]} features, x {x.shape[1]}")
        return Dataset(x, y, xt, yt)
    return Dataset(x, y)


def _read_npz(source) -> dict:
    """The arrays of a ``.npz`` file; a file that is not one (text, a ``.npy``, object
    arrays that only unpickling could load) is refused by what it is, not by numpy's advice."""
    import zipfile

    if not zipfile.is_zipfile(source):
        raise DatasetError(f"{source} is not an .npz dataset (a NumPy archive made by numpy.savez with arrays "
                           f"x and y)")
    try:
        with np.load(source, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except ValueError as exc:
        if "allow_pickle" in str(exc):
            raise DatasetError(f"{source} holds object arrays: save x and y as numeric arrays") from None
        raise DatasetError(f"cannot read dataset {source}: {exc}") from exc
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        raise DatasetError(f"cannot read dataset {source}: {exc}") from exc


def split_test(dataset: Dataset, seed: int, test_fraction: float = 0.2):
    """(x_train, y_train, x_test, y_test): the given test set, else a seeded split."""
    if dataset.x_test is not None:
        return dataset.x, dataset.y, dataset.x_test, dataset.y_test
    n = len(dataset.y)
    n_test = int(round(n * test_fraction))
    if not 0 < n_test < n:
        least = next((m for m in range(2, 10_000) if 0 < round(m * test_fraction) < m), None)
        if least is None:
            raise DatasetError(f"test_fraction {test_fraction} leaves no train or test samples")
        raise DatasetError(f"the dataset has {n} sample(s), too few to hold out {test_fraction:.0%} as a test set: "
                           f"give at least {least}, or a test set of its own (x_test and y_test in the .npz)")
    perm = permutation(derive_key(seed, "test-split"), n)
    test, train = np.sort(perm[:n_test]), np.sort(perm[n_test:])
    return dataset.x[train], dataset.y[train], dataset.x[test], dataset.y[test]


def shard_arrays(x: np.ndarray, y: np.ndarray, num_shards: int, seed: int) -> list[Shard]:
    """Seeded shuffle, then ``num_shards`` contiguous near-equal parts."""
    if not 1 <= num_shards <= len(y):
        raise DatasetError(f"cannot cut {len(y)} samples into {num_shards} shards")
    perm = permutation(derive_key(seed, "shards"), len(y))
    return [Shard(x[idx], y[idx]) for idx in np.array_split(perm, num_shards)]


def encode_shard(x: np.ndarray, y: np.ndarray) -> bytes:
    x, y = _check_xy(x, y, "shard")
    head = SHARD_MAGIC + struct.pack("<QQ", x.shape[0], x.shape[1])
    return head + x.astype("<f4").tobytes() + y.astype("<i4").tobytes()


def decode_shard(data: bytes) -> Shard:
    data = bytes(data)
    if len(data) < 24 or data[:8] != SHARD_MAGIC:
        raise DatasetError("not a truetrain shard (bad magic)")
    n, d = struct.unpack("<QQ", data[8:24])
    if n == 0 or d == 0 or len(data) != 24 + n * d * 4 + n * 4:
        raise DatasetError(f"shard size {len(data)} does not match n={n}, d={d}")
    x = np.frombuffer(data, "<f4", n * d, 24).reshape(n, d).astype(np.float32)
    y = np.frombuffer(data, "<i4", n, 24 + n * d * 4).astype(np.int64)
    if y.min() < 0:
        raise DatasetError("shard has negative labels")
    return Shard(x, y)


def _stored_ref(store, data: bytes) -> dict:
    obj = store.add_bytes(data)
    digest = keccak256(data)
    claimed = getattr(obj, "hash", None)
    if isinstance(claimed, str):
        claimed = bytes.fromhex(claimed[2:] if claimed.startswith("0x") else claimed)
    if claimed is not None and bytes(claimed) != digest:
        raise DatasetError("the store reports a different hash than keccak256 of the bytes")
    return {"cid": str(obj.cid), "hash": to_hex32(digest), "samples": _samples(data)}


def _samples(data: bytes) -> int:
    return struct.unpack("<Q", data[8:16])[0]


def prepare_dataset(dataset="digits", *, num_shards: int, seed: int,
                    test_fraction: float = 0.2) -> tuple[list[bytes], bytes]:
    """(shard bytes list, test-set bytes) for a dataset source or :class:`Dataset`."""
    ds = dataset if isinstance(dataset, Dataset) else load_dataset(dataset)
    x, y, xt, yt = split_test(ds, seed, test_fraction)
    shards = [encode_shard(s.x, s.y) for s in shard_arrays(x, y, num_shards, seed)]
    return shards, encode_shard(xt, yt)


def publish_dataset(store, dataset="digits", *, num_shards: int, seed: int,
                    test_fraction: float = 0.2) -> dict:
    """Shard a dataset, store every shard and the test set with ``store.add_bytes``, and
    return the manifest's ``{"shards": [...], "test_set": {...}}`` entries."""
    shards, test = prepare_dataset(dataset, num_shards=num_shards, seed=seed,
                                   test_fraction=test_fraction)
    return {"shards": [_stored_ref(store, s) for s in shards],
            "test_set": _stored_ref(store, test)}
