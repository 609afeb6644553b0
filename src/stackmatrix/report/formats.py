"""The report formats: each renders the one model (report/matrix.py) as text into its
file of the results directory (layout.REPORT_FILES names it). `build_report` writes
every format of FORMATS, in its order. A new format is a renderer module, an entry here
and its file name in layout.py (tests/unit/report/test_format_recipe.py performs it)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from stackmatrix import layout
from stackmatrix.report import render_html, render_junit, render_md
from stackmatrix.report.matrix import MatrixReport


@dataclass(frozen=True, kw_only=True)
class ReportFormat:
    key: str  # a key of layout.REPORT_FILES
    render: Callable[[MatrixReport], str]

    @property
    def file(self) -> str:
        return layout.REPORT_FILES[self.key]


def _json(report: MatrixReport) -> str:
    return json.dumps(report.to_dict(), indent=2, sort_keys=False, default=str) + "\n"


FORMATS: tuple[ReportFormat, ...] = (
    ReportFormat(key="markdown", render=render_md.render),
    ReportFormat(key="html", render=render_html.render),
    ReportFormat(key="json", render=_json),
    ReportFormat(key="junit", render=render_junit.render),
)
