"""Checkpoint encoding: round trip, the documented test vector, corrupted input."""

from __future__ import annotations

import pytest
import torch

from truetrain.errors import CheckpointError
from truetrain.hashing import keccak256
from truetrain.training import Checkpoint, checkpoint_hash, decode_checkpoint, load_checkpoint

# The tiny checkpoint of docs/checkpoint-format.md and its bytes and hash.
DOC_BYTES = bytes.fromhex(
    "5454434b50540001" "0300000000000000" + "11" * 32 + "02000000"
    "0700" "6d6f64656c2e77" "01" "01" "0200000000000000" "0000803f" "000000c0"
    "0a00" "6f7074696d2e73746570" "03" "00" "0700000000000000")
DOC_HASH = "8621ddb505e4edb900470b01734a802fd8144f7ead8f3bab6dbb6c86494da618"


def _doc_checkpoint() -> Checkpoint:
    return Checkpoint(3, bytes([0x11]) * 32, {
        "optim.step": torch.tensor(7, dtype=torch.int64),
        "model.w": torch.tensor([1.0, -2.0], dtype=torch.float32)})


def test_encode_docVector_bytesAndHash():
    ckpt = _doc_checkpoint()
    assert ckpt.to_bytes() == DOC_BYTES
    assert ckpt.hash().hex() == DOC_HASH
    assert checkpoint_hash(DOC_BYTES).hex() == DOC_HASH


def test_decode_roundTrip_exactAndSameHash():
    gen = torch.Generator().manual_seed(0)
    ckpt = Checkpoint(123456789, bytes(range(32)), {
        "model.fc.0.weight": torch.randn(5, 3, generator=gen),
        "model.fc.0.bias": torch.tensor([-0.0, float("inf"), 1e-45]),
        "optim.beta1_power": torch.tensor(0.9, dtype=torch.float32),
        "x.f64": torch.randn(2, 2, 2, generator=gen, dtype=torch.float64),
        "x.empty": torch.zeros(0, 4)})
    data = ckpt.to_bytes()
    back = decode_checkpoint(data)
    assert back.step == ckpt.step and back.rng_key == ckpt.rng_key
    assert set(back.tensors) == set(ckpt.tensors)
    for name, t in ckpt.tensors.items():
        got = back.tensors[name]
        assert got.dtype == t.dtype and got.shape == t.shape
        assert got.numpy().tobytes() == t.numpy().tobytes()
    assert back.hash() == ckpt.hash() == keccak256(data)


def test_hash_anyTensorBitChange_changesHash():
    ckpt = _doc_checkpoint()
    other = _doc_checkpoint()
    other.tensors["model.w"] = torch.tensor([1.0, -2.0000002])
    assert other.hash() != ckpt.hash()
    other = _doc_checkpoint()
    other.step = 4
    assert other.hash() != ckpt.hash()


@pytest.mark.parametrize("data", [
    b"",
    DOC_BYTES[:-1],
    DOC_BYTES + b"\x00",
    b"XXCKPT\x00\x01" + DOC_BYTES[8:],
    DOC_BYTES[:52] + b"\x03\x00\x00\x00" + DOC_BYTES[56:],  # claims 3 tensors
    DOC_BYTES[:61] + b"\x09" + DOC_BYTES[62:],  # unknown dtype code
    DOC_BYTES[:52] + b"\xff\xff" + DOC_BYTES[54:],  # name length past the end
    DOC_BYTES[:63] + b"\x03" + DOC_BYTES[64:],  # shape larger than the data
], ids=["empty", "truncated", "trailing", "magic", "count", "dtype", "name-length",
        "shape"])
def test_decode_corrupted_raisesCheckpointError(data):
    with pytest.raises(CheckpointError):
        decode_checkpoint(data)


def test_decode_unsortedNames_raisesCheckpointError():
    a = DOC_BYTES[52:52 + 2 + 7 + 2 + 8 + 8]  # the model.w record
    b = DOC_BYTES[52 + len(a):]  # the optim.step record
    with pytest.raises(CheckpointError, match="sorted"):
        decode_checkpoint(DOC_BYTES[:52] + b + a)


def test_load_checkpoint_wrongHash_raises():
    assert load_checkpoint(DOC_BYTES, bytes.fromhex(DOC_HASH)).step == 3
    with pytest.raises(CheckpointError, match="hash"):
        load_checkpoint(DOC_BYTES, bytes(32))
