"""Per-extension static analysis and the findings built from it.

Discovery of the ELF extensions of an import path, what one extension needs and
lacks (libraries, symbols, symbol versions, C++ ABI), and what a set of them covers
(GPU archs per target, CUDA majors). `static.py` runs these over a tree.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackmatrix.compat import coverage, libs, symbols
from stackmatrix.compat._elffile import is_elf
from stackmatrix.compat.inventory import Inventory
from stackmatrix.compat.scan import ExtensionScan, scan_extension
from stackmatrix.findings import Finding, Severity

# libraries that wheels of the stack provide (torch, nvidia-*, their vendored copies);
# anything else a needed closure lacks is the host's or the base image's to provide
_STACK_LIB = re.compile(
    r"^lib(?:c10|torch|shm|cudart|cublas|cublasLt|cufft|curand|cusolver|cusparse|cudnn|nccl|"
    r"nvrtc|nvJitLink|cupti|nvToolsExt|cufile|nvshmem|cusparseLt|mscclpp)"
)
_SKIP_DIRS = ("nvidia/", "torch/lib/")


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
class ExtResult:
    scan: ExtensionScan
    relpath: str
    package: str | None
    closure: libs.Closure
    report: symbols.SymbolReport
    versions: tuple[symbols.VersionProblem, ...]


def analyse(
    sp: Path,
    path: Path,
    ctx: libs.SearchContext,
    index: libs.LibraryIndex,
    inventory: Inventory,
    *,
    resolve: bool,
) -> ExtResult:
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
    return ExtResult(
        scan=scan,
        relpath=rel,
        package=inventory.owner_of(rel),
        closure=closure,
        report=report,
        versions=versions,
    )


def ext_data(r: ExtResult) -> dict[str, Any]:
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
        "cuda_majors": sorted(cuda_majors_of(r)),
    }


def cuda_majors_of(r: ExtResult) -> set[int]:
    # the extension's own DT_NEEDED: its closure includes torch's libraries, whose
    # major is counted once, for torch
    names = set(r.scan.dynamic.needed)
    return {m for n in names if (m := libs.cuda_major_of_soname(n)) is not None}


# --- findings -------------------------------------------------------------------------


def lib_findings(r: ExtResult, cell: str | None, host_has_driver: bool) -> list[Finding]:
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


def optional(findings: list[Finding], feature: str) -> list[Finding]:
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


def _linked_provider(r: ExtResult, groups: list[symbols.UnresolvedGroup]) -> bool:
    """Whether the expected provider of some missing symbols is in the needed closure."""
    needed = set(r.closure.resolved)
    return any(
        g.provider != "unknown" and any(n.startswith(g.provider) for n in needed) for g in groups
    )


def symbol_findings(r: ExtResult, cell: str | None) -> list[Finding]:
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


def unreadable(path: Path, exc: Exception, cell: str | None) -> Finding:
    return Finding(
        code="SM-ELF-UNREADABLE",
        severity=Severity.WARN,
        cell=cell,
        subject=str(path),
        message=f"cannot read {path}: {exc}",
    )


# --- across extensions: GPU-arch coverage, CUDA majors ------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Coverage:
    per_target: dict[str, dict[str, str]]
    summary: dict[str, str]
    not_loaded: dict[str, list[str]]
    optional: dict[str, str]  # relpath -> feature it serves


def coverage_of(
    results: Sequence[ExtResult],
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


def coverage_findings(cov: _Coverage, cell: str | None) -> list[Finding]:
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


def coverage_data(cov: _Coverage) -> dict[str, Any]:
    return {
        "coverage": cov.per_target,
        "target_summary": cov.summary,
        "not_loaded": cov.not_loaded,
        "optional": cov.optional,
    }


def cuda_findings(
    results: Sequence[ExtResult], inventory: Inventory, cell: str | None
) -> tuple[list[int], list[Finding]]:
    by_major: dict[int, list[str]] = {}
    for r in results:
        for m in cuda_majors_of(r):
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
