"""The offline toolchain that `make setup` installs is the one the project runs on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FACADE = ROOT / ".solcx" / "solc-v0.8.28"


def test_solc_facade_answers_version_in_native_form():
    out = subprocess.run([str(FACADE), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "Version: 0.8.28+commit.7893614a.Linux.g++"


def test_solc_facade_compiles_standard_json_with_imports(tmp_path):
    (tmp_path / "lib.sol").write_text("pragma solidity ^0.8.0; library L { function one() internal pure returns (uint) { return 1; } }")
    source = 'pragma solidity ^0.8.0; import "lib.sol"; contract C { function f() external pure returns (uint) { return L.one(); } }'
    request = {
        "language": "Solidity",
        "sources": {"c.sol": {"content": source}},
        "settings": {"outputSelection": {"*": {"*": ["abi"]}}},
    }
    out = subprocess.run(
        [str(FACADE), "--standard-json", "--allow-paths", str(tmp_path)],
        input=json.dumps(request), capture_output=True, text=True, check=True, cwd=tmp_path,
    )
    result = json.loads(out.stdout)
    assert not [e for e in result.get("errors", []) if e["severity"] == "error"]
    assert result["contracts"]["c.sol"]["C"]["abi"][0]["name"] == "f"


def test_solc_facade_rejects_other_modes():
    out = subprocess.run([str(FACADE), "--bin", "x.sol"], capture_output=True, text=True)
    assert out.returncode == 1
    assert "only --version and --standard-json" in out.stderr


def test_node_in_venv_is_node_24():
    node = Path(sys.executable).parent / "node"
    out = subprocess.run([str(node), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("v24.")


def test_anvil_from_npm_is_on_path():
    out = subprocess.run(["anvil", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("anvil Version: 1.7.1")


def test_nothing_is_written_to_the_home_solcx_folder():
    assert os.environ["SOLCX_BINARY_PATH"] == str(ROOT / ".solcx")
