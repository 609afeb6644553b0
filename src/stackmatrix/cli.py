"""The `stackmatrix` command line. Only `main` catches StackmatrixError."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackmatrix import __version__, _log, _signals, layout
from stackmatrix.errors import NothingJudged, StackmatrixError, Unreadable, UsageError
from stackmatrix.spec_names import BACKENDS, EXECUTORS, FAIL_ON, ORDERS, PIPELINE_PHASES

if TYPE_CHECKING:
    import argparse


# Each command imports what it needs when it runs: `inspect` and `--help` do not pay for
# the pipeline, the spec parser or the report.
ALL_PHASES = PIPELINE_PHASES
_FAIL_ON_MEANING = {
    "incompatible": "a cell's check verdict is incompatible",
    "regression": "slower than the baseline on the headline metric",
    "failed": "a phase failed, was interrupted or is unreadable",
    "goodput-regression": "goodput at the headline load (requests within the SLO per second) "
    "slower than the baseline's",
    "slo-load-regression": "the largest load that meets the SLO in every launch is below the "
    "baseline's",
}
FAIL_ON_HELP = "comma-separated; exit 5 when one matches: " + "; ".join(
    f"{name}: {_FAIL_ON_MEANING[name]}" for name in FAIL_ON
)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _plain_inspect(argv) or _parser(_command_word(argv)).parse_args(argv)
    # inspect's modules log through _log, set up by their first message
    _log.configure(args.verbose, now=args.command != "inspect")
    try:
        with _signals.stop_signals():  # SIGTERM/SIGHUP clean up as Ctrl-C does
            return int(args.func(args))
    except (StackmatrixError, Unreadable) as exc:  # a file the command needed: exit 3
        from stackmatrix import _sanitize  # a message may quote an id from results

        print(f"stackmatrix: error: {_sanitize.text(exc.message)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        # only the commands that have --resume may suggest it (inspect has none)
        hint = "; completed work is kept, re-run with --resume" if hasattr(args, "resume") else ""
        print(f"stackmatrix: interrupted ({_signals.name(exc)}){hint}", file=sys.stderr)
        return _signals.exit_code(exc)


def _command_word(argv: Sequence[str]) -> str | None:
    """The command, when nothing but -v precedes it (then no main-parser option, such
    as -h, needs the other commands)."""
    return next((a for a in argv if a not in ("-v", "--verbose")), None)


def _plain_inspect(argv: Sequence[str]) -> _Args | None:
    """`[-v] inspect PATH [--target sm_XY]... [--json]` read without argparse, whose import
    and parser were a sixth of inspect's whole process. Any other form
    (help, an abbreviation, `--`, a mistake) is None: argparse reads it and says what is
    wrong. tests/unit/check/test_inspect_startup.py holds the two readings equal."""
    words = list(argv)
    verbose = False
    while words and words[0] in ("-v", "--verbose"):
        verbose, words = True, words[1:]
    if not words or words[0] != "inspect":
        return None
    path, targets, as_json = None, [], False
    rest = iter(words[1:])
    for word in rest:
        if word == "--json":
            as_json = True
        elif word == "--target" or word.startswith("--target="):
            value = word[len("--target=") :] if "=" in word else next(rest, None)
            if value is None or value.startswith("-"):
                return None
            targets.append(value)
        elif word.startswith("-") or path is not None:
            return None
        else:
            path = Path(word)
    if path is None:
        return None
    return _Args(
        verbose=verbose,
        command="inspect",
        path=path,
        target=targets,
        json=as_json,
        func=cmd_inspect,
    )


class _Args:
    """What argparse's Namespace holds, without importing argparse."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    def __getattr__(self, name: str) -> Any:  # as argparse.Namespace is typed
        raise AttributeError(name)


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    import argparse

    from stackmatrix import _commands

    p = argparse.ArgumentParser(prog="stackmatrix", description=__doc__)
    p.add_argument("--version", action="version", version=f"stackmatrix {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if command == "inspect":
        # its sub-parser alone: the other thirteen were a tenth of inspect's run;
        # its usage, help and errors name only the main parser
        _add_inspect(sub)
        return p

    v = sub.add_parser("validate", help="check a matrix spec and report every problem")
    v.add_argument("spec", type=Path)
    v.set_defaults(func=_commands.cmd_validate)

    pl = sub.add_parser("plan", help="show the cells a spec expands to")
    pl.add_argument("spec", type=Path)
    fmt = pl.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="machine-readable plan")
    fmt.add_argument(
        "--github-matrix",
        action="store_true",
        help="the JSON a GitHub Actions strategy.matrix takes",
    )
    pl.add_argument(
        "--default-runner",
        default="ubuntu-latest",
        help="runner label for cells without runs_on (default: %(default)s)",
    )
    pl.set_defaults(func=_commands.cmd_plan)

    for name in ("run", *ALL_PHASES[:-1]):
        sp = sub.add_parser(name, help="all phases" if name == "run" else f"the {name} phase")
        _run_args(sp)
        sp.set_defaults(func=_commands.cmd_run, phases=ALL_PHASES if name == "run" else (name,))
        if name == "run":
            _executor_arg(sp, "the launches")

    _add_report(sub)

    _optional_commands(sub)
    _add_block(sub)
    return p


def _executor_arg(parser: argparse.ArgumentParser, what: str) -> None:
    """`--executor`, for every command that measures: run, calibrate, explain."""
    parser.add_argument(
        "--executor",
        choices=EXECUTORS,
        default=None,
        help=f"where {what} run: this host, or Slurm jobs (default: the spec's "
        "[executor] kind, else local)",
    )


def _add_report(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from stackmatrix import _commands
    from stackmatrix.metric_registry import HEADLINES  # a dataclass: not for `inspect`

    r = sub.add_parser("report", help="render the report of a results directory")
    r.add_argument("results", type=Path)
    r.add_argument("--fail-on", default="", help=FAIL_ON_HELP)
    r.add_argument("--history", type=Path, default=None, help="SQLite history file")
    r.add_argument(
        "--headline",
        choices=HEADLINES,
        default=None,
        help="judge the cells on this recorded metric instead of the spec's headline",
    )
    r.add_argument(
        "--slo",
        action="append",
        default=[],
        metavar="KEY=MS",
        help="judge goodput and the frontier against this bound instead of the spec's "
        "[report] slo (repeatable or comma-separated: ttft_p99_ms=2000,tpot_p99_ms=50)",
    )
    r.add_argument(
        "--output", type=Path, default=None, help="write the report here (default: RESULTS)"
    )
    r.set_defaults(func=_commands.cmd_report)


def _add_block(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from stackmatrix import _commands

    """`_block`: what a Slurm job of `run --executor slurm` runs on its node (no help
    text: it is not a command for people, and is not listed)."""
    b = sub.add_parser("_block")
    _run_args(b)
    b.add_argument("--block", type=int, required=True)
    b.add_argument("--order-seed", type=int, required=True)
    b.set_defaults(func=_commands.cmd_block, phases=ALL_PHASES)


def _run_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("spec", type=Path)
    sp.add_argument(
        "--cell", action="append", default=[], metavar="ID", help="only this cell (repeatable)"
    )
    sp.add_argument(
        "--output",
        type=Path,
        default=None,
        help="results directory (default: a new one under --reports-dir)",
    )
    sp.add_argument("--reports-dir", type=Path, default=Path("reports"))
    sp.add_argument(
        "--history",
        type=Path,
        default=None,
        help=f"SQLite history file (default: REPORTS_DIR/{layout.HISTORY_DB} for a results "
        "directory inside --reports-dir; none for an --output elsewhere)",
    )
    sp.add_argument(
        "--work-dir",
        type=_work_dir,
        default=None,
        help="where environments are kept (default: $STACKMATRIX_WORK_DIR or ~/.cache/stackmatrix)",
    )
    sp.add_argument(
        "--jobs", type=_positive_int, default=2, help="cells built and checked at once (default: 2)"
    )
    sp.add_argument(
        "--resume",
        action="store_true",
        help="continue the latest run of this spec (or --output DIR)",
    )
    sp.add_argument("--force", action="store_true", help="bench cells even if incompatible")
    sp.add_argument(
        "--backend",
        choices=BACKENDS,
        default=None,
        help="override every cell's backend",
    )
    sp.add_argument("--order", choices=ORDERS, default=None)
    sp.add_argument("--fail-on", default="", help=FAIL_ON_HELP)


def _positive_int(text: str) -> int:
    """--jobs: a count of at least one (0 would start no worker and hang)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _work_dir(text: str) -> Path:
    import argparse

    from stackmatrix._workdir import work_dir_problem

    problem = work_dir_problem(Path(text))
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return Path(text)


def _optional_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from stackmatrix import _commands

    """Commands whose implementation lives in the compat/bench/report packages."""
    _add_inspect(sub)

    pr = sub.add_parser("probe", help="runtime facts of this interpreter (torch, CUDA, GPUs)")
    pr.add_argument("rest", nargs="...")
    pr.set_defaults(func=_commands.cmd_probe)

    tm = sub.add_parser("tiny-model", help="write a tiny random Llama + tokenizer (tests, CPU)")
    tm.add_argument("rest", nargs="...")
    tm.set_defaults(func=_commands.cmd_tiny_model)

    cal = sub.add_parser("calibrate", help="A/A noise calibration of one cell")
    _run_args(cal)
    cal.add_argument("--launches", type=int, default=5)
    _executor_arg(cal, "its launches")
    cal.set_defaults(func=_commands.cmd_calibrate)

    ex = sub.add_parser("explain", help="measure which difference causes a cell's verdict")
    ex.add_argument("results", type=Path, help="a results directory with a report")
    ex.add_argument("--cell", action="append", default=[], help="default: every slower/faster cell")
    ex.add_argument("--launches", type=int, default=None, help="launches per cell per round")
    ex.add_argument("--rounds", type=int, default=4, help="at most this many rounds per cell")
    ex.add_argument("--jobs", type=_positive_int, default=2)
    ex.add_argument("--work-dir", type=_work_dir, default=None)
    warmup_help = "warm-up requests per launch in the rounds (default: the run's)"
    ex.add_argument("--warmup", type=int, default=None, help=warmup_help)
    launches_help = "warm-up launches per cell in the rounds (default: the run's, at least 1)"
    ex.add_argument("--warmup-launches", type=int, default=None, help=launches_help)
    plan_help = "print the reverts and the first round's cost; measure nothing"
    ex.add_argument("--plan", action="store_true", help=plan_help)
    rejudge_help = "judge the rounds kept under RUN/explain/ again; measure nothing"
    ex.add_argument("--rejudge", action="store_true", help=rejudge_help)
    _executor_arg(ex, "the rounds' launches")
    ex.set_defaults(func=_commands.cmd_explain)

    mg = sub.add_parser("merge", help="merge per-cell results directories into one report")
    mg.add_argument("pieces", type=Path, nargs="+")
    mg.add_argument("--output", type=Path, required=True)
    mg.add_argument("--history", type=Path, default=None, help="SQLite history file")
    mg.add_argument("--fail-on", default="", help=FAIL_ON_HELP)
    mg.set_defaults(func=_commands.cmd_merge)


def _add_inspect(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ins = sub.add_parser("inspect", help="GPU-arch and ABI facts of a wheel, .so, dir or env")
    ins.add_argument("path", type=Path)
    ins.add_argument("--target", action="append", default=[], metavar="sm_XY")
    ins.add_argument("--json", action="store_true")
    ins.set_defaults(func=cmd_inspect)


# ---------------------------------------------------------------- commands


def cmd_inspect(args: argparse.Namespace) -> int:
    from stackmatrix.check.coverage import parse_target
    from stackmatrix.check.inspection import inspect_path

    if not args.path.exists():
        raise UsageError(f"{args.path}: no such file or directory")
    for target in args.target:
        try:
            parse_target(target)
        except ValueError as exc:
            raise UsageError(f"inspect --target: {exc}") from exc
    outcome = inspect_path(args.path, targets=args.target or ["sm_90", "sm_120"])
    if args.json:
        print(
            json.dumps(
                {
                    "schema_version": 1,
                    "verdict": outcome.verdict,
                    "findings": [f.to_dict() for f in outcome.findings],
                    "data": outcome.data,
                },
                indent=2,
                default=str,
            )
        )
    else:
        from stackmatrix.check.render import render_text

        print(render_text(outcome))
    if outcome.verdict == "nothing-judged":
        reasons = [f.message for f in outcome.findings if f.code != "SM-NOTHING-JUDGED"]
        raise NothingJudged(
            f"nothing judged in {args.path}" + (": " + "; ".join(reasons) if reasons else "")
        )
    return 0
