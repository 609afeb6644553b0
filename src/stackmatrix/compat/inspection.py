"""`stackmatrix inspect PATH`: a wheel, a .so, a directory or a venv, checked statically.

Light on purpose: a venv is handed to environment.py (imported only then), so
inspecting a wheel or a directory loads neither the probe, the scan cache, the
import-path query, the driver lookup nor the environment backends.
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stackmatrix.compat import coverage, extension, libs, scan
from stackmatrix.compat._elffile import ELFError
from stackmatrix.compat.inventory import Inventory, read_inventory
from stackmatrix.compat.static import CheckOutcome, static_check, verdict_of
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
    from stackmatrix.compat.environment import check_environment
    from stackmatrix.envs.base import Environment

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
            results.append(extension.analyse(sp, p, ctx, index, Inventory(), resolve=False))
        except (OSError, ELFError) as exc:
            unreadable.append(scan.unreadable(p, exc, None))
    cov = extension.coverage_of(results, targets, (), ())
    findings = unreadable + coverage.coverage_findings(cov, None)
    data: dict[str, Any] = {
        "inventory": [],
        "cuda_majors": sorted({m for r in results for m in extension.cuda_majors_of(r)}),
        "extensions": [extension.ext_data(r) for r in results],
        **cov.to_dict(),
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
