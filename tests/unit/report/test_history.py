import sqlite3
from pathlib import Path

import pytest
from tests.support.synthetic import story_cells, write_run

from stackmatrix.errors import ResultsError
from stackmatrix.report import build_report
from stackmatrix.report.matrix import HistoryNote


def _run(tmp_path: Path, name: str, seed: int) -> Path:
    return write_run(
        tmp_path / name,
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(launches=3),
        targets=["sm_120"],
        seed=seed,
    )


def _history(note: HistoryNote | None) -> HistoryNote:
    assert note is not None
    return note


def test_vs_last_run_and_trend(tmp_path):
    db = tmp_path / "history.sqlite"
    first = build_report(_run(tmp_path, "r1", 1), history_db=db).report
    first_note = first.cell("cu130").history
    assert first_note is not None
    assert first_note.previous_value is None
    assert "first run" in (tmp_path / "r1" / "matrix.md").read_text()

    second = build_report(_run(tmp_path, "r2", 2), history_db=db).report
    note = _history(second.cell("cu130").history)
    first_headline = first.cell("cu130").headline
    assert first_headline is not None
    assert note.previous_value == pytest.approx(first_headline.center)
    second_headline = second.cell("cu130").headline
    assert second_headline is not None and note.previous_value is not None
    expected = second_headline.center / note.previous_value - 1
    assert note.change == pytest.approx(expected)

    third = build_report(_run(tmp_path, "r3", 3), history_db=db).report
    assert len(_history(third.cell("cu130").history).trend) == 3
    md = (tmp_path / "r3" / "matrix.md").read_text()
    assert any(ch in md for ch in "▁▂▃▄▅▆▇█")


def test_rereporting_the_same_run_does_not_add_rows(tmp_path):
    db = tmp_path / "history.sqlite"
    run = _run(tmp_path, "r1", 1)
    build_report(run, history_db=db)
    again = build_report(run, history_db=db).report
    assert _history(again.cell("cu128").history).previous_value is None
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM cells").fetchone()[0] == 2


def test_a_changed_cell_starts_a_new_series(tmp_path):
    db = tmp_path / "history.sqlite"
    build_report(_run(tmp_path, "r1", 1), history_db=db)
    base, cu130 = story_cells(launches=3)
    changed = type(cu130)(
        **{**cu130.__dict__, "definition": {**cu130.definition, "python": "3.13"}}
    )
    run = write_run(
        tmp_path / "r2",
        spec_name="kimi",
        baseline="cu128",
        cells=[base, changed],
        targets=["sm_120"],
        seed=2,
    )
    report = build_report(run, history_db=db).report
    assert _history(report.cell("cu128").history).previous_value is not None
    assert _history(report.cell("cu130").history).previous_value is None


def test_a_foreign_file_is_an_actionable_error(tmp_path):
    db = tmp_path / "history.sqlite"
    db.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(ResultsError, match="not a stackmatrix history database"):
        build_report(_run(tmp_path, "r1", 1), history_db=db)
