"""Features that hang on one file of a distribution, or on a compiler at run time.

An offline kit or a trimmed wheel can leave a package importable while one of its
features is gone (sglang-kernel without `flash_ops`: no FA3), and flashinfer without its
prebuilt kernels compiles them with nvcc at first use. Rules are data
(compat/features.toml); each finding names the feature and what to do.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stackmatrix.check import data as _data
from stackmatrix.check import nvcc
from stackmatrix.check.inventory import Inventory
from stackmatrix.findings import Finding, Severity


def feature_findings(
    inventory: Inventory, env: Mapping[str, str], cell: str | None, *, root: Path = Path("/")
) -> tuple[list[Finding], dict[str, Any]]:
    """`root` is the environment's filesystem: an image's tools are looked for in it,
    never on the host that runs the check."""
    rules = _data.load("features.toml")
    findings: list[Finding] = []
    for rule in rules.get("absent_file", []):
        findings += _absent_file(inventory, rule, cell)
    jit: dict[str, Any] = {}
    for rule in rules.get("jit", []):
        found, facts = _jit(inventory, rule, env, cell, root)
        findings += found
        if facts:
            jit[str(rule["package"])] = facts
    return findings, {"jit": jit}


def _absent_file(inventory: Inventory, rule: Mapping[str, Any], cell: str | None) -> list[Finding]:
    dist = inventory.get(str(rule["package"]))
    if dist is None or (dist.site_packages / str(rule["file"])).is_file():
        return []
    return [
        Finding(
            code="SM-FEATURE-ABSENT",
            severity=Severity(rule.get("severity", "warn")),
            cell=cell,
            subject=f"{dist.name} {dist.version}",
            message=(
                f"{dist.name} {dist.version} is installed without {rule['file']}, so "
                f"{rule['feature']} is unavailable; {rule['advice']}"
            ),
            details={
                "file": str(rule["file"]),
                "site_packages": str(dist.site_packages),
                **({"log": str(rule["log"])} if rule.get("log") else {}),
            },
        )
    ]


def _jit(
    inventory: Inventory,
    rule: Mapping[str, Any],
    env: Mapping[str, str],
    cell: str | None,
    root: Path,
) -> tuple[list[Finding], dict[str, Any]]:
    dist = inventory.get(str(rule["package"]))
    if dist is None:
        return [], {}
    prebuilt = [p for p in rule.get("prebuilt", []) if inventory.get(p) is not None]
    tool = _jit_tool(rule, env, root)
    facts = {"prebuilt": prebuilt, "tool": rule["tool"], "tool_path": tool}
    if prebuilt:
        return [], facts
    found = tool is not None
    what = (
        f"{dist.name} {dist.version} has no prebuilt kernels ({', '.join(rule['prebuilt'])} absent)"
    )
    return [
        Finding(
            code="SM-JIT-ONLY",
            severity=Severity.INFO if found else Severity.WARN,
            cell=cell,
            subject=f"{dist.name} {dist.version}",
            message=(
                f"{what}: it compiles them with {rule['tool']} at first use, found at {tool} "
                "(the first server launch is slower; keep a warm-up launch)"
                if found
                else f"{what} and {rule['tool']} is not found in CUDA_HOME/bin or on PATH: "
                f"its kernels cannot compile; set CUDA_HOME or install {rule['tool']}"
            ),
            details=facts,
        )
    ], facts


def _jit_tool(rule: Mapping[str, Any], env: Mapping[str, str], root: Path) -> str | None:
    """The tool the rule's JIT runs: flashinfer's nvcc is `$FLASHINFER_NVCC` alone where
    it is set (check/nvcc.py), else the tool where `find_tool` finds it."""
    named = None
    if rule["tool"] == "nvcc" and rule["package"] == nvcc.OVERRIDE_USER:
        named = nvcc.override(root, env)
    if named is None:
        return find_tool(str(rule["tool"]), env, root=root)
    host = nvcc.resolve(root, named)
    return named if host is not None and host.is_file() else None


# where an image's tools are when its own PATH is not known here: NVIDIA's images put the
# toolkit first on PATH
_IMAGE_BIN_DIRS = ("/usr/local/cuda/bin", "/usr/local/bin", "/usr/bin", "/bin")


def find_tool(name: str, env: Mapping[str, str], *, root: Path = Path("/")) -> str | None:
    """The tool as the environment would find it: CUDA_HOME/bin, then PATH, then
    /usr/local/cuda/bin (the order of torch's and flashinfer's JITs); for an image
    (`root` other than /), the cell's CUDA_HOME and the image's usual bin directories,
    followed inside the image (its path as the image sees it)."""
    if root != Path("/"):
        homes = [env["CUDA_HOME"] + "/bin"] if env.get("CUDA_HOME") else []
        for d in (*homes, *_IMAGE_BIN_DIRS):
            found = nvcc.resolve(root, f"{d}/{name}")
            if found is not None and found.is_file():
                return f"{d}/{name}"
        return None
    merged = {**os.environ, **env}
    home = merged.get("CUDA_HOME") or merged.get("CUDA_PATH")
    if home:
        candidate = Path(home) / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    on_path = shutil.which(name, path=merged.get("PATH"))
    last = f"{nvcc.HOST_TOOLKIT}/bin/{name}"  # torch's and flashinfer's last resort
    return on_path if on_path is not None or not os.access(last, os.X_OK) else last
