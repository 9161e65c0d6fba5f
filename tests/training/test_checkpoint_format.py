"""Checkpoint encoding and hash: round trip, the documented test vector, corrupted input,
what the hash binds and what it deliberately ignores (NaN payloads)."""

from __future__ import annotations

import struct

import pytest
import torch
from eth_abi import encode

from truetrain.errors import CheckpointError
from truetrain.hashing import keccak256
from truetrain.numerics.tensor_merkle import TensorTree
from truetrain.training import Checkpoint, checkpoint_hash, decode_checkpoint, load_checkpoint
from truetrain.training.checkpoint import checkpoint_commitment, layout_bytes
from truetrain.training.merkle import leaf_node, merkle_root

# The tiny checkpoint of docs/checkpoint-format.md and its bytes and hash.
DOC_BYTES = bytes.fromhex(
    "5454434b50540001" "0300000000000000" + "11" * 32 + "02000000"
    "0700" "6d6f64656c2e77" "01" "01" "0200000000000000" "0000803f" "000000c0"
    "0a00" "6f7074696d2e73746570" "03" "00" "0700000000000000")
DOC_LAYOUT = bytes.fromhex("5454434b50540001" "02000000" "0700" "6d6f64656c2e77" "01" "01" "0200000000000000"
                           "0a00" "6f7074696d2e73746570" "03" "00")
DOC_LAYOUT_HASH = "be58d04fd3fd690f5e75a45fbe4fe8f0f0c25366ba0f29d573e15fa7201a1494"
DOC_TENSORS_ROOT = "34cd9f2130ad01337ef6acff9f07fddcc8719d525e0b094791793c5dac78f07f"
DOC_HASH = "c014978123783c5f117b50628fba6e175bc14c90080fefde0ca17c7c32d4e94e"


def _doc_checkpoint() -> Checkpoint:
    return Checkpoint(3, bytes([0x11]) * 32, {
        "optim.step": torch.tensor(7, dtype=torch.int64),
        "model.w": torch.tensor([1.0, -2.0], dtype=torch.float32)})


def _chunk_root(words: list[int]) -> bytes:
    """A one-chunk tensor's root written out: 64 big-endian words, zero-padded."""
    return leaf_node(keccak256(b"".join(struct.pack(">I", w) for w in words + [0] * (64 - len(words)))))


def test_encode_docVector_bytesAndHash():
    ckpt = _doc_checkpoint()
    assert ckpt.to_bytes() == DOC_BYTES
    assert layout_bytes(ckpt) == DOC_LAYOUT
    # model.w: two float32 words; optim.step: int64 7 as two words, high first
    roots = [_chunk_root([0x3F800000, 0xC0000000]), _chunk_root([0, 7])]
    step, key, layout, tensors = checkpoint_commitment(ckpt)
    assert (step, key, layout.hex(), tensors.hex()) == (3, b"\x11" * 32, DOC_LAYOUT_HASH, DOC_TENSORS_ROOT)
    assert keccak256(DOC_LAYOUT).hex() == DOC_LAYOUT_HASH and merkle_root(roots).hex() == DOC_TENSORS_ROOT
    want = keccak256(encode(["uint256", "bytes32", "bytes32", "bytes32"], [3, b"\x11" * 32, layout, tensors]))
    assert ckpt.hash().hex() == checkpoint_hash(DOC_BYTES).hex() == want.hex() == DOC_HASH
    assert keccak256(DOC_BYTES).hex() != DOC_HASH  # not the bytes' hash any more


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
    assert back.hash() == ckpt.hash() == checkpoint_hash(data)
    # the tensors' roots (the Python tree's) in the encoding's order; an empty tensor's is zeros
    names = ["model.fc.0.bias", "model.fc.0.weight", "optim.beta1_power", "x.empty", "x.f64"]
    roots = [TensorTree(ckpt.tensors[n]).root if n != "x.empty" else bytes(32) for n in names]
    assert checkpoint_commitment(ckpt)[3] == merkle_root(roots)


def _variant(change: str) -> Checkpoint:
    """The doc checkpoint with one thing changed (a value, a name, a dtype, a shape, ...)."""
    ckpt = _doc_checkpoint()
    t = ckpt.tensors
    if change == "value":
        t["model.w"] = torch.tensor([1.0, -2.0000002])
    elif change == "shape":  # the same two words, as (1, 2)
        t["model.w"] = t["model.w"].reshape(1, 2)
    elif change == "name":
        t["model.v"] = t.pop("model.w")
    elif change == "dtype":  # the same words, as int32
        t["model.w"] = t["model.w"].view(torch.int32)
    elif change == "step":
        ckpt.step = 4
    elif change == "rng_key":
        ckpt.rng_key = bytes([0x11]) * 31 + b"\x12"
    elif change == "int64-high":  # 7 + 2^32: the same low word
        t["optim.step"] = torch.tensor(7 + 2**32, dtype=torch.int64)
    return ckpt


@pytest.mark.parametrize("change", ["value", "shape", "name", "dtype", "step", "rng_key", "int64-high"])
def test_hash_oneThingDiffers_differentHash(change):
    ckpt, other = _doc_checkpoint(), _variant(change)
    assert other.hash() != ckpt.hash()
    parts, others = checkpoint_commitment(ckpt), checkpoint_commitment(other)
    differ = [i for i in range(4) if parts[i] != others[i]]  # step, rng_key, layout_hash, tensors_root
    # a name, a dtype or a shape leaves every word as it was: only the layout binds it
    assert differ == {"shape": [2], "name": [2], "dtype": [2], "step": [0], "rng_key": [1]}.get(change, [3])


def test_hash_nanPayloads_sameHash():
    """NaN payloads are not reproducible across devices: the hash ignores them (the bytes do not)."""
    a, b = _doc_checkpoint(), _doc_checkpoint()
    a.tensors["model.w"] = torch.tensor([0x7FC00000, 0x40000000], dtype=torch.int32).view(torch.float32)
    b.tensors["model.w"] = torch.tensor([0xFFC12345 - 2**32, 0x40000000], dtype=torch.int32).view(torch.float32)
    a.tensors["x.f64"] = torch.tensor([0x7FF8000000000000], dtype=torch.int64).view(torch.float64)
    b.tensors["x.f64"] = torch.tensor([0x7FF0000000000001], dtype=torch.int64).view(torch.float64)
    assert a.to_bytes() != b.to_bytes()
    assert a.hash() == b.hash()


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
    assert load_checkpoint(DOC_BYTES, _doc_checkpoint().hash()).step == 3
    assert load_checkpoint(DOC_BYTES, bytes.fromhex(DOC_HASH)).step == 3
    with pytest.raises(CheckpointError, match="hash"):
        load_checkpoint(DOC_BYTES, bytes(32))
