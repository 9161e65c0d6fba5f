"""--data's record forms (issue 31, item 3): a .jsonl file, a .parquet file and a folder saved
by Hugging Face datasets, each written by the real package, give the same corpus, the same
shards and the same shard hashes as the same texts given as plain files (one file per record,
named in record order); every bad input is one line naming its file and line, row or column."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from truetrain.errors import DataFormatError, DatasetError
from truetrain.hashing import keccak256
from truetrain.training import text_sources
from truetrain.training.text import encode_text_shard, read_text, split_text
from truetrain.training.text_sources import data_form, read_corpus

# Records of every kind a corpus holds: several lines, none, non-ASCII, an empty text, and
# more than ten of them, so that file names must sort in record order (00002 before 00010).
TEXTS = [f"record {i}: naïve café — ünïcödé {'x' * (i % 7)}\n" * (1 + i % 3) for i in range(40)]
TEXTS[3] = "no newline at the end, é"
TEXTS[7] = ""
TEXTS[12] = "日本語のテキスト\n二行目\n"


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def plain_files(folder, texts=TEXTS):
    """The equivalent plain text: one file per record, named in record order."""
    folder.mkdir()
    for i, text in enumerate(texts):
        (folder / f"{i:05d}.txt").write_text(text, encoding="utf-8")
    return folder


def jsonl(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def parquet(path, columns, **options):
    import pyarrow.parquet as pq

    pq.write_table(pa.table(columns), path, **options)
    return path


def saved_dataset(path, columns, **options):
    import datasets

    datasets.Dataset.from_dict(columns).save_to_disk(str(path), **options)
    return path


def shard_hashes(corpus: bytes) -> list[bytes]:
    shards, held = split_text(corpus, 3, seq_len=32)
    return [keccak256(encode_text_shard(s)) for s in shards + [held]]


@pytest.fixture
def forms(tmp_path):
    """The same 40 texts in each form, with other fields beside the text."""
    ids = list(range(len(TEXTS)))
    return {
        "jsonl": jsonl(tmp_path / "records.jsonl", [{"id": i, "body": t, "lang": "fr"} for i, t in zip(ids, TEXTS)]),
        # several row groups, read in batches smaller than a group: order survives both
        "parquet": parquet(tmp_path / "records.parquet", {"id": ids, "body": TEXTS}, row_group_size=7),
        # two arrow files in the folder
        "datasets": saved_dataset(tmp_path / "saved", {"id": ids, "body": TEXTS}, num_shards=2),
    }


@pytest.mark.parametrize("form", ["jsonl", "parquet", "datasets"])
def test_readCorpus_recordForms_equalPlainFilesOnePerRecord_shardsAndHashes(tmp_path, forms, form, monkeypatch):
    monkeypatch.setattr(text_sources, "BATCH_ROWS", 5)
    plain = read_text(plain_files(tmp_path / "plain"))
    assert plain == "".join(TEXTS).encode()
    assert data_form(forms[form]) == form
    corpus = read_corpus(forms[form], "body")
    assert corpus == plain
    assert split_text(corpus, 3, seq_len=32) == split_text(plain, 3, seq_len=32)
    assert shard_hashes(corpus) == shard_hashes(plain)


def test_readCorpus_parquetStringKinds_largeAndDictionaryEncoded(tmp_path):
    texts = ["a\n", "bé\n", "a\n"]
    large = parquet(tmp_path / "large.parquet", {"t": pa.array(texts, pa.large_string())})
    coded = parquet(tmp_path / "coded.parquet", {"t": pa.array(texts).dictionary_encode()})
    assert read_corpus(large, "t") == read_corpus(coded, "t") == "a\nbé\na\n".encode()


def test_readCorpus_plainTextUnchanged_withoutTextField(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    assert data_form(text) == "text" and read_corpus(text) == b"hello\n"
    assert data_form(tmp_path) == "text" and read_corpus(tmp_path) == b"hello\n"


def _lines(*lines: bytes):
    def make(tmp):
        (tmp / "bad.jsonl").write_bytes(b"".join(lines))
        return tmp / "bad.jsonl"
    return make


GOOD = b'{"text": "fine\\n", "n": 1}\n'
BAD_JSONL = [
    (_lines(GOOD), None, "give --text-field, the field that holds each record's text (the first record's string "
                         "fields: text)"),
    (_lines(GOOD, b'{"body": "x"}\n'), "text", "line 2: the record has no field 'text' (its fields: body)"),
    (_lines(GOOD, b"\n", b'{"text": 7}\n'), "text", "line 3: field 'text' is a number, not a string"),
    (_lines(GOOD, b'{"text": null}\n'), "text", "line 2: field 'text' is null, not a string"),
    (_lines(GOOD, b'{"text": ["a"]}\n'), "text", "line 2: field 'text' is an array, not a string"),
    (_lines(GOOD, b'{"text": "a",}\n'), "text", "line 2: not JSON (Expecting property name enclosed in double "
                                                "quotes at column 14)"),
    (_lines(GOOD, GOOD, b'{"text": "cut'), "text", "line 3: not JSON (Unterminated string starting at column 10)"),
    (_lines(GOOD, b'["text"]\n'), "text", "line 2: a record is a JSON object, got an array"),
    (_lines(GOOD, b'{"text": "caf\xe9"}\n'), "text", "line 2: not UTF-8 text (invalid byte at column 14)"),
    (_lines(GOOD, b'{"text": "\\ud800"}\n'), "text", "line 2: the text holds '\\ud800', a lone surrogate: not UTF-8 "
                                                     "text"),
    (_lines(b"\n", b"  \n"), "text", "no records (a .jsonl file holds one JSON object a line)"),
    (_lines(b'{"text": ""}\n{"text": ""}\n'), "text", "the text is empty (every record's 'text' is an empty string)"),
]


@pytest.mark.parametrize("make, field, message", BAD_JSONL, ids=[
    "no-text-field", "field-absent", "number", "null", "array", "trailing-comma", "unterminated", "not-an-object",
    "not-utf8", "lone-surrogate", "no-records", "empty-text"])
def test_readCorpus_badJsonl_oneLineNamingTheLine(tmp_path, make, field, message):
    path = make(tmp_path)
    with pytest.raises(DataFormatError) as err:
        read_corpus(path, field)
    assert str(err.value) == f"{path}: {message}"
    assert err.value.exit_code == 2


def _parquet(columns):
    return lambda tmp: parquet(tmp / "bad.parquet", columns)


def _not_parquet(tmp):
    (tmp / "bad.parquet").write_text("id,text\n1,hello\n")
    return tmp / "bad.parquet"


def _saved(columns):
    return lambda tmp: saved_dataset(tmp / "saved", columns)


def _saved_dict(tmp):
    import datasets

    part = datasets.Dataset.from_dict({"text": ["a\n"]})
    datasets.DatasetDict({"train": part, "test": part}).save_to_disk(str(tmp / "saved"))
    return tmp / "saved"


def _broken_saved(tmp):
    path = saved_dataset(tmp / "saved", {"text": ["a\n"]})
    next(path.glob("*.arrow")).unlink()
    return path


def _plain_folder(tmp):
    (tmp / "texts").mkdir()
    (tmp / "texts" / "a.txt").write_text("hello\n")
    return tmp / "texts"


def _plain_file(tmp):
    (tmp / "a.txt").write_text("hello\n")
    return tmp / "a.txt"


BAD_TABLES = [
    (_parquet({"id": [1], "text": ["a"]}), None, "give --text-field, the field that holds each record's text (its "
                                                 "string columns: text)"),
    (_parquet({"id": [1], "text": ["a"]}), "body", "no column 'body' (its columns: id (int64), text (string))"),
    (_parquet({"id": [1], "text": ["a"]}), "id", "column 'id' holds int64, not strings"),
    (_parquet({"text": ["a", "b", None]}), "text", "row 2: column 'text' is null, not a string"),
    (_parquet({"text": [["a"]]}), "text", "column 'text' holds list<element: string>, not strings"),
    (_parquet({"text": pa.array([], "string")}), "text", "no rows"),
    (_not_parquet, "text", "not a Parquet file (Parquet magic bytes not found in footer. Either the file is corrupted "
                           "or this is not a parquet file.)"),
    (_saved({"n": [1, 2]}), None, "give --text-field, the field that holds each record's text (its string columns: "
                                  "none)"),
    (_saved({"text": ["a", "b"]}), "body", "no column 'body' (its columns: text (string))"),
    (_saved({"text": ["a", None]}), "text", "row 1: column 'text' is null, not a string"),
    (_saved({"text": ["a"], "n": [3]}), "n", "column 'n' holds int64, not strings"),
]


@pytest.mark.parametrize("make, field, message", BAD_TABLES, ids=[
    "parquet-no-text-field", "parquet-no-column", "parquet-int-column", "parquet-null", "parquet-list-column",
    "parquet-no-rows", "not-parquet", "saved-no-text-field", "saved-no-column", "saved-null", "saved-int-column"])
def test_readCorpus_badTable_oneLineNamingTheColumnOrRow(tmp_path, make, field, message):
    path = make(tmp_path)
    with pytest.raises(DataFormatError) as err:
        read_corpus(path, field)
    assert str(err.value) == f"{path}: {message}"


@pytest.mark.parametrize("make, message", [
    (_saved_dict, "a saved DatasetDict (splits: train, test): give one split's folder, such as {path}/train"),
    (_broken_saved, "cannot load it as a saved dataset (FileNotFoundError: "),
    (_plain_folder, "--text-field applies to a .jsonl file, a .parquet file or a folder saved by datasets' "
                    "save_to_disk; this folder has no state.json from Dataset.save_to_disk"),
    (_plain_file, "--text-field applies to a .jsonl file, a .parquet file or a folder saved by datasets' "
                  "save_to_disk; this is plain text"),
], ids=["dataset-dict", "missing-arrow-file", "plain-folder", "plain-file"])
def test_readCorpus_folderOrFileThatIsNotASavedDataset_refused(tmp_path, make, message):
    path = make(tmp_path)
    with pytest.raises(DataFormatError) as err:
        read_corpus(path, "text")
    assert str(err.value).startswith(f"{path}: " + message.format(path=path)) and "\n" not in str(err.value)


def test_readCorpus_dataFormatError_isADatasetError():
    assert issubclass(DataFormatError, DatasetError) and issubclass(DataFormatError, ValueError)
