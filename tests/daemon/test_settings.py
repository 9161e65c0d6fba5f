"""Daemon settings: flags over environment over file over defaults, refused when invalid."""

from __future__ import annotations

from pathlib import Path

import pytest

from truetrain.daemon.settings import load_settings
from truetrain.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "daemon.toml"
    path.write_text(text)
    return path


def test_load_settings_flagsBeatEnvironmentBeatFileBeatDefaults(tmp_path):
    config = write(tmp_path, '[worker]\naccount_index = 3\npoll_interval_s = 2.0\nmetrics_port = 9100\n'
                             'device = "cpu"\n[verifier]\nsample_rate = 0.5\n')
    env = {"TRUETRAIN_POLL_INTERVAL_S": "0.7", "TRUETRAIN_METRICS_PORT": "9200"}
    settings = load_settings("worker", {"metrics_port": 9300, "keeper": None}, config_file=config, environ=env,
                             defaults={"rpc_url": "http://127.0.0.1:9999"})
    assert settings.account_index == 3           # file
    assert settings.poll_interval_s == 0.7       # environment over file
    assert settings.metrics_port == 9300         # flag over environment
    assert settings.rpc_url == "http://127.0.0.1:9999"  # given default
    assert settings.keeper is False and settings.sample_rate == 0.0  # the verifier table is not read
    assert settings.stage_sample_rate == 1.0  # split jobs' stages draw no audits: replayed by default
    assert settings.device == "cpu"


def test_load_settings_booleanAndPathFromEnvironment(tmp_path):
    settings = load_settings("verifier", {"account_index": 5},
                             environ={"TRUETRAIN_KEEPER": "yes", "TRUETRAIN_STATE_DIR": str(tmp_path)})
    assert settings.keeper is True
    assert settings.state_path("0xABC") == tmp_path


def test_load_settings_gemmFuse_onByDefault_offFromEnvironment():
    assert load_settings("worker", {"account_index": 2}, environ={}).gemm_fuse is True
    assert load_settings("worker", {"account_index": 2}, environ={"TRUETRAIN_GEMM_FUSE": "no"}).gemm_fuse is False


def test_state_path_defaultsToOneFolderPerRoleAndAddress():
    settings = load_settings("worker", {"account_index": 2}, environ={})
    assert settings.state_path("0xAbC").name == "worker-0xabc"


@pytest.mark.parametrize("flags, message", [
    ({"account_index": 2, "poll_interval_s": 0}, "poll_interval_s must be > 0, got 0"),
    ({}, "give exactly one signing key: key, keystore or account_index"),
    ({"account_index": 2, "key": "0x01"}, "give exactly one signing key: key, keystore or account_index"),
    ({"account_index": 2, "rpc_url": "127.0.0.1:8545"}, "rpc_url must be an http(s) URL, got '127.0.0.1:8545'"),
    ({"account_index": 2, "device": "tpu"}, "device must be auto, cpu, cuda or cuda:N, got 'tpu'"),
    ({"account_index": 2, "sample_rate": 1.5}, "sample_rate must be in [0, 1], got 1.5"),
    ({"account_index": 2, "stage_sample_rate": -0.5}, "stage_sample_rate must be in [0, 1], got -0.5"),
    ({"account_index": 2, "metrics_port": 70000}, "metrics_port must be an integer in [0, 65535], got 70000"),
    ({"account_index": 2, "max_concurrent": 0}, "max_concurrent must be an integer in [1, 255], got 0"),
    ({"account_index": 2, "devices": 0}, "devices must be an integer in [1, 64], got 0"),
    ({"account_index": 2, "log_format": "xml"}, "log_format must be json or text, got 'xml'"),
    ({"account_index": 2, "gemm_route": "int4"}, "gemm_route must be auto, int8 or float64, got 'int4'"),
])
def test_load_settings_invalidValue_raisesConfigErrorNamingIt(flags, message):
    with pytest.raises(ConfigError) as err:
        load_settings("worker", flags, environ={})
    assert str(err.value) == message


def test_load_settings_unknownKeyInFile_isRefused(tmp_path):
    config = write(tmp_path, 'account_index = 2\npoll_interval = 1\n')
    with pytest.raises(ConfigError, match="unknown setting 'poll_interval'"):
        load_settings("worker", config_file=config, environ={})


def test_load_settings_wrongTypeInEnvironment_isRefused():
    with pytest.raises(ConfigError, match="environment variable TRUETRAIN_METRICS_PORT: metrics_port has the wrong type"):
        load_settings("worker", {"account_index": 2}, environ={"TRUETRAIN_METRICS_PORT": "ninety"})


def test_load_settings_unreadableFile_isRefused(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings("worker", config_file=write(tmp_path, "this is [not toml"), environ={})


def test_load_settings_unknownRole_isRefused():
    with pytest.raises(ConfigError, match="role must be one of worker, verifier"):
        load_settings("miner", {"account_index": 1}, environ={})
