"""A cell measured after (or before) the baseline, not interleaved with it, gets a note:
drift between the two periods is part of its comparison (flashmla on the H200)."""

from __future__ import annotations

from pathlib import Path

from stackmatrix.report import build_report
from stackmatrix.report.load import load_run
from stackmatrix.report.model import build_model

from ._results import bench_data, phase, run_dir, write

ROOT = Path(__file__).resolve().parents[3]


def _times(rd: Path, cell: str, minutes: list[int]) -> None:
    bench = bench_data([[10.0]] * len(minutes), config={"attention_backend": "sdpa"})
    for launch, minute in zip(bench["launches"], minutes, strict=True):
        launch["started"] = f"2026-12-01T10:{minute:02d}:00+00:00"
        launch["finished"] = f"2026-12-01T10:{minute:02d}:40+00:00"
    write(rd / "cells" / cell / "bench.json", phase(cell, "bench", data=bench))


def _notes(tmp_path: Path, a: list[int], b: list[int]) -> list[str]:
    defs = {c: {"python": "3.11", "pins": ["x==1"]} for c in "ab"}
    rd = run_dir(tmp_path, cells=["a", "b"], baseline="a", definitions=defs)
    for cell, minutes in (("a", a), ("b", b)):
        write(rd / "cells" / cell / "build.json", phase(cell, "build"))
        _times(rd, cell, minutes)
    return [n for n in build_report(rd).report.notes if "not interleaved" in n]


def test_a_cell_measured_after_the_baseline(tmp_path: Path) -> None:
    (note,) = _notes(tmp_path / "after", [0, 2, 4], [10, 12, 14])
    assert note.startswith("b: its measured launches ran after the baseline's (")
    assert "2026-12-01 10:10-10:14 UTC against 2026-12-01 10:00-10:04 UTC" in note
    (note,) = _notes(tmp_path / "before", [10, 12, 14], [0, 2, 4])
    assert "ran before the baseline's" in note


def test_interleaved_or_too_few_launches_say_nothing(tmp_path: Path) -> None:
    assert _notes(tmp_path / "interleaved", [0, 2, 4], [1, 3, 5]) == []
    assert _notes(tmp_path / "overlap", [0, 2, 4], [3, 8, 9]) == []
    assert _notes(tmp_path / "one", [0], [10]) == []  # any order is before or after


def test_the_h200_run_flags_flashmla_only() -> None:
    model = build_model(load_run(ROOT / "reports" / "examples" / "h200-sglang"))
    flagged = [n.split(":")[0] for n in model.notes if "not interleaved" in n]
    assert flagged == ["flashmla"]
