"""StorageSettings refuses bad values at construction; the retry policy's waits are bounded."""

from __future__ import annotations

import pytest

from truetrain.errors import ConfigError
from truetrain.storage import StorageSettings
from truetrain.retry import RetryPolicy


def test_defaults_point_at_a_local_kubo():
    settings = StorageSettings()
    assert settings.api_addr == "/ip4/127.0.0.1/tcp/5001" and settings.timeout_s > 0


@pytest.mark.parametrize("addr", ["http://127.0.0.1:5001", "/ip4/127.0.0.1", "/ip4/127.0.0.1/udp/5001", "", "garbage"])
def test_bad_api_addr_is_a_config_error(addr):
    with pytest.raises(ConfigError, match="IPFS API address"):
        StorageSettings(api_addr=addr)


@pytest.mark.parametrize("addr", ["/ip4/10.0.0.2/tcp/5001", "/dns4/ipfs.example/tcp/443/https", "/ip6/::1/tcp/5001/http"])
def test_kubo_api_multiaddrs_are_accepted(addr):
    assert StorageSettings(api_addr=addr).api_addr == addr


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("timeout_s", 0, "timeout_s must be > 0"),
        ("timeout_s", float("inf"), "timeout_s must be > 0 and finite"),
        ("timeout_s", "5", "must be a number"),
        ("retries", -1, "retries must be an integer >= 0"),
        ("retries", 1.5, "retries must be an integer >= 0"),
        ("backoff_s", -0.1, "0 <= backoff_s <= backoff_max_s"),
        ("cid_version", 2, "cid_version must be 0 or 1"),
    ],
)
def test_bad_numbers_are_config_errors(field, value, message):
    with pytest.raises(ConfigError, match=message):
        StorageSettings(**{field: value})


def test_from_env_reads_variables_and_overrides_win():
    env = {"TRUETRAIN_IPFS_API": "/ip4/127.0.0.1/tcp/15001", "TRUETRAIN_IPFS_TIMEOUT_S": "2.5", "TRUETRAIN_IPFS_RETRIES": "7"}
    settings = StorageSettings.from_env(env, retries=1)
    assert (settings.api_addr, settings.timeout_s, settings.retries) == ("/ip4/127.0.0.1/tcp/15001", 2.5, 1)


def test_from_env_refuses_unparsable_values():
    with pytest.raises(ConfigError, match="TRUETRAIN_IPFS_TIMEOUT_S='soon' is not a valid float"):
        StorageSettings.from_env({"TRUETRAIN_IPFS_TIMEOUT_S": "soon"})


def test_backoff_grows_exponentially_with_jitter_and_is_capped():
    policy = RetryPolicy(retries=10, base_s=0.1, max_s=1.0)
    assert [policy.delay(n, rng=lambda: 0.0) for n in (1, 2, 3)] == [0.05, 0.1, 0.2]
    assert [policy.delay(n, rng=lambda: 1.0) for n in (1, 2, 3)] == [0.1, 0.2, 0.4]
    assert policy.delay(20, rng=lambda: 1.0) == 1.0
