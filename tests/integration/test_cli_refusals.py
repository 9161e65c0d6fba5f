"""Bad input to the CLI against a real devnet (issue 30, items 3 and 4): every refusal is one
line with an exact message and exit code, and the refused account's nonce does not move.

Account 6 is the refused submitter throughout (as in test_cli_market); 2 is a worker whose
daemon is refused before it connects.
"""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner

from tests.integration.test_cli_market import net, refused  # noqa: F401 - `net` is a fixture
from truetrain.cli import main
from truetrain.market import jobs, terms_check


# ---------------------------------------------------------------- item 3: job terms
# Each term createJob refuses is one case of test_cli_market's table of refused terms.

def test_the_bounds_the_cli_checks_are_the_deployed_markets(net):
    market = net.client.contract("JobMarket", net.contracts["market"])
    deployed = [net.client.call(getattr(market.functions, name)()) for name in
                ("MIN_WINDOW_BLOCKS", "MAX_REVEAL_WINDOW_BLOCKS", "MIN_COLLATERAL", "MAX_COLLATERAL_PER_REWARD",
                 "MAX_CID_BYTES", "MAX_STAGES")]
    assert deployed == [jobs.MIN_WINDOW_BLOCKS, jobs.MAX_REVEAL_WINDOW_BLOCKS, jobs.MIN_COLLATERAL,
                        jobs.MAX_COLLATERAL_PER_REWARD, terms_check.MAX_CID_BYTES, terms_check.MAX_STAGES]


# ---------------------------------------------------------------- item 4: endpoints, keys, data, ids

@pytest.mark.parametrize("command", [["token", "balance", "--account", 6], ["job", "submit", "--account", 6],
                                     ["job", "status", 1], ["worker", "stake", 10, "--account", 6]])
def test_a_malformed_rpc_url_is_one_line_naming_the_flag(net, command):
    before = net.nonce(6)
    refused(net.cli(*command, "--rpc", "notaurl"),
            "error: --rpc 'notaurl' is not an http(s) JSON-RPC URL such as http://127.0.0.1:8545 (it does not start "
            "with http:// or https://)", code=2)
    refused(net.cli(*command, "--rpc", "http://"),
            "error: --rpc 'http://' is not an http(s) JSON-RPC URL such as http://127.0.0.1:8545 (Invalid URL "
            "'http://': No host supplied)", code=2)
    assert net.nonce(6) == before


def test_a_malformed_rpc_url_from_the_environment_names_the_variable(net):
    result = CliRunner(env={**net.env, "TRUETRAIN_RPC": "localhost:8545"}).invoke(main, ["job", "status", "1"])
    refused(result, "error: TRUETRAIN_RPC 'localhost:8545' is not an http(s) JSON-RPC URL such as "
                    "http://127.0.0.1:8545 (it does not start with http:// or https://)", code=2)


def test_a_malformed_ipfs_address_is_one_line_naming_the_flag(net):
    before = net.nonce(6)
    refused(net.cli("job", "submit", "--account", 6, "--ipfs", "/ip4/127.0.0.1"),
            "error: --ipfs '/ip4/127.0.0.1' is not an IPFS API multiaddr such as /ip4/127.0.0.1/tcp/5001 or "
            "/dns4/host/tcp/5001/https", code=2)
    assert net.nonce(6) == before


def test_worker_run_without_an_ipfs_node_says_so_in_one_line(net, tmp_path):
    before = net.nonce(2)
    result = net.cli("worker", "run", "--account", 2, "--rpc", net.rpc, "--deployments", net.deployments,
                     "--ipfs", "/ip4/127.0.0.1/tcp/1", "--state-dir", tmp_path, "--max-ticks", 1)
    refused(result, "error: no IPFS node answers at /ip4/127.0.0.1/tcp/1")
    assert net.nonce(2) == before


def test_keystore_problems_name_the_file_before_the_password(net, tmp_path, monkeypatch):
    text = tmp_path / "notes.json"
    text.write_text("not json\n")
    missing = tmp_path / "nonexistent.json"
    for env in ({}, {"TRUETRAIN_KEYSTORE_PASSWORD": "pw"}):
        runner = CliRunner(env={**net.env, **env})
        refused(runner.invoke(main, ["token", "balance", "--keystore", str(missing)]),
                f"error: --keystore {missing}: no such file", code=2)
        refused(runner.invoke(main, ["job", "submit", "--keystore", str(text)]),
                f"error: --keystore {text} is not a keystore file (an encrypted JSON key file)", code=2)
    from eth_account import Account

    keyfile = tmp_path / "key.json"
    keyfile.write_text(json.dumps(Account.encrypt("0x" + "11" * 32, "right", iterations=2)))
    result = CliRunner(env={**net.env, "TRUETRAIN_KEYSTORE_PASSWORD": "wrong"}).invoke(
        main, ["token", "balance", "--keystore", str(keyfile)])
    refused(result, f"error: --keystore {keyfile}: TRUETRAIN_KEYSTORE_PASSWORD is not its password", code=2)


def test_a_dataset_that_is_not_an_npz_or_too_small_says_what_it_lacks(net, tmp_path):
    import numpy as np

    text, tiny = tmp_path / "x.npz", tmp_path / "tiny.npz"
    text.write_text("1,2,3\n")
    np.savez(tiny, x=np.zeros((2, 3), np.float32), y=np.array([0, 1]))
    before = net.nonce(6)
    refused(net.cli("job", "submit", "--account", 6, "--dataset", text),
            f"error: {text} is not an .npz dataset (a NumPy archive made by numpy.savez with arrays x and y)")
    refused(net.cli("job", "submit", "--account", 6, "--dataset", tiny),
            "error: the dataset has 2 sample(s), too few to hold out 20% as a test set: give at least 3, or a test "
            "set of its own (x_test and y_test in the .npz)")
    assert net.nonce(6) == before


@pytest.mark.parametrize("command", [["status"], ["cancel", "--account", 6], ["results", "--out", "out"],
                                     ["sample", "--prompt", "x"], ["export", "--out", "out"]])
@pytest.mark.parametrize("job_id", ["-1", "-12", "0", "abc", "1.5", "1_0"])
def test_a_job_id_that_is_not_a_positive_integer_is_one_line(net, command, job_id):
    before = net.nonce(6)
    refused(net.cli("job", command[0], job_id, *command[1:]),
            f"Error: Invalid value for 'JOB_ID': a job id is a positive integer, got '{job_id}'", code=2)
    assert net.nonce(6) == before


# ---------------------------------------------------------------- issue 31: --init weights

def _gpt2_folder(path, **config):
    """A user's GPT-2 folder made by transformers itself (random weights, byte vocabulary)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    shape = dict(vocab_size=256, n_positions=32, n_embd=32, n_layer=1, n_head=2)
    GPT2LMHeadModel(GPT2Config(**{**shape, **config})).save_pretrained(path)
    return path


def test_init_weights_that_do_not_fit_are_refused_naming_the_first_before_anything_is_sent(net, tmp_path):
    import torch
    from safetensors.torch import save_file

    mlp = tmp_path / "mlp.safetensors"
    save_file({"fc.0.weight": torch.zeros(16, 64), "fc.0.bias": torch.zeros(16), "fc.1.weight": torch.zeros(10, 16),
               "fc.1.bias": torch.zeros(10)}, str(mlp))
    tanh = _gpt2_folder(tmp_path / "gpt2-tanh")  # transformers' default activation: gelu_new
    exact = _gpt2_folder(tmp_path / "gpt2-exact", activation_function="gelu")
    before = net.nonce(6)
    cases = [
        (["--hidden", 32, "--init", mlp], f"--init {mlp}: fc.0.weight has shape [16, 64], the job's model needs [32, 64]"),
        (["--init", tanh], f"--init {tanh}: config.json activation_function 'gelu_new': truetrain's LM uses the exact "
                           f"erf GELU ('gelu'), which this is not"),
        (["--init", exact, "--heads", 4], f"--init {exact}: config.json n_head 2: the job's model has 4 (--heads)"),
        (["--init", exact, "--model", "mlp"],
         f"--init {exact}: a GPT-2 language model, but the job trains a mlp (add --model lm)"),
        (["--init", exact / "model.safetensors", "--model", "lm", "--d-model", 32, "--layers", 2, "--heads", 2,
          "--seq-len", 32],
         f"--init {exact / 'model.safetensors'}: transformer.h.1.ln_1.weight is missing; the job's model needs it "
         f"with shape [32]"),
    ]
    for args, message in cases:
        refused(net.cli("job", "submit", "--account", 6, *args), f"error: {message}", code=2)
    assert net.nonce(6) == before


# ---------------------------------------------------------------- generated argv lists

#: Values no command may take, by what they are meant to be.
BAD_URLS = ["notaurl", "", " ", "http://", "http://:80", "http://[::1", "http://host:99999", "ftp://x", "localhost:8545",
            "http:// spaced", "https//x", "-1", "http://127.0.0.1:1"]
BAD_MULTIADDRS = ["", "/ip4/127.0.0.1", "/ip4/x/tcp/5001", "/ip4/127.0.0.1/tcp/notaport", "127.0.0.1:5001",
                  "http://127.0.0.1:5001", "/dns4//tcp/5001", "/ip4/127.0.0.1/udp/5001"]
BAD_WINDOWS = ["0", "-1", "4", "abc", "", "1e3", "4294967296", "2.5"]
WINDOW_FLAGS = ["--accept-window", "--compute-window", "--reveal-window", "--challenge-window"]
COMMANDS = [["token", "balance", "--account", "6"], ["job", "status", "1"], ["job", "list", "--account", "6"],
            ["job", "submit", "--account", "6"], ["worker", "stake", "10", "--account", "6"],
            ["identity", "show", "--account", "6"]]


def generated_argv(rng: random.Random, keystore_text: str) -> list[str]:
    """One command with at least one malformed value: a URL, a multiaddr, a keystore or a window."""
    command = list(rng.choice(COMMANDS))
    bad = rng.choice(["rpc", "ipfs", "keystore", "window"] if command[1] == "submit" else ["rpc", "ipfs", "keystore"])
    if bad == "rpc":
        command += ["--rpc", rng.choice(BAD_URLS)]
    elif bad == "ipfs":
        command += ["--ipfs", rng.choice(BAD_MULTIADDRS)]
    elif bad == "keystore":
        command = [a for a in command if a not in ("--account", "6")]
        command += ["--keystore", rng.choice(["/nonexistent.json", keystore_text, "/", ""])]
    else:
        for flag in rng.sample(WINDOW_FLAGS, rng.randint(1, 4)):
            command += [flag, rng.choice(BAD_WINDOWS)]
    if command[1] == "submit" and rng.random() < 0.5:  # a good window beside the bad value
        command += [rng.choice(WINDOW_FLAGS), str(rng.randint(5, 200))]
    return command


def test_generated_bad_argv_lists_give_one_line_and_send_nothing(net, tmp_path):
    """60 argv lists from a fixed seed: each exits non-zero with one line on stderr, no
    traceback, and account 6 sends nothing."""
    keystore_text = tmp_path / "keystore.json"
    keystore_text.write_text("password=hunter2\n")
    rng = random.Random(30)
    before = net.nonce(6)
    for _ in range(60):
        argv = generated_argv(rng, str(keystore_text))
        result = net.cli(*argv)
        assert result.exit_code in (1, 2), (argv, result.output, result.exception)
        assert "Traceback" not in result.output, (argv, result.output)
        assert len(result.stderr.strip().splitlines()) == 1, (argv, result.stderr)
    assert net.nonce(6) == before


# ---------------------------------------------------------------- issue 31: --data's record forms

def _records(tmp_path):
    """A bad input of each kind `job submit --data` refuses, written by the real packages."""
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    good = '{"text": "a line of text\\n", "id": 1}\n'
    files = {"docs.jsonl": good * 3, "absent.jsonl": good + '{"body": "x"}\n', "number.jsonl": good + '{"text": 7}\n',
             "broken.jsonl": good + good + '{"text": "a",}\n', "blank.jsonl": '{"text": ""}\n' * 2,
             "fake.parquet": "id,text\n1,hello\n", "plain/a.txt": "hello\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    pq.write_table(pa.table({"id": [1], "body": ["x"]}), tmp_path / "docs.parquet")
    part = datasets.Dataset.from_dict({"text": ["a line\n"]})
    datasets.DatasetDict({"train": part, "test": part}).save_to_disk(str(tmp_path / "splits"))
    return tmp_path


def test_bad_record_data_is_one_line_naming_the_line_row_or_column_and_sends_nothing(net, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    d = _records(tmp_path)
    cases = [
        (["--data", d / "docs.jsonl"], f"{d / 'docs.jsonl'}: give --text-field, the field that holds each record's "
                                       f"text (the first record's string fields: text)"),
        (["--data", d / "absent.jsonl", "--text-field", "text"],
         f"{d / 'absent.jsonl'}: line 2: the record has no field 'text' (its fields: body)"),
        (["--data", d / "number.jsonl", "--text-field", "text"],
         f"{d / 'number.jsonl'}: line 2: field 'text' is a number, not a string"),
        (["--data", d / "docs.jsonl", "--text-field", "id"], f"{d / 'docs.jsonl'}: line 1: field 'id' is a number, "
                                                             f"not a string"),
        (["--data", d / "broken.jsonl", "--text-field", "text"],
         f"{d / 'broken.jsonl'}: line 3: not JSON (Expecting property name enclosed in double quotes at column 14)"),
        (["--data", d / "blank.jsonl", "--text-field", "text"],
         f"{d / 'blank.jsonl'}: the text is empty (every record's 'text' is an empty string)"),
        (["--data", d / "docs.parquet", "--text-field", "text"],
         f"{d / 'docs.parquet'}: no column 'text' (its columns: id (int64), body (string))"),
        (["--data", d / "fake.parquet", "--text-field", "text"],
         f"{d / 'fake.parquet'}: not a Parquet file (Parquet magic bytes not found in footer. Either the file is "
         f"corrupted or this is not a parquet file.)"),
        (["--data", d / "plain", "--text-field", "text"],
         f"{d / 'plain'}: --text-field applies to a .jsonl file, a .parquet file or a folder saved by datasets' "
         f"save_to_disk; this folder has no state.json from Dataset.save_to_disk"),
        (["--data", d / "splits", "--text-field", "text"],
         f"{d / 'splits'}: a saved DatasetDict (splits: train, test): give one split's folder, such as "
         f"{d / 'splits' / 'train'}"),
        (["--text-field", "text"], "--text-field names the text field of --data's records: give --data"),
    ]
    before = net.nonce(6)
    for args, message in cases:
        refused(net.cli("job", "submit", "--account", 6, "--model", "lm", *args), f"error: {message}", code=2)
    assert net.nonce(6) == before
