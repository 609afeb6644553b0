"""`stackmatrix inspect PATH`: a wheel, a .so, a directory or a venv, checked statically.

Light on purpose: a venv is handed to environment.py (imported only then), so
inspecting a wheel or a directory loads neither the probe, the scan cache, the
import-path query, the driver lookup nor the environment backends; a wheel's
unpacking (_wheel.py: zipfile, tempfile) is imported only for a wheel.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stackmatrix.check import extension, libs, scan
from stackmatrix.check._elftypes import ELFError
from stackmatrix.check.inventory import Inventory, read_inventory
from stackmatrix.check.static import CheckOutcome, static_check, verdict_of
from stackmatrix.findings import Finding, Severity


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
    # a venv gets the environment check, which alone needs the import-path query, the
    # driver and the backends: imported here, so a wheel or a directory does not load them
    from stackmatrix.built_environment import Environment
    from stackmatrix.check.environment import check_environment

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
    # zipfile and tempfile only for a wheel: a directory or a .so does not pay for them
    import tempfile

    from stackmatrix.check._wheel import extract_wheel

    with tempfile.TemporaryDirectory(prefix="stackmatrix-whl-") as tmp:
        problem = extract_wheel(path, Path(tmp))
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
    nothing."""
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
    return static_check(
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
    results: list[extension.ExtResult] = []
    unreadable: list[Finding] = []
    for sp, p in files:
        try:
            results.append(
                extension.analyse(sp, p, ctx, index, Inventory(owners={}), resolve=False)
            )
        except (OSError, ELFError) as exc:
            unreadable.append(scan.unreadable(p, exc, None))
    cov = extension.coverage_of(results, targets, (), ())
    findings = unreadable + extension.arch_findings(results, cov, None)
    data: dict[str, Any] = {
        "inventory": [],
        "cuda_majors": sorted({m for r in results for m in extension.cuda_majors_of(r)}),
        "extensions": [extension.ext_data(r) for r in results],
        **cov.to_dict(),
        "targets": list(targets),
    }
    return CheckOutcome(verdict=verdict_of(findings), findings=findings, data=data)
