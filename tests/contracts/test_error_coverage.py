"""Every custom error in the compiled ABIs of contracts/ is expected by name in some test.

A test names an error when it passes ``"<Name>: ..."`` (or just ``"<Name>"``) to
``brownie.reverts``; errors that no transaction can reach after deployment are listed with
the reason in ``tests/contracts/error_coverage.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.contracts.error_coverage import UNREACHABLE_ERRORS

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "contracts"


def _project_errors() -> dict[str, set[str]]:
    errors: dict[str, set[str]] = {}
    for path in BUILD.glob("*.json"):
        artifact = json.loads(path.read_text())
        if not artifact.get("sourcePath", "").startswith("contracts/") or artifact.get("type") != "contract":
            continue
        for item in artifact["abi"]:
            if item.get("type") == "error":
                errors.setdefault(item["name"], set()).add(artifact["contractName"])
    return errors


def _named_in_tests() -> set[str]:
    text = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py") if p.name != Path(__file__).name)
    return set(re.findall(r"""reverts\(\s*f?["']([A-Z][A-Za-z0-9_]*)(?=[:"'])""", text))


def test_build_has_contract_errors(TrainToken):  # the fixture makes brownie compile first
    assert "TokenNotDevnet" in _project_errors()


def test_every_custom_error_is_expected_by_some_test(TrainToken):
    missing = {
        name: sorted(contracts)
        for name, contracts in _project_errors().items()
        if name not in _named_in_tests() and name not in UNREACHABLE_ERRORS
    }
    assert missing == {}, f"custom errors no test expects: {missing}"


def test_unreachable_list_names_only_real_errors(TrainToken):
    assert set(UNREACHABLE_ERRORS) <= set(_project_errors())
    assert all(reason.strip() for reason in UNREACHABLE_ERRORS.values())
