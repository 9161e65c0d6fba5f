"""Text data for LM jobs: reading a file or folder, the demo corpus, shards cut at line
ends, the text shard encoding, and every bad input refused with one clear line."""

from __future__ import annotations

import pytest

from truetrain.errors import DatasetError
from truetrain.training.text import (TEXT_MAGIC, decode_text_shard, demo_corpus, encode_text_shard,
                                     read_text, split_text)

LINES = "".join(f"line {i}: naïve café — ünïcödé {i * i}\n" for i in range(400)).encode()


def test_readText_fileAndFolder_sortedConcatenation(tmp_path):
    (tmp_path / "b.txt").write_bytes(b"second\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_bytes("thïrd\n".encode())
    (tmp_path / "a.txt").write_bytes(b"first\n")
    assert read_text(tmp_path / "a.txt") == b"first\n"
    assert read_text(tmp_path) == "first\nsecond\nthïrd\n".encode()  # a.txt, b.txt, sub/a.txt


def _file(name: str, data: bytes):
    def make(folder):
        (folder / name).write_bytes(data)
        return folder / name
    return make


def _empty_folder(folder):
    (folder / "d").mkdir()
    return folder / "d"


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "missing.txt", "missing.txt: no such file or folder"),
    (_file("empty.txt", b""), "empty.txt: the text is empty"),
    (_file("bin.txt", b"ok\n\xff\xfe"), "bin.txt: not UTF-8 text (invalid byte at offset 3)"),
    (_empty_folder, "d: the folder holds no files"),
], ids=["missing", "empty", "not-utf8", "empty-folder"])
def test_readText_badInput_oneClearLine(tmp_path, make, message):
    path = make(tmp_path)
    with pytest.raises(DatasetError) as err:
        read_text(path)
    assert str(err.value).endswith(message) and "\n" not in str(err.value)


def test_readText_folderWithOneNonUtf8File_namesIt(tmp_path):
    (tmp_path / "good.txt").write_bytes(b"fine\n")
    (tmp_path / "zz.bin").write_bytes(b"\x80")
    with pytest.raises(DatasetError, match=r"zz\.bin: not UTF-8 text \(invalid byte at offset 0\)$"):
        read_text(tmp_path)


def test_splitText_contiguousShards_cutAtLineEnds_heldOutLast():
    shards, held = split_text(LINES, 3, seq_len=64, held_out=0.1)
    assert b"".join(shards) + held == LINES  # contiguous, nothing lost or repeated
    assert len(shards) == 3
    for piece in shards + [held]:
        assert piece.endswith(b"\n") and len(piece) >= 65
        piece.decode("utf-8")
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) < len(LINES) // 10  # about equal
    assert 0.07 * len(LINES) < len(held) < 0.14 * len(LINES)
    assert split_text(LINES, 3, seq_len=64, held_out=0.1) == (shards, held)  # deterministic


def test_splitText_noNewlines_cutsAtCharacterBoundaries():
    text = "é" * 3000  # two bytes each, no line ends
    shards, held = split_text(text.encode(), 4, seq_len=32)
    assert "".join(s.decode("utf-8") for s in shards) + held.decode("utf-8") == text


@pytest.mark.parametrize("args, message", [
    ((b"abc\n" * 10, 2, 64), "text of 40 bytes is too short: 2 shards and a held-out split need at least 65 bytes "
                             "each (sequence length 64 + 1)"),
    ((LINES, 0, 64), "num_shards must be at least 1, got 0"),
    ((LINES, 2, 0), "seq_len must be at least 1, got 0"),
    ((b"\xc3\x28" * 100, 1, 8), "text: not UTF-8 text (invalid byte at offset 0)"),
])
def test_splitText_badInput_refused(args, message):
    with pytest.raises(DatasetError) as err:
        split_text(*args)
    assert str(err.value) == message


def test_textShard_roundTrip_andRefusals():
    text = LINES[:LINES.index(b"\n", 500) + 1]
    blob = encode_text_shard(text)
    assert blob.startswith(TEXT_MAGIC) and decode_text_shard(blob) == text
    with pytest.raises(DatasetError, match="^not a text shard"):
        decode_text_shard(b"TTSHARD1" + LINES)
    with pytest.raises(DatasetError, match=r"^text shard: not UTF-8 text"):
        decode_text_shard(TEXT_MAGIC + b"\xff")


def test_demoCorpus_offline_utf8_deterministic_andSplits():
    corpus = demo_corpus(300_000)
    assert 299_000 < len(corpus) <= 300_000 and corpus.endswith(b"\n") and corpus == demo_corpus(300_000)
    corpus.decode("utf-8")
    assert b"def " in corpus and b"import " in corpus  # Python source
    shards, held = split_text(corpus, 3, seq_len=128)
    assert b"".join(shards) + held == corpus
