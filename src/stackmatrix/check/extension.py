"""Per-extension static analysis: discovery, then each analysis over one extension.

Discovery of the ELF extensions of an import path, what one extension needs and
lacks (libraries, symbols, symbol versions, C++ ABI), and what a set of them covers
(GPU archs per target, CUDA majors). Each analysis module builds its own findings
(libs, symbols, coverage); this module only feeds them. `static.py` runs these over
a tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from stackmatrix.check import coverage, kernels, libs, missinglibs, symbols
from stackmatrix.check._elffile import is_elf
from stackmatrix.check.inventory import Inventory
from stackmatrix.check.scan import ExtensionScan, scan_extension
from stackmatrix.findings import Finding, Severity

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


class ExtResult(NamedTuple):
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
    scan = scan_extension(path, with_symbols=resolve)  # names are read only to resolve them
    rel = path.relative_to(sp).as_posix()
    closure = (
        libs.needed_closure(path, ctx, index) if resolve else libs.Closure(resolved={}, missing={})
    )
    report = (
        symbols.check_symbols(scan.symbols, closure.resolved, closure.missing, index)
        if resolve
        else symbols.SymbolReport(undefined_count=scan.undefined_count)
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


def own_findings(
    r: ExtResult, cell: str | None, host_has_driver: bool, owners: missinglibs.Owners
) -> list[Finding]:
    """What one extension's libraries and symbols lack (missinglibs.py, symbols.py)."""
    found = missinglibs.lib_findings(
        r.closure, r.relpath, cell, host_has_driver=host_has_driver, owners=owners
    )
    return found + symbols.symbol_findings(r.report, r.versions, r.closure, r.relpath, cell)


def optional(findings: list[Finding], feature: str) -> list[Finding]:
    """An extension its package loads only for one feature (loaders.toml [[optional]]):
    what keeps it from loading costs that feature, not the stack. Same codes, as info."""
    return [
        f._replace(
            severity=Severity.INFO,
            message=f"{f.message} (optional: only {feature} is unavailable)",
            details={**f.details, "optional_feature": feature},
        )
        if f.severity is not Severity.INFO
        else f
        for f in findings
    ]


# --- across extensions: GPU-arch coverage, CUDA majors ------------------------------------


def coverage_of(
    results: Sequence[ExtResult],
    targets: Sequence[str],
    rules: Sequence[coverage.LoaderRule],
    optional: Sequence[coverage.OptionalRule],
) -> coverage.ArchCoverage:
    return coverage.coverage_of(
        [(r.relpath, r.scan.fatbin) for r in results], targets, rules, optional
    )


def arch_findings(
    results: Sequence[ExtResult], cov: coverage.ArchCoverage, cell: str | None
) -> list[Finding]:
    """Each file's coverage of each target (coverage.py), then its kernels' (kernels.py)."""
    files = [
        (r.relpath, r.scan.path, r.scan.fatbin) for r in results if r.relpath not in cov.optional
    ]
    return coverage.coverage_findings(cov, cell) + kernels.kernel_findings(
        files, cov.per_target, cell
    )


def cuda_findings(
    results: Sequence[ExtResult], inventory: Inventory, cell: str | None
) -> tuple[list[int], list[Finding]]:
    """The CUDA majors one process would load (torch's first), and SM-CUDA-MIXED."""
    by_major: dict[int, list[str]] = {}
    for r in results:
        for m in cuda_majors_of(r):
            by_major.setdefault(m, []).append(r.relpath)
    torch = inventory.get("torch")
    if torch is not None and torch.cuda_major is not None:
        by_major.setdefault(torch.cuda_major, []).insert(0, f"torch {torch.version}")
    return sorted(by_major), libs.cuda_mixed_findings(by_major, cell)
