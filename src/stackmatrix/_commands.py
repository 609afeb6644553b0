"""The commands of `stackmatrix` (cli.py holds the parser and `main`). Each imports
what it needs when it runs, so a command pays only for its own modules."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from stackmatrix import layout
from stackmatrix._console import Console, write_step_summary
from stackmatrix.errors import PolicyFailure

if TYPE_CHECKING:
    import argparse

    from stackmatrix.spec_model import Spec


def cmd_validate(args: argparse.Namespace) -> int:
    from stackmatrix.specfile import load_spec

    spec = load_spec(args.spec)
    print(f"{args.spec}: valid; {len(spec.cells)} cell(s), baseline {spec.baseline}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from stackmatrix.plan import describe_difference, github_matrix, make_plan
    from stackmatrix.spec_model import warmup_advice
    from stackmatrix.specfile import load_spec

    spec = load_spec(args.spec)
    if args.github_matrix:
        print(json.dumps(github_matrix(spec, args.default_runner)))
        return 0
    plan = make_plan(spec)
    if args.json:
        data = {
            "schema_version": 1,
            "spec": spec.name,
            "baseline": spec.baseline,
            "targets": list(spec.targets),
            "cells": [pc.to_dict() for pc in plan],
        }
        print(json.dumps(data, indent=2))
        return 0
    print(
        f"{spec.name}: {len(plan)} cell(s), baseline {spec.baseline}, "
        f"targets {', '.join(spec.targets) or '-'}"
    )
    for line in warmup_advice(spec.bench):
        print(line)
    rows = [("cell", "backend", "hash", "differs from baseline")]
    for pc in plan:
        diff = (
            "(baseline)"
            if pc.is_baseline
            else "; ".join(describe_difference(k, *v) for k, v in pc.differs.items())
            or "(same as baseline)"
        )
        rows.append((pc.cell.id, pc.cell.backend, pc.short_hash, diff))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from stackmatrix.executor import get_executor
    from stackmatrix.pipeline import RunOptions, default_work_dir
    from stackmatrix.spec_model import warmup_advice
    from stackmatrix.specfile import load_spec, parse_fail_on

    spec = load_spec(args.spec)
    console = Console()
    opts = RunOptions(
        spec=spec,
        phases=tuple(args.phases),
        cells=tuple(args.cell),
        output=args.output,
        reports_dir=args.reports_dir,
        history=args.history,
        work_dir=args.work_dir or default_work_dir(),
        jobs=args.jobs,
        resume=args.resume or args.output is not None,
        force=args.force,
        backend=args.backend,
        order=args.order,
        fail_on=parse_fail_on([args.fail_on]),
        argv=tuple(sys.argv),
    )
    for line in warmup_advice(spec.bench):
        console.info(line)
    kind = getattr(args, "executor", None) or spec.executor.kind
    summary = get_executor(kind)(opts, console.progress)
    console.info(f"\nresults: {summary.run_dir}")
    for cell, phases in summary.statuses.items():
        console.info(f"  {cell:<20} " + "  ".join(f"{k}={v}" for k, v in phases.items()))
    _print_verdicts(console, summary.run_dir)
    _print_noise(console, summary.run_dir, spec)
    if spec.report.explain and "report" in opts.phases:
        from stackmatrix.explain.command import explain_after_run

        explain_after_run(
            summary.run_dir,
            work_dir=opts.work_dir,
            jobs=opts.jobs,
            rounds=spec.report.explain_rounds,
            progress=console.progress,
            only=spec.report.explain_cells,
            executor=kind,
        )
    md = summary.run_dir / layout.REPORT_MD
    if md.exists():
        write_step_summary(md.read_text(encoding="utf-8"))
    if summary.policy_failures:
        raise PolicyFailure("--fail-on matched: " + "; ".join(summary.policy_failures))
    return 0


def _print_verdicts(console: Console, run_dir: Path) -> None:
    """Each cell's verdict, why, and what sets it apart from the baseline (matrix.json),
    so the first screen of a run says what the report decided."""
    matrix = run_dir / layout.REPORT_JSON
    if not matrix.exists():
        return
    doc = json.loads(matrix.read_text(encoding="utf-8"))
    cells = [c for c in doc.get("cells", []) if isinstance(c, dict) and not c.get("is_baseline")]
    if not cells:
        return
    console.info(f"verdicts against {doc.get('baseline')}:")
    for c in cells:
        console.info(f"  {c.get('id')!s:<20} {c.get('verdict')}: {c.get('reason')}")
        if c.get("set_apart"):
            console.info(f"  {'':<20} {c['set_apart']}")


def _print_noise(console: Console, run_dir: Path, spec: Spec) -> None:
    from stackmatrix.calibrate import noise_note

    matrix = run_dir / layout.REPORT_JSON
    if spec.bench is None or not matrix.exists():
        return
    doc = json.loads(matrix.read_text(encoding="utf-8"))
    detectable = {
        str(c.get("id")): float(c["comparison"]["detectable"])
        for c in doc.get("cells", [])
        if isinstance(c.get("comparison"), dict)
        and isinstance(c["comparison"].get("detectable"), int | float)
    }
    for line in noise_note(
        doc.get("calibration"), spec.report.min_effect, spec.baseline, detectable
    ):
        console.info(line)


def cmd_block(args: argparse.Namespace) -> int:
    from stackmatrix.executor.block import block_main

    return block_main(args, Console().progress)


def cmd_explain(args: argparse.Namespace) -> int:
    from stackmatrix.explain.command import explain_main

    return explain_main(args, Console().progress)


def cmd_report(args: argparse.Namespace) -> int:
    from stackmatrix.report import build_report
    from stackmatrix.specfile import parse_fail_on
    from stackmatrix.specfile.report import parse_slo_args

    outcome = build_report(
        args.results,
        fail_on=parse_fail_on([args.fail_on]),
        history_db=args.history,
        headline=args.headline,
        out_dir=args.output,
        slo=parse_slo_args(args.slo) if args.slo else None,
    )
    for path in outcome.files.values():
        print(path)
    write_step_summary(outcome.summary_markdown)
    if outcome.policy_failures:
        raise PolicyFailure("--fail-on matched: " + "; ".join(outcome.policy_failures))
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    from stackmatrix.check.probe import probe_main

    return probe_main(list(args.rest))


def cmd_tiny_model(args: argparse.Namespace) -> int:
    from stackmatrix.bench.tinymodel import tiny_model_main

    return tiny_model_main(list(args.rest))


def cmd_calibrate(args: argparse.Namespace) -> int:
    from stackmatrix.calibrate import calibrate_main

    return calibrate_main(args)


def cmd_merge(args: argparse.Namespace) -> int:
    from stackmatrix.merge import merge_main

    return merge_main(args)
