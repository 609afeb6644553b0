"""matrix.md shows what servers and results files report as text, never as HTML
(issue 16, item 17: `</td><img ...>` from a server was embedded as is; the HTML
report escaped it)."""

from __future__ import annotations

from pathlib import Path

from stackmatrix.report import build_report

from ._results import bench_data, phase, run_dir, write

PLANTED = "</td><img src=x onerror=alert(1)>"


def test_server_reported_values_are_escaped_in_markdown(tmp_path: Path) -> None:
    defs = {c: {"python": "3.11", "pins": [f"x=={i}"]} for i, c in enumerate("ab")}
    rd = run_dir(tmp_path, cells=["a", "b"], baseline="a", definitions=defs)
    for c, backend in (("a", "flashinfer"), ("b", PLANTED)):
        write(rd / "cells" / c / "build.json", phase(c, "build"))
        bench = bench_data([[47.1, 47.3], [46.0, 46.5]], config={"attention_backend": backend})
        write(rd / "cells" / c / "bench.json", phase(c, "bench", data=bench))
    write(rd / "cells" / "b" / "check.json", {"weird": PLANTED})  # a problem naming it
    md = build_report(rd).markdown.read_text()
    assert "&lt;/td>&lt;img src=x onerror=alert(1)>" in md
    assert "<img" not in md and "</td>" not in md
