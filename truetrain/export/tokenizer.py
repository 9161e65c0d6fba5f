"""The byte-level tokenizer written beside an exported LM: each byte of the text is its own id.

truetrain's LM reads raw bytes (ids 0-255), so text maps to ids as ``list(text.encode())``
and back as ``bytes(ids).decode("utf-8", errors="replace")``. The ``tokenizer.json`` here
says the same in the Hugging Face ``tokenizers`` format, so ``AutoTokenizer`` loads it:
GPT-2's byte-level pre-tokenizer (each byte shown as one printable character, without the
word-splitting regex) and a BPE model whose vocabulary is those 256 characters, id = byte,
with no merges and no special tokens.
"""

from __future__ import annotations

import json
from pathlib import Path


def byte_characters() -> list[str]:
    """GPT-2's byte-to-character table: the character standing for each byte 0-255."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def tokenizer_json() -> dict:
    """tokenizer.json (the ``tokenizers`` library's serialisation) of the byte tokenizer."""
    chars = byte_characters()
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                              "use_regex": False},
            "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": {c: i for i, c in enumerate(chars)}, "merges": []}}


def write_tokenizer(folder: Path, max_length: int) -> list[Path]:
    """tokenizer.json and tokenizer_config.json in ``folder``; returns their paths."""
    files = [folder / "tokenizer.json", folder / "tokenizer_config.json"]
    files[0].write_text(json.dumps(tokenizer_json(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    files[1].write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": max_length,
                                    "clean_up_tokenization_spaces": False}, indent=2) + "\n")
    return files
