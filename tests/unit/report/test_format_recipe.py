"""The recipe for a new report format, performed: in a copy of the package, a renderer
module, one entry in report/formats.py and its file name in layout.py (3 files, as
docs/architecture.md says) make `stackmatrix report` write the new file next to the
others, and the results directory's own files are still told from foreign ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.package_copy import perform_in_copy

from stackmatrix import layout
from stackmatrix.report import formats

from ._results import two_equal_cells

RENDERER = '''"""matrix.txt: one line per cell, its id and its verdict."""

from stackmatrix.report.matrix import MatrixReport


def render(report: MatrixReport) -> str:
    return "".join(f"{c.id}: {c.verdict.value}\\n" for c in report.cells)
'''


def _perform(copy: Path) -> None:
    (copy / "report/render_text.py").write_text(RENDERER)
    fmts = copy / "report/formats.py"
    text = fmts.read_text()
    text = text.replace(
        "from stackmatrix.report import render_html,",
        "from stackmatrix.report import render_html, render_text,",
    )
    text = text.replace(
        '    ReportFormat(key="junit", render=render_junit.render),\n',
        '    ReportFormat(key="junit", render=render_junit.render),\n'
        '    ReportFormat(key="text", render=render_text.render),\n',
    )
    fmts.write_text(text)
    lay = copy / "layout.py"
    lay.write_text(
        lay.read_text().replace(
            '    "junit": "junit.xml",\n', '    "junit": "junit.xml",\n    "text": "matrix.txt",\n'
        )
    )


def test_a_new_report_format_touches_three_files_and_is_written(tmp_path: Path) -> None:
    assert [f.key for f in formats.FORMATS] == list(layout.REPORT_FILES)
    site = tmp_path / "site"
    perform_in_copy(site, _perform, ["layout.py", "report/formats.py", "report/render_text.py"])

    rd = two_equal_cells(tmp_path / "run")
    env = {**os.environ, "PYTHONPATH": str(site)}
    argv = [sys.executable, "-m", "stackmatrix", "report", str(rd)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert (rd / "matrix.txt").read_text() == "a: baseline\nb: equivalent\n"
    for name in layout.REPORT_FILES.values():
        assert (rd / name).is_file()
    # the copy's own code ran, not the installed package's
    probe = [sys.executable, "-c", "import stackmatrix.layout as l; print(l.__file__)"]
    where = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=60, check=True)
    assert where.stdout.strip().startswith(str(site))
