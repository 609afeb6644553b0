"""A cell id or a phase message from a results directory that holds terminal escapes,
a GitHub Actions workflow command or a bidirectional override reaches matrix.md,
matrix.html, junit.xml and the console defused (`_sanitize`)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from stackmatrix._console import Console
from stackmatrix.report import build_report

from ._results import phase, run_dir, write

# sets the terminal's title, starts a line the CI runner obeys, reverses what follows
HOSTILE = "x\x1b]0;x\x07\n::error::pwned\u202eevil"
# a cell directory's name can hold all of it (no '/'): the report lists such a cell
CELL = "c" + HOSTILE
COMMAND = re.compile(r"^[ \t]*::", re.MULTILINE)


def _defused(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert not COMMAND.search(text), "a workflow command would reach the CI runner"
    assert "pwned" in text and "\\u202eevil" in text  # shown, as text


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    defs = {c: {"python": "3.11", "pins": [f"x=={i}"]} for i, c in enumerate("ab")}
    rd = run_dir(tmp_path / "run", cells=["a", "b"], baseline="a", definitions=defs)
    write(rd / "cells" / "a" / "build.json", phase("a", "build"))
    # a lone surrogate (JSON can hold one) could not be written as UTF-8
    failed = phase("b", "build", "failed", code="install_failed", message=HOSTILE + "\ud800")
    write(rd / "cells" / "b" / "build.json", failed)
    write(rd / "cells" / CELL / "build.json", phase(CELL, "build", "failed", message=HOSTILE))
    write(rd / "cells" / CELL / "bench.json", [1])  # unreadable: logged with its cell id
    return rd


def test_hostile_ids_and_messages_are_defused_in_every_report(hostile: Path) -> None:
    outcome = build_report(hostile)
    for path in (outcome.markdown, outcome.html, outcome.junit):
        text = path.read_text(encoding="utf-8")
        _defused(text)
        assert "cx ::error::pwned" in text, path  # the id stays on one line
        assert "\\ud800" in text, path
    _defused(outcome.summary_markdown)  # $GITHUB_STEP_SUMMARY
    ET.parse(outcome.junit)  # noqa: S314 - our own file, written just now


def test_report_on_the_console_is_defused(hostile: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stackmatrix", "report", str(hostile)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "cannot read its bench result" in done.stderr  # the warning naming the cell
    _defused(done.stdout + done.stderr)


def test_progress_and_summary_lines_are_defused() -> None:
    out = io.StringIO()
    console = Console(out)
    console.progress("build", CELL, f"failed: {HOSTILE}")
    console.info(f"  {CELL:<20} build=failed")
    _defused(out.getvalue())
