"""Distributions that must come at the same version, one built for the other
(compat/known_bad.toml [[same_version]]): flashinfer-python with its prebuilt JIT cache
or cubins (flashinfer #4337: a jit-cache of another version)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from packaging.version import InvalidVersion, Version

from stackmatrix.check import data as _data
from stackmatrix.check.inventory import Inventory
from stackmatrix.findings import Finding, Severity


def same_version_findings(inventory: Inventory, cell: str | None) -> list[Finding]:
    rules = _data.load("known_bad.toml").get("same_version", [])
    return [f for rule in rules if (f := _check(inventory, rule, cell)) is not None]


def _public(version: str) -> str:
    try:
        return Version(version).public  # "0.6.4+cu130" -> "0.6.4"
    except InvalidVersion:
        return version


def _check(inventory: Inventory, rule: Mapping[str, Any], cell: str | None) -> Finding | None:
    dists = [inventory.get(str(name)) for name in rule["packages"]]
    present = [d for d in dists if d is not None]
    if len(present) < 2 or len({_public(d.version) for d in present}) == 1:
        return None
    versions = ", ".join(f"{d.name} {d.version}" for d in present)
    return Finding(
        code="SM-VERSION-MISMATCH",
        severity=Severity(rule.get("severity", "fail")),
        cell=cell,
        subject=str(rule["id"]),
        message=f"{versions}: " + " ".join(str(rule["message"]).split()),
        details={"versions": {d.name: d.version for d in present}},
    )
