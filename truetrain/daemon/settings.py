"""One typed settings object per daemon, read from a TOML file, the environment and flags.

Precedence: flags over ``TRUETRAIN_<NAME>`` environment variables over the config file
(a ``[worker]`` or ``[verifier]`` table, or top-level keys) over the defaults. Everything is
validated in ``__post_init__`` before the daemon connects to anything, so a zero poll
interval, a missing key or an unreachable metrics port number is refused at start.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from truetrain.endpoints import rpc_url_problem
from truetrain.errors import ConfigError
from truetrain.paths import DEPLOYMENTS, HOME

ROLES = ("worker", "verifier")
DEVICES = ("auto", "cpu", "cuda")
LOG_FORMATS = ("json", "text")
#: "auto": the int8 kernel when its self-test passes; "int8": on every product, refuse to run
#: if the self-test fails; "float64": always the fallback. Every route gives the same bits.
GEMM_ROUTES = ("auto", "int8", "float64")
#: Most devices (ranks) one worker trains a task on.
MAX_DEVICES = 64


@dataclass(frozen=True)
class DaemonSettings:
    """Settings of one worker or verifier process.

    ``key``, ``keystore`` or ``account_index`` (a devnet account) names the signing key.
    ``stake_wei`` is the active stake the daemon tops up to at start (0: stake nothing).
    ``heartbeat_blocks``: a heartbeat is sent when the last one is this many blocks old.
    ``network_check_blocks``: a worker re-measures its network figures (RPC round-trip,
    fetch throughput) this often and declares them when due (truetrain.daemon.network).
    ``keeper``: also do the permissionless upkeep (draw tasks, time out late ones, finalize).
    ``sample_rate``: share of other workers' finished tasks a verifier replays.
    ``stage_sample_rate``: the same for the stage tasks of split jobs, which draw no audits
    (the contracts refuse an audit rate for them), so sampling is their only check: all of
    them by default, which makes a cheating stage lose whenever one honest verifier runs.
    ``devices``: a worker trains each repro task data-parallel on this many devices (CPU
    processes on gloo, or the first N GPUs on NCCL; truetrain.training.launch), declared in
    its hardware profile; the bits are those of one device.
    ``memory_mib``: declare at most this much memory (0: what the device has); a worker
    declines tasks whose model needs more.
    ``metrics_port`` 0 turns the Prometheus endpoint off.
    ``mailbox_host`` / ``mailbox_port``: where a worker serves the records its pipeline
    stages post (port 0: a free one), published in its profile (truetrain.daemon.mailbox);
    ``stage_wait_s``: how long a stage waits for a message from another stage.
    """

    role: str
    rpc_url: str = "http://127.0.0.1:8545"
    ipfs_api: str = "/ip4/127.0.0.1/tcp/5001"
    key: str | None = field(default=None, repr=False)
    keystore: Path | None = None
    account_index: int | None = None
    state_dir: Path | None = None
    deployments: Path = DEPLOYMENTS
    device: str = "auto"
    gemm_route: str = "auto"
    gemm_fuse: bool = True
    metrics_port: int = 0
    poll_interval_s: float = 0.5
    confirmations: int = 0
    stake_wei: int = 0
    heartbeat_blocks: int = 100
    network_check_blocks: int = 100
    keeper: bool = False
    sample_rate: float = 0.0
    stage_sample_rate: float = 1.0
    region: int = 0
    max_concurrent: int = 1
    devices: int = 1
    memory_mib: int = 0
    mailbox_host: str = "127.0.0.1"
    mailbox_port: int = 0
    stage_wait_s: float = 300.0
    log_format: str = "json"
    log_file: Path | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ConfigError(f"role must be one of {', '.join(ROLES)}, got {self.role!r}")
        if rpc_url_problem(self.rpc_url) is not None:
            raise ConfigError(f"rpc_url must be an http(s) URL, got {self.rpc_url!r}")
        if sum(x is not None for x in (self.key, self.keystore, self.account_index)) != 1:
            raise ConfigError("give exactly one signing key: key, keystore or account_index")
        if self.device not in DEVICES and not str(self.device).startswith("cuda:"):
            raise ConfigError(f"device must be auto, cpu, cuda or cuda:N, got {self.device!r}")
        if self.gemm_route not in GEMM_ROUTES:
            raise ConfigError(f"gemm_route must be auto, int8 or float64, got {self.gemm_route!r}")
        if self.log_format not in LOG_FORMATS:
            raise ConfigError(f"log_format must be json or text, got {self.log_format!r}")
        if not (isinstance(self.poll_interval_s, (int, float)) and 0 < self.poll_interval_s < math.inf):
            raise ConfigError(f"poll_interval_s must be > 0, got {self.poll_interval_s!r}")
        if not (isinstance(self.stage_wait_s, (int, float)) and 0 < self.stage_wait_s < math.inf):
            raise ConfigError(f"stage_wait_s must be > 0, got {self.stage_wait_s!r}")
        if not isinstance(self.mailbox_host, str) or not self.mailbox_host:
            raise ConfigError(f"mailbox_host must be a host name or address, got {self.mailbox_host!r}")
        for name in ("sample_rate", "stage_sample_rate"):
            rate = getattr(self, name)
            if isinstance(rate, bool) or not (isinstance(rate, (int, float)) and 0 <= rate <= 1):
                raise ConfigError(f"{name} must be in [0, 1], got {rate!r}")
        for name, low, high in (("metrics_port", 0, 65535), ("confirmations", 0, 64), ("heartbeat_blocks", 1, 10**9),
                                ("network_check_blocks", 1, 10**9),
                                ("stake_wei", 0, 2**128 - 1), ("region", 0, 65535), ("max_concurrent", 1, 255),
                                ("devices", 1, MAX_DEVICES),
                                ("memory_mib", 0, 2**31 - 1), ("mailbox_port", 0, 65535), ("account_index", 0, 19)):
            value = getattr(self, name)
            if name == "account_index" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigError(f"{name} must be an integer in [{low}, {high}], got {value!r}")

    def state_path(self, address: str) -> Path:
        """The folder holding this daemon's SQLite book and cursor (one per role and key)."""
        return Path(self.state_dir) if self.state_dir else HOME / ".state" / f"{self.role}-{address.lower()}"

    def torch_device(self) -> str:
        if self.device != "auto":
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"


_TYPES = {f.name: f.type for f in fields(DaemonSettings)}


def _coerce(name: str, value: Any, source: str) -> Any:
    """Turn a file or environment value into the field's type (flags come typed from click)."""
    kind = _TYPES[name]
    try:
        if "Path" in kind:
            return Path(value)
        if kind.startswith("bool"):
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if kind.startswith("int"):
            return int(value)
        if kind.startswith("float"):
            return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{source}: {name} has the wrong type: {value!r}") from None
    return str(value)


def load_settings(role: str, flags: Mapping[str, Any] | None = None, *, config_file: Path | None = None,
                  environ: Mapping[str, str] | None = None,
                  defaults: Mapping[str, Any] | None = None) -> DaemonSettings:
    """Merge ``defaults`` (e.g. the local devnet's addresses), ``config_file``, ``environ`` and
    ``flags`` (None values are unset), later ones winning."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = dict(defaults or {})
    if config_file is not None:
        try:
            raw = tomllib.loads(Path(config_file).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {config_file}: {exc}") from None
        table = raw.get(role, raw)
        for name, value in table.items():
            if isinstance(value, dict):
                continue  # another role's table
            if name not in _TYPES or name == "role":
                raise ConfigError(f"config file {config_file}: unknown setting {name!r}")
            values[name] = _coerce(name, value, f"config file {config_file}")
    for name in _TYPES:
        env = f"TRUETRAIN_{name.upper()}"
        if name != "role" and env in environ and environ[env] != "":
            values[name] = _coerce(name, environ[env], f"environment variable {env}")
    for name, value in (flags or {}).items():
        if value is not None:
            if name not in _TYPES:
                raise ConfigError(f"unknown setting {name!r}")
            values[name] = value
    return DaemonSettings(role=role, **values)


def with_overrides(settings: DaemonSettings, **changes) -> DaemonSettings:
    return replace(settings, **changes)
