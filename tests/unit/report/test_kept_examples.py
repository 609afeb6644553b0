"""Every kept report under reports/examples/ is what today's code reports from its
results: each is re-reported into a copy, as reports/examples/reports.toml says it was
made, and compared byte for byte (scripts/rereport-examples.py rewrites them)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from stackmatrix.cli import main as cli

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "reports" / "examples"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "rereport", ROOT / "scripts" / "rereport-examples.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REREPORT = _script()
ENTRIES = REREPORT.entries()


def _name(entry: dict[str, object]) -> str:
    return str(entry.get("output") or entry["results"])


def test_every_kept_report_is_listed() -> None:
    """A matrix.md with results beside it that the manifest does not list would never be
    checked: every results directory (run.json) is a `results` or an `output`."""
    listed = {_name(e) for e in ENTRIES}
    kept = {
        p.parent.relative_to(EXAMPLES).as_posix()
        for p in EXAMPLES.rglob("matrix.md")
        if (p.parent / "run.json").exists()
    }
    assert kept - listed == set()


@pytest.mark.parametrize("entry", ENTRIES, ids=_name)
def test_a_kept_report_is_what_the_code_reports(entry: dict[str, object], tmp_path: Path) -> None:
    results = Path(str(entry["results"]))
    output = Path(str(entry["output"])) if entry.get("output") else None
    copy = tmp_path / "examples"
    shutil.copytree(EXAMPLES / results, copy / results, symlinks=True)
    if output is not None and not (copy / output).exists():
        shutil.copytree(EXAMPLES / output, copy / output, symlinks=True)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    args = REREPORT.argv(entry, copy / results, copy / output if output else None, scratch)
    assert cli(args) == 0
    where = output or results
    for name in REREPORT.OUTPUTS:
        kept = (EXAMPLES / where / name).read_bytes()
        assert (copy / where / name).read_bytes() == kept, (
            f"{where}/{name} is not what the code reports from its results; "
            "run scripts/rereport-examples.py and review the diff"
        )
