"""`stackmatrix explain RUN --cell ID` and `[report] explain = true` after `run`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from stackmatrix import _nofollow, _sanitize, layout
from stackmatrix._lock import results_dir_lock
from stackmatrix.errors import ResultsError, StackmatrixError, Unreadable
from stackmatrix.explain.plan import plan_lines
from stackmatrix.explain.roundspec import check
from stackmatrix.explain.runner import RoundRunner, explain_cell
from stackmatrix.pipeline import RunOptions, default_work_dir
from stackmatrix.spec_model import Spec
from stackmatrix.specfile import MAX_LAUNCHES
from stackmatrix.verdict_registry import DIFFERENCES

Progress = Callable[[str, str, str], None]

MATRIX_LIMIT = 64 << 20  # a matrix.json of the 1000-cell limit is a few MiB


def round_runner(
    work_dir: Path, jobs: int, progress: Progress, executor: str | None = None
) -> RoundRunner:
    """Each round is an ordinary run of its derived spec (resumable like any run),
    through the executor a run takes: `executor` (`--executor`), else the spec's
    `[executor] kind`."""
    from stackmatrix.executor import get_executor

    def run_round(spec: Spec, output: Path) -> None:
        check(spec)  # every rule of a spec file holds for the derived one
        opts = RunOptions(
            spec=spec,
            output=output,
            reports_dir=output.parent,
            work_dir=work_dir,
            jobs=jobs,
            resume=True,
        )
        get_executor(executor or spec.executor.kind)(opts, progress)

    return run_round


def explain_main(args: argparse.Namespace, progress: Progress) -> int:
    _check_counts(args)
    work_dir = args.work_dir or default_work_dir()
    runner = round_runner(work_dir, args.jobs, progress, args.executor)
    cells = list(args.cell) or explainable_cells(args.results)
    if not cells:
        print(f"{args.results}: no cell is slower or faster than the baseline; nothing to explain")
        return 0
    if args.plan:
        for cell in cells:
            lines = plan_lines(args.results, cell, args.launches, args.warmup_launches)
            print(_sanitize.text("\n".join(lines)))
        return 0
    # one writer per results directory: a run or another explain resuming it at once
    # would write the same rounds and reports
    with results_dir_lock(args.results):
        for cell in cells:
            path = explain_cell(
                args.results,
                cell,
                run_round=runner,
                launches=args.launches,
                max_rounds=args.rounds,
                warmup=args.warmup,
                warmup_launches=args.warmup_launches,
                rejudge=args.rejudge,
            )
            for line in _nofollow.read_json(path)["sentences"]:
                print(_sanitize.text(line))
        _rerender(args.results)
    return 0


def _check_counts(args: argparse.Namespace) -> None:
    from stackmatrix.errors import UsageError

    for flag, value, least in (
        ("--launches", args.launches, 1),
        ("--rounds", args.rounds, 1),
        ("--warmup", args.warmup, 0),
        ("--warmup-launches", args.warmup_launches, 0),
    ):
        if value is not None and value < least:
            raise UsageError(f"explain {flag} must be at least {least}, not {value}")
    # Each round's derived spec takes these as its bench's launches; said here, before
    # any round is written, and of the option, not of a round's spec file.
    for flag, value in (("--launches", args.launches), ("--warmup-launches", args.warmup_launches)):
        if value is not None and value > MAX_LAUNCHES:
            raise UsageError(f"explain {flag} {value}: at most {MAX_LAUNCHES}")


def explainable_cells(run_dir: Path) -> list[str]:
    """The cells whose verdict is slower or faster, from the run's matrix.json."""
    matrix = run_dir / layout.REPORT_JSON
    try:  # never through a link, never a FIFO or a device, never unbounded
        data = _nofollow.read_json(matrix, limit=MATRIX_LIMIT)
    except Unreadable as exc:
        raise ResultsError(f"{exc} (run `stackmatrix report` to write it)") from exc
    cells = data.get("cells") if isinstance(data, dict) else None
    return [
        str(c["id"]) for c in cells or [] if isinstance(c, dict) and c.get("verdict") in DIFFERENCES
    ]


def explain_after_run(
    run_dir: Path,
    *,
    work_dir: Path,
    jobs: int,
    rounds: int,
    progress: Progress,
    cells: Sequence[str] = (),
    only: Sequence[str] = (),
    executor: str | None = None,
) -> list[Path]:
    """`[report] explain = true`: explain every slower or faster cell (of `only`, when
    given: `explain_cells`; `cells` names them outright), then re-render. A cell
    whose explanation fails is said in the report (its explanation.json) and on stderr;
    the run's own results and status stand."""
    runner = round_runner(work_dir, jobs, progress, executor)
    done: list[Path] = []
    tried = list(cells) or [c for c in explainable_cells(run_dir) if not only or c in only]
    if not tried:
        return done
    with results_dir_lock(run_dir):
        for cell in tried:
            try:
                done.append(explain_cell(run_dir, cell, run_round=runner, max_rounds=rounds))
            except (StackmatrixError, Unreadable) as exc:  # this cell's explain only
                print(_sanitize.text(f"stackmatrix: explain {cell}: {exc}"), file=sys.stderr)
        _rerender(run_dir)
    return done


def _rerender(run_dir: Path) -> None:
    from stackmatrix.report import build_report

    build_report(run_dir)
