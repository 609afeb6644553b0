"""CUDA runtime version -> minimum Linux driver, checked against a real or declared driver."""

from __future__ import annotations

import logging
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, assert_never

from stackmatrix import _proc
from stackmatrix.check import data as _data
from stackmatrix.findings import Finding, Severity

log = logging.getLogger(__name__)

_PROC_VERSION = Path("/proc/driver/nvidia/version")
_KERNEL_MODULE = re.compile(r"Kernel Module\s+(?:for\s+\S+\s+)?(\d+\.\d+(?:\.\d+)?)")
DriverSource = Literal["declared", "proc", "nvidia-smi", "none"]


def version_key(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


@dataclass(frozen=True, kw_only=True)
class DriverRequirement:
    cuda: str  # "12.8"
    toolkit_min: str | None  # full functionality
    family_min: str | None  # minor-version compatibility floor

    def to_dict(self) -> dict[str, Any]:
        return {"cuda": self.cuda, "toolkit_min": self.toolkit_min, "family_min": self.family_min}


@dataclass(frozen=True, kw_only=True)
class DriverFound:
    version: str | None
    source: DriverSource


def requirement(cuda: str, table: dict[str, Any] | None = None) -> DriverRequirement:
    """The driver a CUDA runtime version needs; the nearest older listed release when
    this exact one is not in the table (a 12.7 would need at least 12.6's)."""
    data = table if table is not None else _data.load("cuda_driver.toml")
    want = version_key(cuda)[:2]
    toolkit = data.get("toolkit", {})
    listed = sorted((version_key(k), v) for k, v in toolkit.items())
    toolkit_min = next((v for k, v in reversed(listed) if k <= want), None)
    family = data.get("family", {}).get(str(want[0]) if want else "", {})
    return DriverRequirement(cuda=cuda, toolkit_min=toolkit_min, family_min=family.get("minimum"))


def host_driver() -> DriverFound:
    """The driver of this machine: /proc/driver/nvidia/version, else nvidia-smi."""
    try:
        text = _PROC_VERSION.read_text(errors="replace")
    except OSError:
        text = ""
    if m := _KERNEL_MODULE.search(text):
        return DriverFound(version=m.group(1), source="proc")
    smi = shutil.which("nvidia-smi")
    if smi:
        res = _proc.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], timeout=30)
        first = res.output.strip().splitlines()[0].strip() if res.ok and res.output.strip() else ""
        if re.fullmatch(r"\d+\.\d+(?:\.\d+)?", first):
            return DriverFound(version=first, source="nvidia-smi")
    return DriverFound(version=None, source="none")


def find_driver(declared: str | None) -> DriverFound:
    """A declared fleet driver wins over this host's (the fleet is what will run it)."""
    if declared:
        return DriverFound(version=declared, source="declared")
    return host_driver()


DriverVerdict = Literal["ok", "minor-compat", "too-old", "unknown"]


def judge_driver(req: DriverRequirement, found: DriverFound) -> DriverVerdict:
    if found.version is None or (req.family_min is None and req.toolkit_min is None):
        return "unknown"
    have = version_key(found.version)
    if req.family_min is not None and have < version_key(req.family_min):
        return "too-old"
    if req.toolkit_min is not None and have < version_key(req.toolkit_min):
        return "minor-compat"
    return "ok"


def driver_check(
    runtime: str | None, declared: str | None, cell: str | None
) -> tuple[dict[str, Any], list[Finding]]:
    """The driver the CUDA `runtime` needs against the one found (a declared driver
    wins): the check's `driver` data and SM-DRIVER-OLD, -MINOR-COMPAT or -UNKNOWN."""
    found = find_driver(declared)
    data: dict[str, Any] = {
        "cuda": runtime,
        "required_min": None,
        "family_min": None,
        "found": found.version,
        "source": found.source,
    }
    if runtime is None:
        return data, []
    req = requirement(runtime)
    data.update(required_min=req.toolkit_min, family_min=req.family_min)
    problem = _driver_problem(judge_driver(req, found), runtime, req, found)
    if problem is None:
        return data, []
    code, severity, message = problem
    finding = Finding(
        code=code,
        severity=severity,
        cell=cell,
        subject="driver",
        message=message,
        details=req.to_dict(),
    )
    return data, [finding]


def _driver_problem(
    judged: DriverVerdict, runtime: str, req: DriverRequirement, found: DriverFound
) -> tuple[str, Severity, str] | None:
    """The code, severity and message of a driver that is not simply new enough."""
    match judged:
        case "too-old":
            return (
                "SM-DRIVER-OLD",
                Severity.FAIL,
                f"CUDA {runtime} needs a driver >= {req.family_min} (>= {req.toolkit_min} "
                f"for full support); the {found.source} driver is {found.version}, so the "
                "runtime's first call fails with \"CUDA driver version is insufficient for "
                'CUDA runtime version": upgrade it',
            )
        case "minor-compat":
            return (
                "SM-DRIVER-MINOR-COMPAT",
                Severity.WARN,
                f"CUDA {runtime} is built for driver >= {req.toolkit_min}; "
                f"the {found.source} "
                f"driver {found.version} runs it only through minor-version compatibility "
                "(no PTX JIT); upgrade the driver",
            )
        case "unknown":
            return (
                "SM-DRIVER-UNKNOWN",
                Severity.INFO,
                f"no NVIDIA driver on this machine and none declared (spec `driver`); "
                f"CUDA {runtime} needs >= {req.toolkit_min}",
            )
        case "ok":
            return None
        case _:
            assert_never(judged)
