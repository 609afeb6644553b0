"""`build_report`: one results directory in, matrix.{md,html,json} and junit.xml out."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from stackmatrix import _atomic, _nofollow, layout
from stackmatrix.errors import ResultsError, Unreadable
from stackmatrix.records import RunRecord
from stackmatrix.report import formats, history, policy, render_md
from stackmatrix.report.load import load_run
from stackmatrix.report.matrix import MatrixReport
from stackmatrix.report.model import build_model
from stackmatrix.results import RunDir
from stackmatrix.spec_model import SloBound

log = logging.getLogger(__name__)

DEFAULT_HISTORY = Path("reports") / layout.HISTORY_DB


@dataclass(frozen=True, kw_only=True)
class ReportOutcome:
    markdown: Path
    html: Path
    json: Path
    junit: Path
    files: dict[str, Path]  # every format's file, by its key (report/formats.py)
    policy_failures: list[str]
    summary_markdown: str  # for $GITHUB_STEP_SUMMARY: the tables without the details
    report: MatrixReport


def _write(out: Path, paths: dict[str, Path], report: MatrixReport) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for fmt in formats.FORMATS:
        _atomic.write_text(paths[fmt.key], fmt.render(report))


def build_report(
    run_dir: Path,
    *,
    fail_on: Sequence[str] = (),
    history_db: Path | None = None,
    compat: Path | None = None,
    headline: str | None = None,
    out_dir: Path | None = None,
    slo: Sequence[SloBound] | None = None,
) -> ReportOutcome:
    """Write the four outputs into `out_dir` (default `run_dir`) and say which
    --fail-on policies matched.

    `history_db` is the SQLite file this report appends its cells to and reads earlier
    runs from (None: no history). `compat` overrides the directory of the rule files.
    `headline` judges the cells on another recorded metric than the spec's, `slo`
    against other bounds than the spec's `[report] slo` (results of any version).
    """
    try:
        report = build_model(load_run(run_dir), compat=compat, headline=headline, slo=slo)
    except OSError as exc:  # permission denied, a directory where a file belongs...
        raise ResultsError(f"cannot read {exc.filename or run_dir}: {exc.strerror}") from exc
    if out_dir is not None:
        refuse_other_output(run_dir, out_dir)
    if history_db is not None:
        notes = history.record(history_db, report, run_dir)
        report = dataclasses.replace(
            report,
            cells=tuple(dataclasses.replace(c, history=notes.get(c.id)) for c in report.cells),
        )
    out = out_dir or run_dir
    paths = {fmt.key: out / fmt.file for fmt in formats.FORMATS}
    try:
        _write(out, paths, report)
    except OSError as exc:
        raise ResultsError(f"cannot write the report into {out}: {exc}") from exc
    log.info("report written to %s", paths["markdown"])
    return ReportOutcome(
        markdown=paths["markdown"],
        html=paths["html"],
        json=paths["json"],
        junit=paths["junit"],
        files=paths,
        policy_failures=policy.failures(report, fail_on),
        summary_markdown=render_md.render(report, details=False),
        report=report,
    )


# The first line of every matrix.md stackmatrix writes (render_md._title).
_OUR_TITLE = b"## stackmatrix: "


def refuse_other_output(run_dir: Path, out: Path) -> None:
    """`--output OUT` replaces OUT's report files: refused when OUT is the results
    directory of another run, or holds a matrix.md that stackmatrix did not write. A new
    or empty OUT, a copy of `run_dir` and `run_dir` itself are fine."""
    if not out.exists() or (run_dir.exists() and run_dir.samefile(out)):
        return
    if os.path.lexists(out / layout.RUN_JSON) and _run_identity(out) != _run_identity(run_dir):
        raise ResultsError(
            f"--output {out} is the results directory of another run (its {layout.RUN_JSON} "
            f"is not {run_dir}'s): its report would be replaced. Pass a new or empty directory"
        )
    md = out / layout.REPORT_MD
    if os.path.lexists(md) and not _ours(md):
        raise ResultsError(
            f"--output {out} holds a {layout.REPORT_MD} that stackmatrix did not write: it "
            "would be replaced. Pass a new or empty directory, or move that file aside"
        )


def _run_identity(run_dir: Path) -> tuple[str, str, str | None, str] | None:
    """Which run a results directory holds (None: no readable run.json): the same spec,
    CI run and creation time, as in a copy of it."""
    try:
        record = RunRecord.read(RunDir(run_dir))
    except Unreadable:
        return None
    return record.spec_name, record.spec_hash, record.run_id, record.created


def _ours(md: Path) -> bool:
    try:
        return _nofollow.read_bytes(md).startswith(_OUR_TITLE)
    except Unreadable:  # a link, a directory, unreadable: not a report of ours
        return False
