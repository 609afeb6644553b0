"""The `check` phase: prove a cell's stack is coherent before anything runs.

Static analysis of the environment's files (inventory, shared libraries, symbols,
CUDA majors, GPU-arch coverage, driver) plus the runtime probe, folded into one
verdict from findings with stable codes (docs/compat.md lists every code).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import shutil
import tempfile
import time
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from stackmatrix import _proc
from stackmatrix.compat import _data, coverage, driver, libs, probe, scancache, symbols
from stackmatrix.compat._elffile import ELFError, is_elf
from stackmatrix.compat.features import feature_findings
from stackmatrix.compat.importpath import import_path
from stackmatrix.compat.inventory import Inventory, read_inventory
from stackmatrix.compat.render import render_text
from stackmatrix.compat.scan import ExtensionScan, scan_extension
from stackmatrix.compat.scancache import ScanCache, StaticScan
from stackmatrix.envs.base import Environment
from stackmatrix.findings import Finding, Severity

log = logging.getLogger(__name__)

# "nothing-judged": only `inspect`, for a path holding no readable extension and no
# package (a FIFO, /dev/zero, a zip that is not a wheel; issue 16, defect 16)
Verdict = Literal["compatible", "warnings", "incompatible", "nothing-judged"]
__all__ = ["CheckOutcome", "check_environment", "inspect_path", "render_text"]

# libraries that wheels of the stack provide (torch, nvidia-*, their vendored copies);
# anything else a needed closure lacks is the host's or the base image's to provide
_STACK_LIB = re.compile(
    r"^lib(?:c10|torch|shm|cudart|cublas|cublasLt|cufft|curand|cusolver|cusparse|cudnn|nccl|"
    r"nvrtc|nvJitLink|cupti|nvToolsExt|cufile|nvshmem|cusparseLt|mscclpp)"
)
_SKIP_DIRS = ("nvidia/", "torch/lib/")
_DRIVER_MISSING = re.compile(r"libcuda\.so\.1: cannot open shared object file")


@dataclass(frozen=True, kw_only=True)
class CheckOutcome:
    verdict: Verdict
    findings: list[Finding] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)


def verdict_of(findings: Sequence[Finding]) -> Verdict:
    if any(f.severity is Severity.FAIL for f in findings):
        return "incompatible"
    if any(f.severity is Severity.WARN for f in findings):
        return "warnings"
    return "compatible"


# --- discovery -----------------------------------------------------------------------


def find_extensions(site_packages: Sequence[Path]) -> list[tuple[Path, Path]]:
    """(site-packages, file) for every ELF extension module, libraries excluded."""
    out: list[tuple[Path, Path]] = []
    earlier: list[Path] = []
    for sp in site_packages:
        for path in sorted(sp.rglob("*.so")):
            rel = path.relative_to(sp).as_posix()
            if rel.startswith(_SKIP_DIRS) or ".libs/" in rel or path.name.startswith("lib"):
                continue
            if _shadowed(rel, earlier):
                continue  # an earlier directory of the import path has this package
            if path.is_file() and not path.is_symlink() and is_elf(path):
                out.append((sp, path))
        earlier.append(sp)
    return out


def _shadowed(rel: str, earlier: Sequence[Path]) -> bool:
    top = rel.split("/", 1)[0]
    return "/" in rel and any((sp / top).is_dir() for sp in earlier)


# --- per-extension analysis ---------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _ExtResult:
    scan: ExtensionScan
    relpath: str
    package: str | None
    closure: libs.Closure
    report: symbols.SymbolReport
    versions: tuple[symbols.VersionProblem, ...]


def _analyse(
    sp: Path,
    path: Path,
    ctx: libs.SearchContext,
    index: libs.LibraryIndex,
    inventory: Inventory,
    *,
    resolve: bool,
) -> _ExtResult:
    scan = scan_extension(path)
    rel = path.relative_to(sp).as_posix()
    closure = libs.needed_closure(path, ctx, index) if resolve else libs.Closure()
    report = (
        symbols.check_symbols(scan.symbols, closure.resolved, closure.missing, index)
        if resolve
        else symbols.SymbolReport(undefined_count=sum(1 for s in scan.undefined if not s.weak))
    )
    versions = (
        symbols.check_versions(scan.version_needs, closure.resolved, index) if resolve else ()
    )
    return _ExtResult(
        scan=scan,
        relpath=rel,
        package=inventory.owner_of(rel),
        closure=closure,
        report=report,
        versions=versions,
    )


def _ext_data(r: _ExtResult) -> dict[str, Any]:
    arches = coverage.arch_lists(r.scan.fatbin)
    return {
        "path": str(r.scan.path),
        "relpath": r.relpath,
        "package": r.package,
        "needed": list(r.scan.dynamic.needed),
        "rpath": list(r.scan.dynamic.rpath),
        "runpath": list(r.scan.dynamic.runpath),
        "resolved": {k: str(v) for k, v in r.closure.resolved.items()},
        "missing": sorted(r.closure.missing),
        "undefined_count": r.report.undefined_count,
        "unresolved": [g.to_dict() for g in r.report.groups],
        "cxx11_abi": r.report.cxx11_abi,
        "cubins": arches["cubins"],
        "ptx": arches["ptx"],
        "fatbin_entries": len(r.scan.fatbin),
        "compressed_entries": sum(1 for e in r.scan.fatbin if e.compressed),
        "cuda_majors": sorted(_cuda_majors_of(r)),
    }


def _cuda_majors_of(r: _ExtResult) -> set[int]:
    # the extension's own DT_NEEDED: its closure includes torch's libraries, whose
    # major is counted once, for torch
    names = set(r.scan.dynamic.needed)
    return {m for n in names if (m := libs.cuda_major_of_soname(n)) is not None}


# --- findings -------------------------------------------------------------------------


def _lib_findings(r: _ExtResult, cell: str | None, host_has_driver: bool) -> list[Finding]:
    out: list[Finding] = []
    for name, by in sorted(r.closure.missing.items()):
        details = {"library": name, "needed_by": str(by), "extension": r.relpath}
        if name in libs.DRIVER_LIBS:
            sev = Severity.WARN if host_has_driver else Severity.INFO
            msg = f"{name} (the NVIDIA driver's library) is not on this " + (
                "root although a driver is loaded; mount the driver libraries into it"
                if host_has_driver
                else "machine, which has no NVIDIA driver; it is provided "
                "by the driver on a GPU host"
            )
            out.append(
                Finding(
                    code="SM-DRIVER-LIB-ABSENT",
                    severity=sev,
                    message=msg,
                    cell=cell,
                    subject=r.relpath,
                    details=details,
                )
            )
        elif _STACK_LIB.match(name):
            out.append(
                Finding(
                    code="SM-LIB-MISSING",
                    severity=Severity.FAIL,
                    cell=cell,
                    subject=r.relpath,
                    message=f"{r.relpath} needs {name}, which no package of this environment "
                    "provides" + _cuda_hint(name),
                    details=details,
                )
            )
        else:
            out.append(
                Finding(
                    code="SM-LIB-HOST-MISSING",
                    severity=Severity.WARN,
                    cell=cell,
                    subject=r.relpath,
                    message=f"{r.relpath} needs the system library {name}, which the "
                    "environment's root "
                    "lacks; install it in the host or base image (e.g. libnuma1 for libnuma.so.1)",
                    details=details,
                )
            )
    return out


def _optional(findings: list[Finding], feature: str) -> list[Finding]:
    """An extension its package loads only for one feature (loaders.toml [[optional]]):
    what keeps it from loading costs that feature, not the stack. Same codes, as info."""
    return [
        dataclasses.replace(
            f,
            severity=Severity.INFO,
            message=f"{f.message} (optional: only {feature} is unavailable)",
            details={**f.details, "optional_feature": feature},
        )
        if f.severity is not Severity.INFO
        else f
        for f in findings
    ]


def _cuda_hint(name: str) -> str:
    major = libs.cuda_major_of_soname(name)
    if major is None:
        return ""
    return (
        f" (a CUDA {major} library: install the CUDA {major} wheels, e.g. "
        f"nvidia-cuda-runtime-cu{major}, or use a build of this package for the CUDA major "
        "of the rest of the stack)"
    )


def _linked_provider(r: _ExtResult, groups: list[symbols.UnresolvedGroup]) -> bool:
    """Whether the expected provider of some missing symbols is in the needed closure."""
    needed = set(r.closure.resolved)
    return any(
        g.provider != "unknown" and any(n.startswith(g.provider) for n in needed) for g in groups
    )


def _symbol_findings(r: _ExtResult, cell: str | None) -> list[Finding]:
    out: list[Finding] = []
    checked = [g for g in r.report.groups if not g.provider_missing]
    if r.closure.missing:
        # a library it needs is missing (its own finding): what that library would
        # have defined is a consequence, not a second problem
        checked = [g for g in checked if g.provider != "unknown"]
    if checked:
        total = sum(len(g.symbols) for g in checked)
        causes = "; ".join(f"{len(g.symbols)} from {g.provider}: {g.cause}" for g in checked)
        example = checked[0].symbols[0]
        linked = _linked_provider(r, checked)
        out.append(
            Finding(
                code="SM-SYM-UNDEFINED" if linked else "SM-SYM-GLOBAL",
                # Extensions linked against a library that lacks their symbols will not
                # load. Others (cuda.core's torch bridge, plugins) take symbols from
                # whatever the process loaded first: a warning, not a verdict.
                severity=Severity.FAIL if linked else Severity.WARN,
                cell=cell,
                subject=r.relpath,
                message=f"{r.relpath} uses {total} symbol(s) nothing in its libraries defines "
                f"({causes}); e.g. {example}",
                details={"groups": [g.to_dict() for g in checked]},
            )
        )
    rep = r.report
    if (
        rep.cxx11_abi is not None
        and rep.torch_cxx11_abi is not None
        and rep.cxx11_abi != rep.torch_cxx11_abi
    ):
        out.append(
            Finding(
                code="SM-CXX-ABI",
                severity=Severity.FAIL,
                cell=cell,
                subject=r.relpath,
                message=f"{r.relpath} is built with _GLIBCXX_USE_CXX11_ABI={int(rep.cxx11_abi)} "
                "but torch "
                f"uses {int(rep.torch_cxx11_abi)}; install a build made for this torch",
                details={"extension": rep.cxx11_abi, "torch": rep.torch_cxx11_abi},
            )
        )
    for p in r.versions:
        system = bool(symbols.SYSTEM_RUNTIME.match(p.soname))
        out.append(
            Finding(
                code="SM-GLIBC" if system else "SM-SYMVER-MISSING",
                severity=Severity.FAIL,
                cell=cell,
                subject=r.relpath,
                message=f"{r.relpath} needs {', '.join(p.missing)} from {p.soname}, which "
                f"{p.provided_by} does not provide"
                + ("; use a newer base system (or a build for an older one)" if system else ""),
                details={
                    "soname": p.soname,
                    "missing": list(p.missing),
                    "provided_by": str(p.provided_by),
                },
            )
        )
    return out


@dataclass(frozen=True, kw_only=True)
class _Coverage:
    per_target: dict[str, dict[str, str]]
    summary: dict[str, str]
    not_loaded: dict[str, list[str]]
    optional: dict[str, str]  # relpath -> feature it serves


def _coverage(
    results: Sequence[_ExtResult],
    targets: Sequence[str],
    rules: Sequence[coverage.LoaderRule],
    optional: Sequence[coverage.OptionalRule],
) -> _Coverage:
    per_target: dict[str, dict[str, str]] = {}
    summary: dict[str, str] = {}
    not_loaded: dict[str, list[str]] = {}
    features = {
        r.relpath: f for r in results if (f := coverage.optional_feature(r.relpath, optional))
    }
    for text in targets:
        target = coverage.parse_target(text)
        per: dict[str, coverage.Coverage] = {}
        for r in results:
            if not r.scan.fatbin:
                continue
            if not coverage.loaded_on(r.relpath, target, rules):
                not_loaded.setdefault(text, []).append(r.relpath)
                continue
            per[r.relpath] = coverage.judge(r.scan.fatbin, target)
        per_target[text] = dict(per)
        summary[text] = coverage.worst(v for k, v in per.items() if k not in features)
    return _Coverage(
        per_target=per_target, summary=summary, not_loaded=not_loaded, optional=features
    )


def _coverage_findings(cov: _Coverage, cell: str | None) -> list[Finding]:
    out: list[Finding] = []
    for target, per in cov.per_target.items():
        for rel, value in sorted(per.items()):
            feature = cov.optional.get(rel)
            if feature is not None and value != "native":
                how = "only through PTX JIT" if value == "ptx" else "not at all"
                out.append(
                    Finding(
                        code="SM-ARCH-OPTIONAL",
                        severity=Severity.INFO,
                        cell=cell,
                        subject=rel,
                        message=f"{rel} runs on {target} {how}; it is imported only for {feature}, "
                        "which is therefore unavailable or slow to start there",
                        details={"target": target, "coverage": value},
                    )
                )
            elif value == "none":
                out.append(
                    Finding(
                        code="SM-ARCH-NONE",
                        severity=Severity.FAIL,
                        cell=cell,
                        subject=rel,
                        message=f"{rel} has no GPU code that runs on {target} "
                        "(no matching cubin, no "
                        "PTX it can JIT from); use a build that includes this arch",
                        details={"target": target},
                    )
                )
            elif value == "ptx":
                out.append(
                    Finding(
                        code="SM-ARCH-PTX-ONLY",
                        severity=Severity.WARN,
                        cell=cell,
                        subject=rel,
                        message=f"{rel} runs on {target} only through PTX JIT (slow first launch, "
                        "needs a driver at least as new as the toolkit); a build with a native "
                        "cubin avoids it",
                        details={"target": target},
                    )
                )
    return out


def _cuda_findings(
    results: Sequence[_ExtResult], inventory: Inventory, cell: str | None
) -> tuple[list[int], list[Finding]]:
    by_major: dict[int, list[str]] = {}
    for r in results:
        for m in _cuda_majors_of(r):
            by_major.setdefault(m, []).append(r.relpath)
    torch = inventory.get("torch")
    if torch is not None and torch.cuda_major is not None:
        by_major.setdefault(torch.cuda_major, []).insert(0, f"torch {torch.version}")
    majors = sorted(by_major)
    if len(majors) < 2:
        return majors, []
    parts = "; ".join(f"CUDA {m}: {', '.join(v[:4])}" for m, v in sorted(by_major.items()))
    return majors, [
        Finding(
            code="SM-CUDA-MIXED",
            severity=Severity.FAIL,
            cell=cell,
            subject="cuda",
            message=f"one process would load {len(majors)} CUDA majors ({parts}); pick builds of "
            "every package for one CUDA major",
            details={"majors": {str(k): v for k, v in by_major.items()}},
        )
    ]


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


# --- entry points ----------------------------------------------------------------------


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
    feature_found, data["features"] = feature_findings(inventory, environment.env, cell_id)
    findings += feature_found
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
    outcome = _static_check(
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


def _static_check(
    site: Sequence[Path],
    inventory: Inventory,
    ctx: libs.SearchContext,
    *,
    cell_id: str | None,
    targets: Sequence[str],
    resolve: bool,
    host_has_driver: bool,
) -> CheckOutcome:
    index = libs.LibraryIndex()
    optional = coverage.optional_rules()
    results: list[_ExtResult] = []
    findings: list[Finding] = []
    for sp, path in find_extensions(site):
        if _proc.interrupted():
            break  # Ctrl-C: the run is ending and this result will be marked interrupted
        try:
            r = _analyse(sp, path, ctx, index, inventory, resolve=resolve)
        except (OSError, ELFError, ValueError) as exc:
            findings.append(_unreadable(path, exc, cell_id))
            continue
        results.append(r)
        if resolve:
            own = _lib_findings(r, cell_id, host_has_driver) + _symbol_findings(r, cell_id)
            feature = coverage.optional_feature(r.relpath, optional)
            findings += _optional(own, feature) if feature else own
    majors, cuda_findings = _cuda_findings(results, inventory, cell_id)
    findings += cuda_findings
    cov = _coverage(results, targets, coverage.loader_rules(), optional)
    findings += _coverage_findings(cov, cell_id)
    data: dict[str, Any] = {
        "inventory": [d.to_dict() for d in inventory.distributions],
        "cuda_majors": majors,
        "extensions": [_ext_data(r) for r in results],
        **_coverage_data(cov),
        "targets": list(targets),
    }
    return CheckOutcome(verdict=verdict_of(findings), findings=findings, data=data)


def _unreadable(path: Path, exc: Exception, cell: str | None) -> Finding:
    return Finding(
        code="SM-ELF-UNREADABLE",
        severity=Severity.WARN,
        cell=cell,
        subject=str(path),
        message=f"cannot read {path}: {exc}",
    )


def _coverage_data(cov: _Coverage) -> dict[str, Any]:
    return {
        "coverage": cov.per_target,
        "target_summary": cov.summary,
        "not_loaded": cov.not_loaded,
        "optional": cov.optional,
    }


def inspect_path(path: Path, *, targets: Sequence[str]) -> CheckOutcome:
    """`stackmatrix inspect PATH`: a wheel, a .so, a directory or a venv, checked statically.

    Never opens anything but a regular file or a directory (a FIFO would block, a
    device never ends); what holds nothing it can judge gets the verdict
    "nothing-judged" with a finding that says why.
    """
    if path.is_dir():
        return _finish(_inspect_tree(path, targets), path)
    if not path.is_file():
        return _finish(
            _not_inspected(
                path, f"{path} is {_kind_of(path)}, not a file or a directory: nothing was read"
            ),
            path,
        )
    if path.suffix == ".whl":
        return _finish(_inspect_wheel(path, targets), path)
    return _finish(_inspect_files([(path.parent, path)], targets), path)


def _inspect_tree(path: Path, targets: Sequence[str]) -> CheckOutcome:
    venv_site = sorted(path.glob("lib/python3*/site-packages"))
    if not ((path / "pyvenv.cfg").is_file() and venv_site):
        return _inspect_dir(path, targets, resolve=False)
    env = Environment(
        backend="venv",
        python=(str(path / "bin" / "python"),),
        prefix=path,
        site_packages=tuple(venv_site),
    )
    return check_environment(
        env,
        cell_id=None,
        targets=targets,
        cuda=None,
        declared_driver=None,
        log_path=None,
        run_probe=False,
    )


def _inspect_wheel(path: Path, targets: Sequence[str]) -> CheckOutcome:
    with tempfile.TemporaryDirectory(prefix="stackmatrix-whl-") as tmp:
        problem = _extract_wheel(path, Path(tmp))
        if problem is not None:
            return _not_inspected(path, problem, code="SM-WHEEL-UNREADABLE")
        outcome = _inspect_dir(Path(tmp), targets, resolve=False)
        for ext in outcome.data["extensions"]:
            ext["path"] = f"{path}!{ext['relpath']}"  # not the deleted temporary copy
        return outcome


def _kind_of(path: Path) -> str:
    if path.is_fifo():
        return "a FIFO"
    if path.is_char_device() or path.is_block_device():
        return "a device"
    if path.is_socket():
        return "a socket"
    return "missing or unreadable"


def _not_inspected(path: Path, why: str, *, code: str = "SM-NOTHING-JUDGED") -> CheckOutcome:
    finding = Finding(
        code=code,
        severity=Severity.WARN if code != "SM-NOTHING-JUDGED" else Severity.INFO,
        subject=str(path),
        message=why,
    )
    data: dict[str, Any] = {"inventory": [], "extensions": [], "targets": []}
    return CheckOutcome(verdict="nothing-judged", findings=[finding], data=data)


def _finish(outcome: CheckOutcome, path: Path) -> CheckOutcome:
    if not outcome.data.get("extensions") and not outcome.data.get("inventory"):
        outcome = _nothing_judged(outcome, path)
    data = dict(outcome.data)
    data.setdefault("driver", None)
    data.setdefault("probe", None)
    data["inspected"] = str(path)
    data["verdict"] = outcome.verdict
    data["findings"] = [f.to_dict() for f in outcome.findings]
    return CheckOutcome(verdict=outcome.verdict, findings=outcome.findings, data=data)


def _nothing_judged(outcome: CheckOutcome, path: Path) -> CheckOutcome:
    """No extension read and no package found: "compatible" would be a claim about
    nothing (issue 16, defect 16)."""
    findings = list(outcome.findings)
    if not any(f.code == "SM-NOTHING-JUDGED" for f in findings):
        unreadable = any(f.code in ("SM-ELF-UNREADABLE", "SM-WHEEL-UNREADABLE") for f in findings)
        why = (
            "no extension it holds could be read"
            if unreadable
            else "it holds no ELF extension and no installed package (*.dist-info)"
        )
        findings.append(
            Finding(
                code="SM-NOTHING-JUDGED",
                severity=Severity.INFO,
                subject=str(path),
                message=f"nothing to judge in {path}: {why}",
            )
        )
    return CheckOutcome(verdict="nothing-judged", findings=findings, data=outcome.data)


def _inspect_dir(root: Path, targets: Sequence[str], *, resolve: bool) -> CheckOutcome:
    inventory = read_inventory([root])
    ctx = libs.search_context(Path("/"), [root])
    return _static_check(
        [root],
        inventory,
        ctx,
        cell_id=None,
        targets=targets,
        resolve=resolve,
        host_has_driver=False,
    )


def _inspect_files(files: list[tuple[Path, Path]], targets: Sequence[str]) -> CheckOutcome:
    index = libs.LibraryIndex()
    ctx = libs.search_context(Path("/"), [])
    results: list[_ExtResult] = []
    unreadable: list[Finding] = []
    for sp, p in files:
        try:
            results.append(_analyse(sp, p, ctx, index, Inventory(), resolve=False))
        except (OSError, ELFError) as exc:
            unreadable.append(_unreadable(p, exc, None))
    cov = _coverage(results, targets, (), ())
    findings = unreadable + _coverage_findings(cov, None)
    data: dict[str, Any] = {
        "inventory": [],
        "cuda_majors": sorted({m for r in results for m in _cuda_majors_of(r)}),
        "extensions": [_ext_data(r) for r in results],
        **_coverage_data(cov),
        "targets": list(targets),
    }
    return CheckOutcome(verdict=verdict_of(findings), findings=findings, data=data)


# what a corrupt or crafted zip raises on open or extraction
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    NotImplementedError,
    RuntimeError,
    EOFError,
    OSError,
    ValueError,
)


def _extract_wheel(wheel: Path, dest: Path) -> str | None:
    """Only what the checks read: ELF objects and the .dist-info metadata.

    Returns why it is not a readable wheel (None when it is): not a zip, a corrupt
    member, or a zip without a `*.dist-info/WHEEL` (issue 16, defects 13 and 16).
    """
    try:
        with zipfile.ZipFile(wheel) as zf:
            infos = zf.infolist()
            if not any(_is_wheel_file(i.filename) for i in infos):
                return f"{wheel} is a zip without a *.dist-info/WHEEL: not a wheel; nothing judged"
            wanted = [i for i in infos if _wanted(i)]
            too_big = _unpack_bound(wanted, dest)
            if too_big is not None:
                return f"{wheel}: {too_big}; not unpacked"
            for info in wanted:
                zf.extract(info, dest)
    except _ZIP_ERRORS as exc:
        return f"{wheel} is not a readable wheel ({type(exc).__name__}: {exc})"
    return None


# A member may claim no more than this many times its compressed size (real .so files
# compress 2-5x; a 611 KB wheel once unpacked a 600 MB .so; issue 16, defect 10).
MAX_UNPACK_RATIO = 100
_RATIO_FROM = 16 << 20  # members smaller than this are never a problem


def _unpack_bound(infos: Sequence[zipfile.ZipInfo], dest: Path) -> str | None:
    """Why unpacking `infos` is refused: a zip-bomb ratio, or more than the free space.

    zipfile stops each member at its declared size, so the declared sizes bound what
    extraction writes."""
    for info in infos:
        if info.file_size > _RATIO_FROM and info.file_size > MAX_UNPACK_RATIO * max(
            info.compress_size, 1
        ):
            return (
                f"{info.filename} would unpack {info.file_size} bytes from "
                f"{info.compress_size} (over {MAX_UNPACK_RATIO}x: a zip bomb?)"
            )
    total, free = sum(i.file_size for i in infos), shutil.disk_usage(dest).free
    if total > free:
        return f"its extensions unpack to {total} bytes, more than the {free} free in {dest}"
    return None


def _is_wheel_file(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "WHEEL"


def _wanted(info: zipfile.ZipInfo) -> bool:
    name = info.filename
    if info.is_dir() or ".." in Path(name).parts or name.startswith("/"):
        return False
    return name.endswith(".so") or ".so." in name or ".dist-info/" in name
