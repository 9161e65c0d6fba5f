#!/usr/bin/env python3
"""Static analysis of contracts/ with slither, offline; fails on untriaged High/Medium findings.

Run it with the audit virtualenv (``make audit`` sets it up and runs it)::

    .venv-audit/bin/python scripts/audit.py [--json FILE] [--triage FILE] [--solc FACADE]

slither's CLI wants a native solc, which cannot be installed here. Its Python API takes a
crytic-compile "solc standard-json" platform instead: this script builds the standard-JSON
input for every .sol file under contracts/ (contracts/test/, the brownie harnesses, left out),
with the same settings as brownie-config.yaml and foundry.toml (0.8.28, optimizer 200 runs,
cancun, the OpenZeppelin remapping), and crytic-compile runs it through the project's solc
facade (.solcx/solc-v0.8.28, the WebAssembly compiler from npm).

Every slither detector runs. A finding is reported when its primary location is in
contracts/ (not in node_modules, not in contracts/test/). Inline ``slither-disable``
comments are ignored on purpose: the triage file is the one place a finding is judged.

The triage file (docs/security/slither-triage.md) holds one markdown table whose first four
columns are ``detector | location | verdict | reason``. A row matches a finding when its
detector equals the finding's detector (slither's ARGUMENT, e.g. ``reentrancy-no-eth``) and
its location equals the finding's location key (``Contract.function``, ``Contract.variable``
or ``Contract``, as this script prints it; ``*`` wildcards allowed, fnmatch style).
Verdicts: ``false-positive`` and ``accepted`` (by design, with the reason) pass; ``fix``
(a real problem) fails the audit until the code is fixed and the row removed.

Exit status: 0 when every High and Medium finding has a passing verdict; 1 when any has no
row or a ``fix`` verdict; 2 when compilation or the triage file is broken.
"""

from __future__ import annotations

import argparse
import fnmatch
import inspect
import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "contracts"
EXCLUDED_DIRS = ("contracts/test/",)
FACADE = ROOT / ".solcx" / "solc-v0.8.28"
TRIAGE = ROOT / "docs" / "security" / "slither-triage.md"
REMAPPINGS = ["@openzeppelin/=node_modules/@openzeppelin/"]
IMPACT_ORDER = {"High": 0, "Medium": 1, "Low": 2, "Informational": 3, "Optimization": 4}
CONFIDENCE_ORDER = {"High": 0, "Medium": 1, "Low": 2}
GATED_IMPACTS = ("High", "Medium")
PASSING_VERDICTS = ("false-positive", "accepted")
VERDICTS = PASSING_VERDICTS + ("fix",)


@dataclass(frozen=True)
class Finding:
    impact: str
    confidence: str
    detector: str
    location: str  # Contract.function | Contract.variable | Contract
    source: str  # contracts/X.sol#L10-L12
    description: str


@dataclass(frozen=True)
class TriageRow:
    detector: str
    location: str
    verdict: str
    reason: str
    line: int

    def matches(self, finding: Finding) -> bool:
        return self.detector == finding.detector and fnmatch.fnmatchcase(finding.location, self.location)


# ---------------------------------------------------------------- compile + analyse


def contract_files() -> list[str]:
    """Every .sol file under contracts/, repo-relative, harnesses left out."""
    files = []
    for path in sorted(SOURCES.rglob("*.sol")):
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith(EXCLUDED_DIRS):
            files.append(rel)
    return files


def standard_json_input(files: list[str]) -> dict:
    """The solc standard-JSON input (sources inline; imports resolved by the facade from ROOT)."""
    return {
        "language": "Solidity",
        "sources": {rel: {"content": (ROOT / rel).read_text(encoding="utf-8")} for rel in files},
        "settings": {
            "remappings": list(REMAPPINGS),
            "optimizer": {"enabled": True, "runs": 200},
            "evmVersion": "cancun",
            "outputSelection": {
                "*": {
                    "*": ["abi", "metadata", "devdoc", "userdoc", "evm.bytecode", "evm.deployedBytecode"],
                    "": ["ast"],
                }
            },
        },
    }


def run_slither(solc: Path):
    """Compile through the facade and run every detector; returns (slither, raw results)."""
    from crytic_compile import CryticCompile
    from crytic_compile.platform.solc_standard_json import SolcStandardJson
    from slither import Slither
    from slither.detectors import all_detectors
    from slither.detectors.abstract_detector import AbstractDetector

    platform = SolcStandardJson(standard_json_input(contract_files()))
    compilation = CryticCompile(platform, solc=str(solc), solc_working_dir=str(ROOT))
    # show_ignored_findings: inline `slither-disable` comments do not hide anything.
    slither = Slither(compilation, show_ignored_findings=True)
    detectors = [
        cls
        for _, cls in inspect.getmembers(all_detectors, inspect.isclass)
        if issubclass(cls, AbstractDetector) and cls is not AbstractDetector
    ]
    for cls in detectors:
        slither.register_detector(cls)
    results = [r for per_detector in slither.run_detectors() for r in per_detector if r]
    return len(detectors), results


def _location(element: dict) -> str:
    """`Contract.member` (or `Contract`) of a slither result element."""
    kind = element.get("type")
    name = element.get("name", "?")
    parent = element.get("type_specific_fields", {}).get("parent", {})
    if kind == "contract":
        return name
    if kind == "node":
        # parent: the function (or modifier); its parent: the contract
        function = parent
        contract = function.get("type_specific_fields", {}).get("parent", {})
        if contract.get("type") == "contract":
            return f"{contract.get('name')}.{_short_signature(function.get('name', '?'))}"
        return _short_signature(function.get("name", name))
    if parent.get("type") == "contract":
        return f"{parent.get('name')}.{_short_signature(name)}"
    if parent.get("type") in ("function", "modifier"):  # a local variable
        grand = parent.get("type_specific_fields", {}).get("parent", {})
        return f"{grand.get('name', '?')}.{_short_signature(parent.get('name', '?'))}"
    return _short_signature(name)


def _short_signature(name: str) -> str:
    """`slash(address,uint256,...)` -> `slash` (the triage key ignores parameter lists)."""
    return name.split("(", 1)[0]


def _source(element: dict) -> str:
    mapping = element.get("source_mapping", {})
    lines = mapping.get("lines") or []
    where = mapping.get("filename_relative", "?")
    if lines:
        where += f"#L{lines[0]}" + (f"-L{lines[-1]}" if len(lines) > 1 else "")
    return where


def _in_scope(element: dict) -> bool:
    rel = element.get("source_mapping", {}).get("filename_relative", "")
    rel = rel.replace("\\", "/")
    return rel.startswith("contracts/") and not rel.startswith(EXCLUDED_DIRS)


def to_findings(results: list[dict]) -> list[Finding]:
    findings = set()
    for r in results:
        elements = [e for e in r.get("elements", []) if e.get("source_mapping")]
        if not elements or not _in_scope(elements[0]):
            continue  # primary location in a dependency or a harness
        findings.add(
            Finding(
                impact=r["impact"],
                confidence=r["confidence"],
                detector=r["check"],
                location=_location(elements[0]),
                source=_source(elements[0]),
                description=" ".join(r["description"].split()),
            )
        )
    return sorted(
        findings,
        key=lambda f: (IMPACT_ORDER.get(f.impact, 9), CONFIDENCE_ORDER.get(f.confidence, 9), f.detector, f.location, f.source),
    )


# ---------------------------------------------------------------- triage file


def read_triage(path: Path) -> list[TriageRow]:
    """Rows of the markdown table `detector | location | verdict | reason` in `path`."""
    rows: list[TriageRow] = []
    if not path.exists():
        return rows
    in_table = False
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line.startswith("|"):
            in_table = False
            continue
        cells = [c.strip().strip("`").strip() for c in line.strip("|").split("|")]
        if [c.lower() for c in cells[:4]] == ["detector", "location", "verdict", "reason"]:
            in_table = True
            continue
        if not in_table or set("".join(cells)) <= set("-: "):
            continue  # not our table, or its separator row
        if len(cells) < 4:
            raise ValueError(f"{path}:{number}: a triage row needs 4 cells: {raw}")
        detector, location, verdict, reason = cells[0], cells[1], cells[2].lower(), " | ".join(cells[3:])
        if verdict not in VERDICTS:
            raise ValueError(f"{path}:{number}: verdict {verdict!r} is not one of {', '.join(VERDICTS)}")
        if not reason:
            raise ValueError(f"{path}:{number}: a verdict needs a reason")
        rows.append(TriageRow(detector, location, verdict, reason, number))
    return rows


# ---------------------------------------------------------------- report


def print_table(findings: list[Finding], verdicts: dict[Finding, str]) -> None:
    """One line per (impact, confidence, detector, location, source); `n` counts the findings
    slither reported there (e.g. one per external call in a loop)."""
    headers = ("impact", "confidence", "detector", "location", "source", "n", "verdict")
    grouped: dict[tuple, int] = {}
    for f in findings:
        key = (f.impact, f.confidence, f.detector, f.location, f.source, verdicts[f])
        grouped[key] = grouped.get(key, 0) + 1
    table = [(*key[:5], str(n), key[5]) for key, n in grouped.items()]
    widths = [max([len(h)] + [len(row[i]) for row in table]) for i, h in enumerate(headers)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths).rstrip()
    print(fmt.format(*headers).rstrip())
    print(fmt.format(*("-" * w for w in widths)).rstrip())
    for row in table:
        print(fmt.format(*row).rstrip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--solc", type=Path, default=FACADE, help="solc binary or facade (default: %(default)s)")
    parser.add_argument("--triage", type=Path, default=TRIAGE, help="triage file (default: %(default)s)")
    parser.add_argument("--json", type=Path, help="also write the findings as JSON here")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every finding's description")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("CryticCompile").setLevel(logging.ERROR)
    if not args.solc.exists():
        print(f"audit: no solc at {args.solc} (run `make setup`)", file=sys.stderr)
        return 2
    try:
        rows = read_triage(args.triage)
    except ValueError as error:
        print(f"audit: {error}", file=sys.stderr)
        return 2

    started = time.monotonic()
    try:
        detector_count, results = run_slither(args.solc)
    except Exception as error:  # crytic-compile's InvalidCompilation and slither's parse errors
        print(f"audit: compilation or analysis failed: {error}", file=sys.stderr)
        return 2
    findings = to_findings(results)
    elapsed = time.monotonic() - started

    verdicts: dict[Finding, str] = {}
    used: set[TriageRow] = set()
    for finding in findings:
        row = next((r for r in rows if r.matches(finding)), None)
        if row is not None:
            used.add(row)
        verdicts[finding] = row.verdict if row else ("UNTRIAGED" if finding.impact in GATED_IMPACTS else "-")

    print(f"slither: {detector_count} detectors over {len(contract_files())} files in contracts/ "
          f"(contracts/test/ excluded), {len(findings)} findings, {elapsed:.1f} s\n")
    print_table(findings, verdicts)
    if args.verbose:
        print()
        for f in findings:
            print(f"[{f.impact}/{f.confidence}] {f.detector} {f.location}: {f.description}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([f.__dict__ | {"verdict": verdicts[f]} for f in findings], indent=2))

    counts = {impact: sum(f.impact == impact for f in findings) for impact in IMPACT_ORDER}
    print("\n" + ", ".join(f"{n} {impact}" for impact, n in counts.items()))
    for row in rows:
        if row not in used:
            print(f"note: triage row at {args.triage.name}:{row.line} ({row.detector} {row.location}) "
                  "matches no finding now; remove it if the code changed")

    gated = [f for f in findings if f.impact in GATED_IMPACTS]
    untriaged = [f for f in gated if verdicts[f] == "UNTRIAGED"]
    to_fix = [f for f in gated if verdicts[f] == "fix"]
    for f in untriaged:
        print(f"FAIL untriaged {f.impact}: {f.detector} {f.location} ({f.source}): {f.description}")
    for f in to_fix:
        print(f"FAIL marked fix {f.impact}: {f.detector} {f.location} ({f.source})")
    if untriaged or to_fix:
        print(f"\naudit: {len(untriaged)} untriaged and {len(to_fix)} to-fix High/Medium findings "
              f"(triage: {args.triage.relative_to(ROOT) if args.triage.is_relative_to(ROOT) else args.triage})")
        return 1
    print(f"\naudit: ok, {len(gated)} High/Medium findings, all triaged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
