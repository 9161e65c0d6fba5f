"""A language-model job's text from the forms people keep it in.

``--data`` takes plain UTF-8 text (a file, or a folder of files: :func:`.text.read_text`), or
records that each hold one document in a field named by ``--text-field``:

- a ``.jsonl`` file: JSON Lines, one JSON object a line (blank lines are skipped);
- a ``.parquet`` file: a column of strings, read with pyarrow;
- a folder written by Hugging Face ``datasets``' ``Dataset.save_to_disk``, read with
  ``datasets.load_from_disk`` (local files only: no Hub, works offline).

A record's text is one document, as one file of a folder is. The corpus is the documents'
UTF-8 bytes joined in record order with nothing put between them, which is what
:func:`.text.read_text` makes of a folder holding one plain file per record, named so that
the names sort in record order (``00000.txt``, ``00001.txt``, ...): the same bytes, so the
same deterministic shards, the same hashes and the same CIDs. A text that should stay on
lines of its own ends with a newline, as a file's would.

Every refusal is one line naming the file and the line (JSON Lines, counted from 1 as
editors do) or the row (tables, counted from 0 as ``dataset[i]`` and pandas do).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import DataFormatError, DatasetError
from .text import read_text

#: What a saved ``Dataset`` folder and a saved ``DatasetDict`` folder hold at their top.
DATASET_STATE, DATASET_DICT = "state.json", "dataset_dict.json"
#: Rows read at a time from a Parquet file or a saved dataset.
BATCH_ROWS = 8192


def data_form(path: str | Path) -> str:
    """``"jsonl"``, ``"parquet"``, ``"datasets"`` (a saved ``Dataset`` folder),
    ``"datasets-dict"`` (a saved ``DatasetDict`` folder) or ``"text"`` (anything else)."""
    path = Path(path)
    if path.is_dir():
        if (path / DATASET_STATE).is_file():
            return "datasets"
        return "datasets-dict" if (path / DATASET_DICT).is_file() else "text"
    return {".jsonl": "jsonl", ".parquet": "parquet"}.get(path.suffix.lower(), "text")


def read_corpus(path: str | Path, text_field: str | None = None) -> bytes:
    """The UTF-8 bytes of ``--data``: plain text as :func:`.text.read_text` reads it, or
    each record's ``text_field`` joined in record order (see the module's docstring)."""
    path = Path(path)
    form = data_form(path)
    if form == "text":
        if text_field is not None:
            why = "this folder has no state.json from Dataset.save_to_disk" if path.is_dir() else "this is plain text"
            raise DataFormatError(f"{path}: --text-field applies to a .jsonl file, a .parquet file or a folder "
                                  f"saved by datasets' save_to_disk; {why}")
        return read_text(path)
    if form == "datasets-dict":
        splits = _dict_splits(path)
        raise DataFormatError(f"{path}: a saved DatasetDict (splits: {', '.join(splits) or 'none'}): give one "
                              f"split's folder, such as {path / (splits[0] if splits else 'train')}")
    read = {"jsonl": jsonl_documents, "parquet": parquet_documents, "datasets": saved_dataset_documents}[form]
    corpus = b"".join(read(path, text_field))
    if not corpus:
        raise DataFormatError(f"{path}: the text is empty (every record's {text_field!r} is an empty string)")
    return corpus


def _need_field(path: Path, text_field: str | None, fields: str) -> str:
    if text_field is None:
        raise DataFormatError(f"{path}: give --text-field, the field that holds each record's text ({fields})")
    return text_field


def _encoded(text: str, where: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate, as JSON's "\ud800" escape makes
        raise DataFormatError(f"{where}: the text holds {text[exc.start]!r}, a lone surrogate: not UTF-8 "
                              f"text") from None


# --------------------------------------------------------------------------- JSON Lines

JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
              float: "a number", type(None): "null"}


def _jsonl_records(path: Path):
    """(line number, record) of every non-blank line, checked to be a JSON object."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataFormatError(f"{path}: line {number}: not UTF-8 text (invalid byte at column {exc.start + 1})") \
                from None
        if number == 1:
            line = line.removeprefix("\ufeff")  # a byte-order mark some editors write
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            # json's messages read "Expecting ',' delimiter" or "Unterminated string starting at"
            at = "" if exc.msg.endswith(" at") else " at"
            raise DataFormatError(f"{path}: line {number}: not JSON ({exc.msg}{at} column {exc.colno})") from None
        if not isinstance(record, dict):
            raise DataFormatError(f"{path}: line {number}: a record is a JSON object, got "
                                  f"{JSON_TYPES.get(type(record), type(record).__name__)}")
        yield number, record


def jsonl_documents(path: str | Path, text_field: str | None) -> list[bytes]:
    """Each record's ``text_field`` (a string) as UTF-8, in line order."""
    path = Path(path)
    records = _jsonl_records(path)
    first = next(records, None)
    if first is None:
        raise DataFormatError(f"{path}: no records (a .jsonl file holds one JSON object a line)")
    strings = [k for k, v in first[1].items() if isinstance(v, str)]
    field = _need_field(path, text_field, f"the first record's string fields: {', '.join(strings) or 'none'}")
    documents = []
    for number, record in (first, *records):
        if field not in record:
            raise DataFormatError(f"{path}: line {number}: the record has no field {field!r} "
                                  f"(its fields: {', '.join(record) or 'none'})")
        value = record[field]
        if not isinstance(value, str):
            raise DataFormatError(f"{path}: line {number}: field {field!r} is "
                                  f"{JSON_TYPES.get(type(value), type(value).__name__)}, not a string")
        documents.append(_encoded(value, f"{path}: line {number}"))
    return documents


# --------------------------------------------------------------------------- Arrow tables

def _is_text(arrow_type) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) or pa.types.is_string_view(arrow_type)


def _text_column(path: Path, schema, text_field: str | None) -> str:
    """``text_field``, checked to be a column of strings in ``schema`` (an Arrow schema)."""
    strings = [f.name for f in schema if _is_text(f.type)]
    field = _need_field(path, text_field, f"its string columns: {', '.join(strings) or 'none'}")
    if field not in schema.names:
        columns = ", ".join(f"{f.name} ({f.type})" for f in schema)
        raise DataFormatError(f"{path}: no column {field!r} (its columns: {columns or 'none'})")
    kind = schema.field(field).type
    if not _is_text(kind):
        raise DataFormatError(f"{path}: column {field!r} holds {kind}, not strings")
    return field


def _column_documents(path: Path, field: str, batches) -> list[bytes]:
    """The strings of column ``field`` over Arrow record batches, refusing a null by its row."""
    documents: list[bytes] = []
    for batch in batches:
        for value in batch.column(field).to_pylist():
            where = f"{path}: row {len(documents)}"
            if value is None:
                raise DataFormatError(f"{where}: column {field!r} is null, not a string")
            documents.append(_encoded(value, where))
    if not documents:
        raise DataFormatError(f"{path}: no rows")
    return documents


def parquet_documents(path: str | Path, text_field: str | None) -> list[bytes]:
    """Column ``text_field`` of a Parquet file (strings, no nulls) as UTF-8, in row order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    try:
        table = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataFormatError(f"{path}: not a Parquet file ({message})") from None
    with table:
        field = _text_column(path, table.schema_arrow, text_field)
        return _column_documents(path, field, table.iter_batches(batch_size=BATCH_ROWS, columns=[field]))


# --------------------------------------------------------------------------- saved datasets

def _dict_splits(path: Path) -> list[str]:
    try:
        splits = json.loads((path / DATASET_DICT).read_text()).get("splits", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [s for s in splits if isinstance(s, str)]


def saved_dataset_documents(path: str | Path, text_field: str | None) -> list[bytes]:
    """Column ``text_field`` of a folder saved by ``Dataset.save_to_disk`` as UTF-8, in row
    order (the dataset's own order, as ``dataset[i]`` gives it)."""
    import datasets

    path = Path(path)
    try:
        dataset = datasets.load_from_disk(str(path))
    # A folder that merely looks saved fails in several ways inside datasets and pyarrow
    # (missing or corrupt files, state that does not parse): each becomes one line.
    except Exception as exc:  # noqa: BLE001 - reported, never swallowed
        message = str(exc).splitlines()[0] if str(exc) else ""
        raise DataFormatError(f"{path}: cannot load it as a saved dataset ({type(exc).__name__}: {message})") from None
    if not isinstance(dataset, datasets.Dataset):
        raise DataFormatError(f"{path}: not a saved Dataset (load_from_disk gave a {type(dataset).__name__})")
    field = _text_column(path, dataset.data.schema, text_field)
    rows = dataset.select_columns([field]).with_format("arrow")
    return _column_documents(path, field, rows.iter(batch_size=BATCH_ROWS))
