"""The static check of a set of import-path directories, and the outcome it returns.

Shared by `check` (environment.py, through the scan cache) and `inspect`
(inspection.py): every extension analysed (extension.py), its findings, the
GPU-arch coverage and CUDA majors across them, folded into one verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

from stackmatrix.check import coverage, extension, libs, missinglibs, relevance, scan
from stackmatrix.check._elftypes import ELFError
from stackmatrix.check.inventory import Inventory
from stackmatrix.findings import Finding, Severity

# "nothing-judged": only `inspect`, for a path holding no readable extension and no
# package (a FIFO, /dev/zero, a zip that is not a wheel)
CheckVerdict = Literal["compatible", "warnings", "incompatible", "nothing-judged"]


class CheckOutcome(NamedTuple):
    verdict: CheckVerdict
    findings: list[Finding]
    data: dict[str, Any]


def verdict_of(findings: Sequence[Finding]) -> CheckVerdict:
    """Any fail -> incompatible, else any warn -> warnings; latent findings (about files
    the serving process does not load, relevance.py) are shown but decide nothing."""
    judged = [f for f in findings if not relevance.is_latent(f)]
    if any(f.severity is Severity.FAIL for f in judged):
        return "incompatible"
    if any(f.severity is Severity.WARN for f in judged):
        return "warnings"
    return "compatible"


def _never() -> bool:
    return False


def static_check(
    site: Sequence[Path],
    inventory: Inventory,
    ctx: libs.SearchContext,
    *,
    cell_id: str | None,
    targets: Sequence[str],
    resolve: bool,
    host_has_driver: bool,
    userland: missinglibs.Userland = "host",
    interrupted: Callable[[], bool] = _never,
) -> CheckOutcome:
    """`userland` says where the server runs: on this host, or in the image whose files
    `site` and `ctx` are (a system library the image lacks is then incompatible).
    `interrupted` is asked before each extension; true ends the scan early. The `check`
    phase passes `_proc.interrupted` (after Ctrl-C its result is marked interrupted
    anyway); `inspect` starts no child for Ctrl-C to stop, keeps the default and so does
    not import `_proc` (subprocess, redaction) at start-up."""
    index = libs.LibraryIndex()
    optional = coverage.optional_rules()
    variants = coverage.cuda_variant_rules()
    torch = inventory.get("torch")
    torch_major = torch.cuda_major if torch is not None else None
    results: list[extension.ExtResult] = []
    unused: set[str] = set()  # builds for another CUDA major than torch's: never loaded
    findings: list[Finding] = []
    owners = missinglibs.Owners.of(inventory, site, userland)
    for sp, path in extension.find_extensions(site):
        if interrupted():
            break  # Ctrl-C: the run is ending and this result will be marked interrupted
        try:
            r = extension.analyse(sp, path, ctx, index, inventory, resolve=resolve)
        except (OSError, ELFError, ValueError) as exc:
            findings.append(scan.unreadable(path, exc, cell_id))
            continue
        results.append(r)
        other_build = coverage.unused_cuda_variant(r.relpath, variants, torch_major)
        if other_build:
            unused.add(r.relpath)
        if resolve:
            own = extension.own_findings(r, cell_id, host_has_driver, owners)
            feature = other_build or coverage.optional_feature(r.relpath, optional)
            findings += extension.optional(own, feature) if feature else own
    loaded = [r for r in results if r.relpath not in unused]
    majors, cuda_findings = extension.cuda_findings(loaded, inventory, cell_id)
    findings += cuda_findings
    cov = extension.coverage_of(results, targets, coverage.loader_rules(), optional)
    findings += extension.arch_findings(results, cov, cell_id)
    data: dict[str, Any] = {
        "inventory": [d.to_dict() for d in inventory.distributions],
        "cuda_majors": majors,
        "extensions": [extension.ext_data(r) for r in results],
        **cov.to_dict(),
        "targets": list(targets),
    }
    return CheckOutcome(verdict=verdict_of(findings), findings=findings, data=data)
