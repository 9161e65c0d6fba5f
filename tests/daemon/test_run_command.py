"""`truetrain worker run` / `verifier run` refuse bad settings in one line, before connecting."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from truetrain.cli import main


@pytest.mark.parametrize("role", ["worker", "verifier"])
@pytest.mark.parametrize("args, code, message", [
    (["--account", "2", "--poll-interval", "0"], 2, "error: poll_interval_s must be > 0, got 0.0\n"),
    ([], 2, "error: give exactly one signing key: key, keystore or account_index\n"),
    (["--account", "2", "--rpc", "http://127.0.0.1:1"], 1,
     "error: no Ethereum JSON-RPC node answers at http://127.0.0.1:1\n"),
])
def test_run_badSettingsOrUnreachableNode_isOneLineAndExitCode(role, args, code, message, tmp_path):
    result = CliRunner().invoke(main, [role, "run", "--state-dir", str(tmp_path), *args])
    assert result.exit_code == code, result.output
    assert result.output == message
    assert "Traceback" not in result.output


def test_run_configFileWithUnknownKey_isRefused(tmp_path):
    config = tmp_path / "w.toml"
    config.write_text("[worker]\naccount_index = 2\npoll = 1\n")
    result = CliRunner().invoke(main, ["worker", "run", "--config", str(config)])
    assert result.exit_code == 2
    assert result.output == f"error: config file {config}: unknown setting 'poll'\n"


def test_workerRun_devicesOutOfRange_isRefusedByTheOption():
    result = CliRunner().invoke(main, ["worker", "run", "--account", "2", "--devices", "0"])
    assert result.exit_code == 2
    assert "Invalid value for '--devices': 0 is not in the range 1<=x<=64." in result.output
    assert "Traceback" not in result.output


def test_workerRun_devicesFromEnvironment_isTypedSetting():
    from truetrain.daemon.settings import load_settings

    assert load_settings("worker", {"account_index": 2}, environ={"TRUETRAIN_DEVICES": "4"}).devices == 4


def test_workerRun_moreCudaDevicesThanPresent_isOneLineBeforeConnecting(tmp_path):
    import torch

    have = torch.cuda.device_count()
    want = max(2, have + 1)
    result = CliRunner().invoke(main, ["worker", "run", "--state-dir", str(tmp_path), "--account", "2",
                                       "--device", "cuda", "--devices", str(want), "--rpc", "http://127.0.0.1:1"])
    assert result.exit_code == 2, result.output
    assert result.output == f"error: devices is {want} but this machine has {have} CUDA devices\n"
