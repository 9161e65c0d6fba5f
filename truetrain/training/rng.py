"""Device-independent randomness: keccak-derived keys feeding numpy's PCG64 raw stream.

Only the raw 64-bit output of PCG64 is used (its stream is fixed by its specification),
never numpy's distribution methods (which may change between numpy versions) nor torch's
generators (which differ between CPU and CUDA). So a key gives the same numbers anywhere.
"""

from __future__ import annotations

import numpy as np

from ..hashing import keccak256

_DOMAIN = b"truetrain/rng/v1"


def derive_key(seed: int, label: str, *indices: int) -> bytes:
    """32-byte key for one purpose: keccak256(domain, seed, label, indices...)."""
    if not 0 <= int(seed) < 2**64:
        raise ValueError(f"seed must fit in 64 bits, got {seed}")
    parts = [_DOMAIN, int(seed).to_bytes(8, "big"), len(label).to_bytes(2, "big"),
             label.encode()]
    parts += [int(i).to_bytes(8, "big", signed=True) for i in indices]
    return keccak256(b"".join(parts))


def subkey(key: bytes, *indices: int) -> bytes:
    """Key derived from another key and integers (e.g. a batch key and an epoch)."""
    return keccak256(bytes(key) + b"".join(int(i).to_bytes(8, "big", signed=True)
                                            for i in indices))


def raw_uint64(key: bytes, n: int) -> np.ndarray:
    """``n`` raw 64-bit PCG64 outputs seeded by the 32-byte ``key``."""
    bitgen = np.random.PCG64(int.from_bytes(key, "big"))
    return bitgen.random_raw(n).astype(np.uint64) if n else np.zeros(0, np.uint64)


def uniform(key: bytes, n: int) -> np.ndarray:
    """``n`` float64 values uniform in [0, 1): the top 53 bits of each raw output."""
    return (raw_uint64(key, n) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def permutation(key: bytes, n: int) -> np.ndarray:
    """A permutation of ``range(n)``: indices sorted by their raw random draws (stable)."""
    return np.argsort(raw_uint64(key, n), kind="stable").astype(np.int64)


def batch_indices(key: bytes, n: int, batch: int, step: int, cache: dict | None = None):
    """Sample indices of batch ``step``: positions ``step*batch ...`` of the stream made of
    epoch permutations ``permutation(subkey(key, e), n)`` for e = 0, 1, 2, ...

    A pure function of (key, n, batch, step), so any step can be recomputed alone.
    """
    start, end = step * batch, (step + 1) * batch
    out = []
    for epoch in range(start // n, (end - 1) // n + 1):
        if cache is not None and epoch in cache:
            perm = cache[epoch]
        else:
            perm = permutation(subkey(key, epoch), n)
            if cache is not None:
                cache.clear()
                cache[epoch] = perm
        lo, hi = max(start, epoch * n) - epoch * n, min(end, (epoch + 1) * n) - epoch * n
        out.append(perm[lo:hi])
    return np.concatenate(out)
