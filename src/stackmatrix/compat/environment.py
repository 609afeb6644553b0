"""`check_environment`: the check phase for one built environment.

The static check of its import path (static.py, reused from the scan cache while
its files are unchanged), then what only a real environment has: the driver its
CUDA needs, known-bad version combinations, features, and the runtime probe.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from stackmatrix import _proc
from stackmatrix.compat import _data, driver, libs, nvcc, probe, scancache
from stackmatrix.compat.features import feature_findings
from stackmatrix.compat.importpath import import_path
from stackmatrix.compat.inventory import Inventory, read_inventory
from stackmatrix.compat.scancache import ScanCache, StaticScan
from stackmatrix.compat.static import CheckOutcome, static_check, verdict_of
from stackmatrix.envs.base import Environment
from stackmatrix.findings import Finding, Severity

_DRIVER_MISSING = re.compile(r"libcuda\.so\.1: cannot open shared object file")


def check_environment(
    environment: Environment,
    *,
    cell_id: str | None,
    targets: Sequence[str],
    cuda: str | None,
    declared_driver: str | None,
    log_path: Path | None,
    run_probe: bool = True,
    scan_cache: ScanCache | None = None,
) -> CheckOutcome:
    """Check one environment; every problem is a finding, never an exception.

    With `scan_cache`, the static scan of unchanged files is reused (scancache.py)."""
    t0 = time.monotonic()
    site = import_path(environment)
    ctx = libs.search_context(environment.root, site, environment.env)
    static, cached = _static_scan(
        environment,
        site,
        ctx,
        cell_id=cell_id,
        targets=targets,
        host_has_driver=driver.host_driver().version is not None,
        cache=scan_cache,
    )
    inventory, findings, data = static.inventory, static.findings, static.data
    drv, drv_findings = _driver(cuda, inventory, declared_driver, cell_id)
    findings += drv_findings
    findings += _known_bad(inventory, cell_id)
    feature_found, data["features"] = feature_findings(
        inventory, environment.env, cell_id, root=environment.root
    )
    findings += feature_found
    data["nvcc"], nvcc_found = nvcc.check(
        environment.root, site, environment.env, torch_cuda=_torch_cuda(inventory),
        installed=[d.name for d in inventory.distributions], cell=cell_id,
    )  # fmt: skip
    findings += nvcc_found
    data["driver"] = drv
    data["import_path"] = [str(p) for p in site]
    data["probe"] = None
    data["timing"] = {"static_scan": cached, "outside_probe_s": time.monotonic() - t0}
    if run_probe:
        t1 = time.monotonic()
        data["probe"], probe_findings = _probe_findings(
            environment.python, log_path, environment.env, cell_id
        )
        data["timing"]["probe_s"] = time.monotonic() - t1
        findings += probe_findings
    verdict = verdict_of(findings)
    data["verdict"] = verdict
    data["findings"] = [f.to_dict() for f in findings]
    return CheckOutcome(verdict=verdict, findings=findings, data=data)


def _static_scan(
    environment: Environment,
    site: Sequence[Path],
    ctx: libs.SearchContext,
    *,
    cell_id: str | None,
    targets: Sequence[str],
    host_has_driver: bool,
    cache: ScanCache | None,
) -> tuple[StaticScan, Literal["hit", "miss", "off"]]:
    """The inventory and the static findings, from the cache when the files are unchanged."""
    key = None
    if cache is not None and scancache.usable(cache):
        key = scancache.scan_key(
            cache,
            environment=environment,
            site=site,
            ctx=ctx,
            cell_id=cell_id,
            targets=targets,
            host_has_driver=host_has_driver,
        )
        hit = scancache.load(cache, key)
        if hit is not None:
            return hit, "hit"
    inventory = read_inventory(site)
    outcome = static_check(
        site,
        inventory,
        ctx,
        cell_id=cell_id,
        targets=targets,
        resolve=True,
        host_has_driver=host_has_driver,
    )
    scan = StaticScan(inventory=inventory, findings=outcome.findings, data=outcome.data)
    if cache is None or key is None:
        return scan, "off"
    if not _proc.interrupted():  # a scan cut short by Ctrl-C is not the environment's
        scancache.store(cache, key, scan)
    return scan, "miss"


def _known_bad(inventory: Inventory, cell: str | None) -> list[Finding]:
    out: list[Finding] = []
    for rule in _data.load("known_bad.toml").get("bad", []):
        if all(_installed_matches(inventory, name, spec) for name, spec in rule["when"].items()):
            out.append(
                Finding(
                    code="SM-KNOWN-BAD",
                    severity=Severity(rule.get("severity", "fail")),
                    cell=cell,
                    subject=rule["id"],
                    message=" ".join(str(rule["message"]).split()),
                    details={"when": dict(rule["when"])},
                )
            )
    return out


def _installed_matches(inventory: Inventory, name: str, spec: str) -> bool:
    dist = inventory.get(name)
    if dist is None:
        return False
    try:
        return Version(dist.version) in SpecifierSet(spec, prereleases=True)
    except (InvalidVersion, InvalidSpecifier):
        return False


def _torch_cuda(inventory: Inventory) -> str | None:
    torch = inventory.get("torch")
    if torch is None:
        return None
    version_py = torch.site_packages / "torch" / "version.py"
    try:
        m = re.search(
            r"^cuda\s*(?::\s*\S+\s*)?=\s*['\"]([\d.]+)['\"]", version_py.read_text(), re.M
        )
    except OSError:
        return None
    return m.group(1) if m else None


def _driver(
    cuda: str | None, inventory: Inventory, declared: str | None, cell: str | None
) -> tuple[dict[str, Any], list[Finding]]:
    runtime = cuda or _torch_cuda(inventory)
    found = driver.find_driver(declared)
    data: dict[str, Any] = {
        "cuda": runtime,
        "required_min": None,
        "family_min": None,
        "found": found.version,
        "source": found.source,
    }
    if runtime is None:
        return data, []
    req = driver.requirement(runtime)
    data.update(required_min=req.toolkit_min, family_min=req.family_min)
    judged = driver.judge_driver(req, found)
    if judged == "too-old":
        return data, [
            Finding(
                code="SM-DRIVER-OLD",
                severity=Severity.FAIL,
                cell=cell,
                subject="driver",
                message=f"CUDA {runtime} needs a driver >= {req.family_min} (>= {req.toolkit_min} "
                f"for full support); the {found.source} driver is {found.version}: upgrade it",
                details=req.to_dict(),
            )
        ]
    if judged == "minor-compat":
        return data, [
            Finding(
                code="SM-DRIVER-MINOR-COMPAT",
                severity=Severity.WARN,
                cell=cell,
                subject="driver",
                message=f"CUDA {runtime} is built for driver >= {req.toolkit_min}; "
                f"the {found.source} "
                f"driver {found.version} runs it only through minor-version compatibility "
                "(no PTX JIT); upgrade the driver",
                details=req.to_dict(),
            )
        ]
    if judged == "unknown":
        return data, [
            Finding(
                code="SM-DRIVER-UNKNOWN",
                severity=Severity.INFO,
                cell=cell,
                subject="driver",
                message=f"no NVIDIA driver on this machine and none declared (spec `driver`); "
                f"CUDA {runtime} needs >= {req.toolkit_min}",
                details=req.to_dict(),
            )
        ]
    return data, []


def _probe_findings(
    python: Sequence[str], log_path: Path | None, env: dict[str, str], cell: str | None
) -> tuple[dict[str, Any] | None, list[Finding]]:
    try:
        data = probe.run_probe(python, log_path=log_path, env=env or None)
    except probe.ProbeFailed as exc:
        return None, [
            Finding(
                code="SM-PROBE-FAILED",
                severity=Severity.WARN,
                cell=cell,
                subject="probe",
                message=f"the runtime probe did not run: {exc}",
            )
        ]
    out: list[Finding] = []
    for name, res in sorted(data.get("imports", {}).items()):
        if res.get("installed") and not res.get("ok"):
            err = res.get("error", {})
            if _DRIVER_MISSING.search(str(err.get("message"))) and not _has_gpu(data):
                out.append(
                    Finding(
                        code="SM-IMPORT-NEEDS-DRIVER",
                        severity=Severity.INFO,
                        cell=cell,
                        subject=name,
                        message=f"import {name} needs the NVIDIA driver's libcuda.so.1, which "
                        "this machine (no GPU, no driver) lacks; it is tried again on a GPU host",
                        details={"error": err},
                    )
                )
                continue
            out.append(
                Finding(
                    code="SM-IMPORT-FAILED",
                    severity=Severity.FAIL,
                    cell=cell,
                    subject=name,
                    message=f"import {name} fails: {err.get('type')}: {err.get('message')}",
                    details={"error": err},
                )
            )
    if not data.get("gpu", {}).get("cuda_available"):
        out.append(
            Finding(
                code="SM-NO-GPU",
                severity=Severity.INFO,
                cell=cell,
                subject="gpu",
                message=f"no CUDA device ({data.get('gpu', {}).get('reason')}); "
                "GPU smoke ops not run",
            )
        )
    elif data.get("smoke", {}).get("ok") is False:
        out.append(
            Finding(
                code="SM-SMOKE-FAILED",
                severity=Severity.FAIL,
                cell=cell,
                subject="gpu",
                message=f"small GPU ops failed: {data['smoke']}",
                details=data["smoke"],
            )
        )
    return data, out


def _has_gpu(probe_data: dict[str, Any]) -> bool:
    return bool(probe_data.get("gpu", {}).get("cuda_available") or probe_data.get("driver"))
