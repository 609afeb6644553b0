"""junit.xml stays well-formed XML whatever a phase message holds: a server's colour
codes or any other control character made the whole file unreadable to CI."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from stackmatrix.report import build_report

from ._results import phase, run_dir, write

CONTROLS = "".join(chr(c) for c in range(0x20) if chr(c) not in "\t\n\r")
MESSAGE = f"\x1b[31mserver died\x1b[0m {CONTROLS} \x7f\x85\ufffe end"


def test_control_characters_in_a_message_leave_junit_well_formed(tmp_path: Path) -> None:
    defs = {c: {"python": "3.11", "pins": [f"x=={i}"]} for i, c in enumerate("ab")}
    rd = run_dir(tmp_path, cells=["a", "b"], baseline="a", definitions=defs)
    write(rd / "cells" / "a" / "build.json", phase("a", "build"))
    failed = phase("b", "build", status="failed", code="install_failed", message=MESSAGE)
    write(rd / "cells" / "b" / "build.json", failed)
    junit = build_report(rd).junit
    # it raised ParseError: "not well-formed (invalid token)"
    root = ET.parse(junit).getroot()  # noqa: S314 - our own file, written just now
    messages = [f.get("message", "") for f in root.iter("failure")]
    build = next(m for m in messages if "server died" in m)
    assert build.startswith("build failed install_failed: server died ")
    assert "\\x00" in build and "\\x07" in build and "\\ufffe" in build and build.endswith("end")
    assert not any(ch in build for ch in CONTROLS + "\x7f\x85\x1b")
