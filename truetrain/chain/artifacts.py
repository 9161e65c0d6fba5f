"""Compiled contract artifacts (brownie's build/contracts/*.json) and custom-error decoding."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from eth_abi import decode as abi_decode
from eth_utils import keccak

from truetrain.errors import DeploymentError
from truetrain.paths import BUILD_CONTRACTS


@dataclass(frozen=True)
class Artifact:
    """ABI and bytecode of one compiled contract."""

    name: str
    abi: list
    bytecode: str
    deployed_bytecode: str


def load_artifact(name: str, build_dir: Path = BUILD_CONTRACTS, libraries: dict[str, str] | None = None) -> Artifact:
    """Read ``build_dir/<name>.json``; raise :class:`DeploymentError` when it is missing. With
    ``libraries`` (name → address) the bytecode is linked, ready to deploy, and a library it
    needs but was not given is refused too."""
    path = build_dir / f"{name}.json"
    if not path.exists():
        raise DeploymentError(f"no compiled artifact for {name} in {build_dir}: run `make compile`")
    data = json.loads(path.read_text())
    bytecode = data.get("bytecode") or ""
    if libraries is not None:
        bytecode = _link(name, bytecode, libraries)
    return Artifact(name, data["abi"], bytecode, data.get("deployedBytecode") or "")


def linked_libraries(name: str, build_dir: Path = BUILD_CONTRACTS) -> list[str]:
    """Names of the external libraries ``name``'s bytecode must be linked with."""
    data = json.loads((build_dir / f"{name}.json").read_text())
    return sorted({lib for refs in data.get("linkReferences", {}).values() for lib in refs})


def _link(name: str, bytecode: str, libraries: dict[str, str]) -> str:
    """Replace brownie's placeholders ``__<Library>___…`` (40 hex characters wide) by the
    libraries' addresses."""
    for library, address in libraries.items():
        marker = f"__{library}".ljust(40, "_")
        bytecode = bytecode.replace(marker, address.lower().removeprefix("0x"))
    if "__" in bytecode:
        missing = bytecode[bytecode.index("__"):][:40].strip("_")
        raise DeploymentError(f"{name} needs the library {missing} deployed and linked first")
    return bytecode


def _signature(item: dict) -> str:
    def canonical(param: dict) -> str:
        kind = param["type"]
        if kind.startswith("tuple"):
            return "(" + ",".join(canonical(c) for c in param["components"]) + ")" + kind[len("tuple"):]
        return kind

    return f"{item['name']}({','.join(canonical(p) for p in item['inputs'])})"


@lru_cache(maxsize=4)
def error_table(build_dir: Path = BUILD_CONTRACTS) -> dict[bytes, tuple[str, list[str]]]:
    """Map every custom error selector in the build to ``(name, [argument types])``."""
    table: dict[bytes, tuple[str, list[str]]] = {}
    for path in sorted(build_dir.glob("*.json")):
        for item in json.loads(path.read_text()).get("abi", []):
            if item.get("type") == "error":
                signature = _signature(item)
                types = signature[len(item["name"]) + 1 : -1]
                table[keccak(text=signature)[:4]] = (item["name"], _split_types(types))
    return table


def _split_types(types: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in types:
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += char == "("
        depth -= char == ")"
        current += char
    return parts + [current] if current else parts


def decode_error(data: bytes) -> tuple[str, tuple]:
    """Name and arguments of the custom error encoded in revert ``data``."""
    if len(data) < 4:
        return ("Reverted", ())
    known = error_table().get(bytes(data[:4]))
    if known is None:
        if data[:4] == bytes.fromhex("08c379a0"):  # Error(string): a revert string
            return ("Error", abi_decode(["string"], bytes(data[4:])))
        return ("UnknownError", ("0x" + bytes(data[:4]).hex(),))
    name, types = known
    return (name, tuple(abi_decode(types, bytes(data[4:]))))
