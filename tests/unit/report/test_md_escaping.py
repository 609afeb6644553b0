"""matrix.md shows what servers and results files report as text, never as HTML or
markdown: `</td><img ...>` or `![p](https://...)` from a server would render in a PR
comment (the HTML report escaped them)."""

from __future__ import annotations

import re
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


IMAGE = "![p](https://evil.example/x.png)"
LINK = "[t](https://evil.example)"


def test_markdown_links_and_images_from_data_do_not_render(tmp_path: Path) -> None:
    defs = {c: {"python": "3.11", "pins": [f"x=={i}"]} for i, c in enumerate("ab")}
    rd = run_dir(tmp_path, cells=["a", "b"], baseline="a", definitions=defs)
    launches = {"a": [[47.1, 47.3], [46.0, 46.5]], "b": [[30.1, 30.3], [30.0, 30.5]]}
    for c, (img, link) in (("a", ("flashinfer", "x")), ("b", (IMAGE, LINK))):
        write(rd / "cells" / c / "build.json", phase(c, "build"))
        config = {"attention_backend": img, "sampling_backend": link}
        bench = bench_data(launches[c], config=config)
        write(rd / "cells" / c / "bench.json", phase(c, "bench", data=bench))
    md = build_report(rd).markdown.read_text()
    assert r"![p\](https://evil.example/x.png)" in md
    assert r"[t\](https://evil.example)" in md
    assert not re.search(r"(?<!\\)\]\(", md), "a link or image from data would render"


def test_escaped_brackets_in_data_cannot_reopen_a_link() -> None:
    from stackmatrix.report.render_md import _md_text

    assert _md_text("[t\\](u)") == "[t\\\\\\](u)"  # a literal backslash, then an escaped ]
    assert _md_text("[r]: https://evil.example") == "[r\\]: https://evil.example"
    assert _md_text("ci [-8.1%, -5.4%] (95%)") == "ci [-8.1%, -5.4%] (95%)"
