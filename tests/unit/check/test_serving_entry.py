"""The server's own entry module failing to import in the probe (check/probe.py): a
cell whose server cannot start is refused before any GPU time, while an entry that only
needs the driver's libcuda.so.1 (absent on a machine without a GPU) stays information.
A real probe run on packages written here: `srv` is the server's entry, `srvlight` a
lighter module of the same engine that imports."""

from __future__ import annotations

import sys
from pathlib import Path

from stackmatrix.built_environment import Environment
from stackmatrix.check.phase import CheckOutcome, check_environment
from stackmatrix.findings import Severity


def _check(tmp_path: Path, srv_init: str, entries: list[str]) -> CheckOutcome:
    site = tmp_path / "site-packages"
    for name, init in (("srv", srv_init), ("srvlight", "")):
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text(init)
    env = Environment(
        backend="venv",
        python=(sys.executable, "-S"),
        site_packages=(site,),
        env={"PYTHONPATH": str(site)},
    )
    return check_environment(
        env,
        cell_id="c",
        targets=["sm_90"],
        cuda=None,
        declared_driver="580.95.05",
        log_path=None,
        serving_modules=entries,
    )


def _codes(outcome: CheckOutcome) -> dict[str, Severity]:
    return {f.code: f.severity for f in outcome.findings if f.code.startswith("SM-SERVING")}


def test_an_entry_that_raises_makes_the_cell_incompatible(tmp_path: Path) -> None:
    # the error transformers 5.6 raised at sglang 0.5.12's http_server import with the
    # `kernels` release PyPI resolved (reports/examples/cuda-images, cell cu130)
    outcome = _check(
        tmp_path,
        "raise ValueError('Either a revision or a version must be specified.')\n",
        ["srv", "srvlight"],
    )
    failed = [f for f in outcome.findings if f.code == "SM-SERVING-IMPORT-FAILED"]
    assert len(failed) == 1 and failed[0].severity is Severity.FAIL
    assert failed[0].subject == "srv"
    assert "Either a revision or a version must be specified" in failed[0].message
    assert outcome.verdict == "incompatible"
    assert outcome.data["probe"]["serving"]["imported"] == "srvlight"


def test_an_entry_that_needs_only_the_driver_is_information(tmp_path: Path) -> None:
    outcome = _check(
        tmp_path,
        "raise ImportError('libcuda.so.1: cannot open shared object file: No such file or "
        "directory')\n",
        ["srv", "srvlight"],
    )
    assert _codes(outcome) == {"SM-SERVING-PARTIAL": Severity.INFO}
    partial = next(f for f in outcome.findings if f.code == "SM-SERVING-PARTIAL")
    assert "srvlight" in partial.message and partial.subject == "srv"
    assert outcome.verdict == "compatible"


def test_an_entry_absent_from_this_version_is_no_failure(tmp_path: Path) -> None:
    outcome = _check(tmp_path, "", ["srv_not_in_this_version", "srvlight"])
    assert _codes(outcome) == {}
    assert outcome.verdict == "compatible"


def test_an_entry_that_imports_needs_nothing_said(tmp_path: Path) -> None:
    outcome = _check(tmp_path, "", ["srv", "srvlight"])
    assert _codes(outcome) == {}
    assert outcome.data["probe"]["serving"]["imported"] == "srv"


def test_a_subpackage_absent_from_this_version_is_no_failure(tmp_path: Path) -> None:
    # an engine release whose package has no `entrypoints` subpackage yet
    outcome = _check(tmp_path, "", ["srv.entrypoints.http", "srvlight"])
    assert _codes(outcome) == {}
    assert outcome.data["probe"]["serving"]["imported"] == "srvlight"


def test_an_engine_that_is_not_installed_cannot_serve(tmp_path: Path) -> None:
    # the cuda-images `trap` cell: torch, sgl-kernel and flashinfer, no sglang
    outcome = _check(tmp_path, "", ["noengine.srt.http_server", "srvlight"])
    failed = [f for f in outcome.findings if f.code == "SM-SERVING-IMPORT-FAILED"]
    assert len(failed) == 1 and "No module named 'noengine'" in failed[0].message
    assert outcome.verdict == "incompatible"
