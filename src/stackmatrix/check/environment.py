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
from stackmatrix.builder.backends import get_backend
from stackmatrix.built_environment import Environment
from stackmatrix.check import data as _data
from stackmatrix.check import driver, libs, nvcc, probe, relevance, scancache
from stackmatrix.check.cudamajor import cell_cuda_findings
from stackmatrix.check.drivermajor import driver_major_findings
from stackmatrix.check.features import feature_findings
from stackmatrix.check.importpath import import_path
from stackmatrix.check.inventory import Inventory, read_inventory
from stackmatrix.check.jitcuda import jit_cache_findings
from stackmatrix.check.missinglibs import Userland
from stackmatrix.check.nvccarch import arch_findings
from stackmatrix.check.nvccheaders import headers_check
from stackmatrix.check.samever import same_version_findings
from stackmatrix.check.scancache import ScanCache, StaticScan
from stackmatrix.check.static import CheckOutcome, static_check, verdict_of
from stackmatrix.check.torcharch import torch_arch_check
from stackmatrix.findings import Finding, Severity


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
    engine: str | None = None,
    serving_modules: Sequence[str] | None = None,
) -> CheckOutcome:
    """Check one environment; every problem is a finding, never an exception.

    With `scan_cache`, the static scan of unchanged files is reused (scancache.py).
    With `engine` (or `serving_modules`, replacing the engine's entry modules), the
    probe imports the serving path, and findings about files it does not load are
    latent (relevance.py)."""
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
    runtime = cuda or _torch_cuda(inventory)
    drv, drv_findings = driver.driver_check(runtime, declared_driver, cell_id)
    findings += drv_findings
    torch = inventory.get("torch")
    findings += driver_major_findings(
        data.get("extensions", []),
        driver.DriverFound(version=drv["found"], source=drv["source"]),
        runtime,
        torch.cuda_major if torch is not None else None,
        cell_id,
    )
    findings += cell_cuda_findings(data.get("extensions", []), inventory, cuda, cell_id)
    data["torch_arch"], torch_arch_found = torch_arch_check(inventory, targets, cell_id)
    findings += torch_arch_found
    data["jit_cache"], jit_found = jit_cache_findings(environment, inventory, cuda, cell_id)
    findings += jit_found
    findings += _known_bad(inventory, cell_id)
    findings += same_version_findings(inventory, cell_id)
    feature_found, data["features"] = feature_findings(
        inventory, environment.env, cell_id, root=environment.root
    )
    findings += feature_found
    data["nvcc"], nvcc_found = nvcc.check(
        environment.root,
        site,
        environment.env,
        torch_cuda=_torch_cuda(inventory),
        installed=[d.name for d in inventory.distributions],
        cell=cell_id,
    )
    findings += nvcc_found
    installed = {d.name: d.version for d in inventory.distributions}
    found_nvcc = nvcc.Nvcc.from_dict(data["nvcc"]["found"])
    data["nvcc"]["targets"], arch_found = arch_findings(found_nvcc, targets, installed, cell_id)
    findings += arch_found
    data["nvcc"]["headers"], header_found = headers_check(
        environment.root, found_nvcc, site, environment.env, installed=installed, cell=cell_id
    )
    findings += header_found
    data["driver"] = drv
    data["import_path"] = [str(p) for p in site]
    data["probe"] = None
    data["timing"] = {"static_scan": cached, "outside_probe_s": time.monotonic() - t0}
    if run_probe:
        t1 = time.monotonic()
        data["probe"], probe_findings = probe.probe_check(
            environment.python,
            log_path,
            environment.env,
            cell_id,
            engine=engine,
            serving_modules=serving_modules,
        )
        data["timing"]["probe_s"] = time.monotonic() - t1
        findings += probe_findings
    findings = _serving_path(findings, data, site, environment.root)
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
        userland=userland_of(environment),
        interrupted=_proc.interrupted,
    )
    scan = StaticScan(inventory=inventory, findings=outcome.findings, data=outcome.data)
    if cache is None or key is None:
        return scan, "off"
    if not _proc.interrupted():  # a scan cut short by Ctrl-C is not the environment's
        scancache.store(cache, key, scan)
    return scan, "miss"


def userland_of(environment: Environment) -> Userland:
    """Where the cell's server finds its system libraries: this host, or the image whose
    container it runs in (a backend whose interpreter does not run on this host)."""
    try:
        on_host = get_backend(environment.backend).on_host
    except ValueError:  # a build.json of a backend this version does not know
        on_host = environment.image is None
    return "host" if on_host else "image"


def _serving_path(
    findings: list[Finding], data: dict[str, Any], site: Sequence[Path], root: Path
) -> list[Finding]:
    """Mark the findings about files the server does not load (relevance.py) and record
    what was judged: `data["serving_path"]`, with each target's loaded-only coverage."""
    loaded = relevance.loaded_set(data.get("probe"), root)
    extensions = data.get("extensions", [])
    added = relevance.load_later_files(extensions, site, loaded, data.get("targets", []))
    latent = relevance.latent_files(extensions, site, loaded, added)
    data["serving_path"] = {
        "known": loaded is not None,
        "module": loaded.module if loaded is not None else None,
        "judged_on": probe.judged_on(data.get("probe")) if loaded is not None else None,
        "added": dict(sorted(added.items())),
        "judged_on_note": _judged_on_note(loaded, added),
        "latent": sorted(latent),
        "target_summary": relevance.serving_summary(
            data.get("coverage", {}), data.get("optional", {}), latent
        ),
    }
    return relevance.mark_latent(findings, latent)


def _judged_on_note(loaded: relevance.LoadedSet | None, added: dict[str, str]) -> str | None:
    """What the serving path was judged on, in words: the probe's mapped set plus the
    files the rules add."""
    if loaded is None:
        return None
    rules = sorted({why.split(":", 1)[0] for why in added.values()})
    n = len(added)
    extra = f" plus {n} file{'s' if n != 1 else ''} by {' and '.join(rules)}" if n else ""
    return f"judged on the files mapped by the probe's import of {loaded.module}{extra}"


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
