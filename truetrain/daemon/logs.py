"""Structured logs: one JSON object per line (or plain text), with the daemon's role and address."""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def __init__(self, static: dict):
        super().__init__()
        self.static = static

    def format(self, record: logging.LogRecord) -> str:
        entry = {"ts": round(record.created, 3), "level": record.levelname.lower(), **self.static,
                 "logger": record.name, "msg": record.getMessage()}
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    def __init__(self, static: dict):
        super().__init__()
        self.prefix = " ".join(f"{v}" for v in static.values())

    def format(self, record: logging.LogRecord) -> str:
        extra = {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}
        tail = "".join(f" {k}={v}" for k, v in extra.items())
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        line = f"{stamp} {record.levelname.lower():7} {self.prefix} {record.getMessage()}{tail}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def setup_logging(fmt: str, static: dict, log_file: Path | None = None, level: int = logging.INFO) -> None:
    """Send every truetrain, worker and verifier logger to stderr (and ``log_file``)."""
    formatter = JsonFormatter(static) if fmt == "json" else TextFormatter(static)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file is not None:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file))
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)
    root.setLevel(level)
    for noisy in ("urllib3", "web3", "ipfshttpclient", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
