"""JSON nested 100,000 deep in a results file raised RecursionError (a traceback) in
report and merge: now it is a file that cannot be read, said as any other, and a deep
line in a request file is a bad record, skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stackmatrix import _jsonload
from stackmatrix.cli import main
from stackmatrix.report.load import read_requests

from .test_corrupt_results import results

DEEP = "[" * 100_000 + "]" * 100_000
SAID = "nested more than 64 deep"


def test_depth_is_counted_outside_strings() -> None:
    assert _jsonload.depth('{"a": "[[[[{{", "b": [1, {"c": "\\"[["}]}') == 3
    assert _jsonload.loads("[" * 64 + "]" * 64) is not None
    with pytest.raises(_jsonload.TooDeepError):
        _jsonload.loads("[" * 65 + "]" * 65)
    assert _jsonload.loads('"' + "[" * 1000 + '"') == "[" * 1000  # a string, not nesting


@pytest.mark.parametrize(
    ("name", "rc"), [("run.json", 3), ("plan.json", 0), ("cells/a/bench.json", 0)]
)
def test_a_deep_file_is_unreadable_not_a_crash(
    tmp_path: Path, name: str, rc: int, capsys: pytest.CaptureFixture[str]
) -> None:
    rd = results(tmp_path)
    (rd / name).write_text(DEEP)
    assert main(["report", str(rd)]) == rc
    err = capsys.readouterr().err
    said = err if rc else (rd / "matrix.md").read_text()
    assert SAID in said and name.rsplit("/", 1)[-1] in said


def test_a_deep_request_line_is_a_bad_record(tmp_path: Path) -> None:
    path = tmp_path / "requests-L0-R0.jsonl"
    good = json.dumps({"ttft_s": 0.04, "output_tokens": 3})
    path.write_text(f"{good}\n{DEEP}\n{good}\n")
    assert len(list(read_requests(path))) == 2


def test_a_deep_request_file_line_leaves_the_report(tmp_path: Path) -> None:
    rd = results(tmp_path)
    with (rd / "cells" / "a" / "requests-L0-R0.jsonl").open("a") as fh:
        fh.write(DEEP + "\n")
    assert main(["report", str(rd)]) == 0
