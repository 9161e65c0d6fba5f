"""Where the project's files are, for a checkout installed with ``pip install -e .``."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

#: The repository root (holds contracts/, build/, deployments/, node_modules/).
ROOT = Path(os.environ.get("TRUETRAIN_ROOT", Path(__file__).resolve().parents[1]))
BUILD_CONTRACTS = ROOT / "build" / "contracts"
#: Where runtime state lives: the devnet (.devnet/), deployment files and daemon books
#: (.state/). The checkout by default; TRUETRAIN_HOME moves it (tests, a second devnet).
HOME = Path(os.environ.get("TRUETRAIN_HOME", ROOT))
DEPLOYMENTS = HOME / "deployments"


def project_binary(name: str) -> str:
    """Return the path of a tool the project installs (venv first, then node_modules, then PATH)."""
    for folder in (Path(sys.executable).parent, ROOT / "node_modules" / ".bin"):
        candidate = folder / name
        if candidate.exists():
            return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found: run `make setup`")
    return found
