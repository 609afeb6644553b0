"""Run history in a local SQLite file: "vs the last run of the same cell" and a trend.

Cells are keyed by their content hash and the spec name, so a cell that changed is a
new series. Re-reporting the same results directory replaces its rows, never adds.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from stackmatrix.errors import ResultsError
from stackmatrix.report.matrix import CellReport, HistoryNote, MatrixReport

SCHEMA_VERSION = 1
_TREND = 8
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cells (
    run_key TEXT NOT NULL,
    cell_id TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    spec_name TEXT NOT NULL,
    created TEXT NOT NULL,
    recorded TEXT NOT NULL,
    metric TEXT NOT NULL,
    value REAL,
    low REAL,
    high REAL,
    verdict TEXT NOT NULL,
    compat TEXT NOT NULL,
    PRIMARY KEY (run_key, cell_id)
);
CREATE INDEX IF NOT EXISTS cells_series ON cells (content_hash, spec_name, metric);
"""


@contextlib.contextmanager
def _connect(db: Path) -> Iterator[sqlite3.Connection]:
    db.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(db)
    except sqlite3.Error as exc:
        raise ResultsError(f"cannot open the history database {db}: {exc}") from exc
    try:
        with conn:
            conn.executescript(_SCHEMA)
            _check_version(conn, db)
            yield conn
    except sqlite3.DatabaseError as exc:
        raise ResultsError(
            f"{db} is not a stackmatrix history database ({exc}); pass another "
            "--history path or move that file away"
        ) from exc
    finally:
        conn.close()


def _check_version(conn: sqlite3.Connection, db: Path) -> None:
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
    elif row[0] != str(SCHEMA_VERSION):
        raise ResultsError(
            f"{db} has history schema_version {row[0]}, this stackmatrix writes "
            f"{SCHEMA_VERSION}; use a new --history file"
        )


def record(db: Path, report: MatrixReport, run_dir: Path) -> dict[str, HistoryNote]:
    """Append `report`'s cells to `db`; return each cell's note against earlier runs."""
    run_key = f"{report.spec_hash}:{report.created}:{run_dir.resolve()}"
    notes: dict[str, HistoryNote] = {}
    with _connect(db) as conn:
        for cell in report.cells:
            if not cell.content_hash:
                continue
            earlier = _earlier(conn, report, cell, run_key)
            notes[cell.id] = _note(earlier, cell)
            _insert(conn, report, cell, run_key)
    return notes


def _earlier(
    conn: sqlite3.Connection, report: MatrixReport, cell: CellReport, run_key: str
) -> list[tuple[str, float | None]]:
    rows = conn.execute(
        "SELECT created, value FROM cells WHERE content_hash = ? AND spec_name = ? "
        "AND metric = ? AND run_key != ? ORDER BY created, recorded",
        (cell.content_hash, report.spec_name, report.headline, run_key),
    ).fetchall()
    return [(str(created), value) for created, value in rows]


def _note(earlier: list[tuple[str, float | None]], cell: CellReport) -> HistoryNote:
    current = cell.headline.center if cell.headline else None
    measured = [(c, v) for c, v in earlier if v is not None]
    if not measured:
        return HistoryNote(previous_value=None, previous_created="", change=None, trend=())
    created, previous = measured[-1]
    trend = [v for _, v in measured[-(_TREND - 1) :]] + ([current] if current else [])
    change = current / previous - 1 if current and previous else None
    return HistoryNote(
        previous_value=previous,
        previous_created=created,
        change=change,
        trend=tuple(float(v) for v in trend),
    )


def _insert(conn: sqlite3.Connection, report: MatrixReport, cell: CellReport, run_key: str) -> None:
    hl = cell.headline
    conn.execute(
        "INSERT OR REPLACE INTO cells VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            run_key,
            cell.id,
            cell.content_hash,
            report.spec_name,
            report.created,
            _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            report.headline,
            hl.center if hl else None,
            hl.low if hl else None,
            hl.high if hl else None,
            cell.verdict.value,
            cell.compat,
        ),
    )
