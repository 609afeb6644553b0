"""The driver against the CUDA major each extension's runtime needs.

`driver.py` judges the driver against the CUDA of the cell (its `cuda`, else torch's).
An environment can hold extensions of another CUDA major than that: a CUDA 13 kernel
wheel next to a CUDA 12 torch, or an engine without torch whose CUDA is only in its
extensions' DT_NEEDED (`libcudart.so.13`). A CUDA N runtime refuses a driver older than
its family's minimum (NVIDIA's minor-version compatibility: 13.x needs >= 580, 12.x >=
525; compat/cuda_driver.toml `[family.N]`) with cudaErrorInsufficientDriver, "CUDA
driver version is insufficient for CUDA runtime version", at the first CUDA call.

SM-DRIVER-MAJOR-OLD, one per extension (its subject, so that relevance.py can mark it
latent), for a major that `driver.py` did not judge already. Extensions a package loads
only for another CUDA major (loaders.toml [[cuda_variant]]) are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from stackmatrix.check import coverage, libs
from stackmatrix.check.cudamajor import declared_major
from stackmatrix.check.driver import DriverFound, requirement, version_key
from stackmatrix.findings import Finding, Severity

CODE = "SM-DRIVER-MAJOR-OLD"
RUNTIME_ERROR = "CUDA driver version is insufficient for CUDA runtime version"


def driver_major_findings(
    extensions: Iterable[Mapping[str, Any]],
    found: DriverFound,
    runtime: str | None,
    torch_major: int | None,
    cell: str | None,
) -> list[Finding]:
    """Each extension whose CUDA libraries are of a major the `found` driver is too old
    for; nothing when the driver is unknown."""
    if found.version is None:
        return []
    judged = declared_major(runtime)
    variants = coverage.cuda_variant_rules()
    out: list[Finding] = []
    for ext in extensions:
        rel = str(ext.get("relpath", ""))
        if not rel or coverage.unused_cuda_variant(rel, variants, torch_major or judged):
            continue
        for major, names in sorted(_majors(ext.get("needed", [])).items()):
            minimum = requirement(f"{major}.0").family_min
            if major == judged or minimum is None:
                continue
            if version_key(found.version) < version_key(minimum):
                out.append(_finding(rel, major, names, minimum, found, cell))
    return out


def _majors(needed: Iterable[Any]) -> dict[int, list[str]]:
    by_major: dict[int, list[str]] = {}
    for name in needed:
        if (m := libs.cuda_major_of_soname(str(name))) is not None:
            by_major.setdefault(m, []).append(str(name))
    return by_major


def _finding(
    rel: str, major: int, names: list[str], minimum: str, found: DriverFound, cell: str | None
) -> Finding:
    return Finding(
        code=CODE,
        severity=Severity.FAIL,
        cell=cell,
        subject=rel,
        message=(
            f"{rel} needs {', '.join(names)} (CUDA {major}), which needs a driver >= "
            f"{minimum}; the {found.source} driver {found.version} is older, so its first "
            f'CUDA call fails with "{RUNTIME_ERROR}": upgrade the driver, or install the '
            "build of this package for the driver's CUDA major"
        ),
        details={
            "extension": rel,
            "libraries": names,
            "cuda_major": major,
            "driver_min": minimum,
            "driver": found.version,
            "driver_source": found.source,
        },
    )
