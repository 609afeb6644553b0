#!/usr/bin/env python3
"""Rewrite the kept reports of reports/examples/ from their results, as
reports/examples/reports.toml says each is made (its results directory, where the report
goes, the arguments of `stackmatrix report`, and whether it was made with a new history
file). tests/unit/report/test_kept_examples.py re-reports each into a copy and compares
the bytes, so a change of the report's wording fails there until this has run.

    python scripts/rereport-examples.py [NAME ...]     (NAME: a `results` of reports.toml)
"""

from __future__ import annotations

import sys
import tempfile
import tomllib
from pathlib import Path

from stackmatrix import layout

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "reports" / "examples"
MANIFEST = EXAMPLES / "reports.toml"
OUTPUTS = tuple(layout.REPORT_FILES.values())


def entries() -> list[dict[str, object]]:
    with MANIFEST.open("rb") as f:
        return list(tomllib.load(f)["report"])


def argv(entry: dict[str, object], results: Path, output: Path | None, scratch: Path) -> list[str]:
    """`stackmatrix report` arguments for this entry, its results at `results`."""
    out = ["report", str(results)]
    args = entry.get("args", [])
    out += [str(a) for a in args] if isinstance(args, list) else []
    if output is not None:
        out += ["--output", str(output)]
    if entry.get("history"):
        out += ["--history", str(scratch / "history.sqlite")]
    return out


def main(names: list[str]) -> int:
    from stackmatrix.cli import main as cli

    for entry in entries():
        if names and entry["results"] not in names:
            continue
        results = EXAMPLES / str(entry["results"])
        output = EXAMPLES / str(entry["output"]) if entry.get("output") else None
        with tempfile.TemporaryDirectory() as scratch:
            code = cli(argv(entry, results, output, Path(scratch)))
        where = output or results
        print(f"{where.relative_to(EXAMPLES)}: {'ok' if code == 0 else f'exit {code}'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
