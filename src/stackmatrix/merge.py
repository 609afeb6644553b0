"""Merge the results directories of separate CI jobs (one cell each) into one run.

Pieces must agree about the spec (same spec file hash) and the run (same run id
where both have one, same stackmatrix version). Every cell of the plan appears in
the merged run: a cell whose artifact never arrived gets a `failed` build result
with code `artifact_missing`, so the report shows it instead of dropping it.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackmatrix import _atomic
from stackmatrix.errors import PolicyFailure, ResultsError, UsageError
from stackmatrix.results import PhaseResult, RunDir, Status, now_iso

AGREE_ON = ("spec_name", "spec_hash", "stackmatrix_version", "baseline")


@dataclass(frozen=True)
class Piece:
    run: RunDir
    meta: dict[str, Any]

    @property
    def cells(self) -> list[str]:
        return [c for c in self.run.cell_ids() if self.run.cell(c).result_path("build").exists()]


def load_pieces(paths: Sequence[Path]) -> list[Piece]:
    pieces = []
    for path in paths:
        if not path.is_dir():
            raise UsageError(f"{path}: not a directory; pass the results directories to merge")
        pieces.append(Piece(RunDir(path), RunDir(path).read_run()))
    return pieces


def check_agreement(pieces: Sequence[Piece]) -> None:
    first = pieces[0]
    for other in pieces[1:]:
        for key in AGREE_ON:
            if first.meta.get(key) != other.meta.get(key):
                raise ResultsError(
                    f"refusing to merge: {first.run.path} and {other.run.path} disagree about "
                    f"{key} ({first.meta.get(key)!r} vs {other.meta.get(key)!r}); they were "
                    "not produced from the same spec by the same stackmatrix"
                )
        a, b = first.meta.get("run_id"), other.meta.get("run_id")
        if a and b and a != b:
            raise ResultsError(
                f"refusing to merge: {first.run.path} belongs to run {a!r} and "
                f"{other.run.path} to run {b!r}; merge the artifacts of one CI run"
            )
    _same_workload(pieces)


def _same_workload(pieces: Sequence[Piece]) -> None:
    digests = {}
    for piece in pieces:
        wl = piece.run.path / "workload.jsonl"
        if wl.exists():
            digests[piece.run.path] = hashlib.sha256(wl.read_bytes()).hexdigest()
    if len(set(digests.values())) > 1:
        listing = ", ".join(f"{p}: {d[:12]}" for p, d in digests.items())
        raise ResultsError(
            f"refusing to merge: the pieces benchmarked different workloads ({listing}); "
            "every cell must get byte-identical requests"
        )


def merge(paths: Sequence[Path], output: Path) -> RunDir:
    pieces = load_pieces(paths)
    check_agreement(pieces)
    out = RunDir(output)
    output.mkdir(parents=True, exist_ok=True)
    first = pieces[0].run.path
    for name in ("spec.toml", "plan.json", "workload.jsonl", "schedule.json"):
        if (first / name).exists():
            shutil.copyfile(first / name, output / name)
    owners = _cell_owners(pieces)
    planned = _planned_cells(first)
    for cell_id in planned:
        if cell_id in owners:
            shutil.copytree(
                owners[cell_id] / "cells" / cell_id, output / "cells" / cell_id, dirs_exist_ok=True
            )
        else:
            _missing_artifact(out, cell_id)
    meta = dict(pieces[0].meta)
    meta.pop("schema_version", None)
    meta.update(cells=planned, merged_from=[str(p) for p in paths], updated=now_iso())
    out.write_json("run.json", meta)
    return out


def _cell_owners(pieces: Sequence[Piece]) -> dict[str, Path]:
    owners: dict[str, Path] = {}
    for piece in pieces:
        for cell_id in piece.cells:
            if cell_id in owners:
                raise ResultsError(
                    f"refusing to merge: cell {cell_id!r} is in both {owners[cell_id]} and "
                    f"{piece.run.path}; each cell must come from exactly one job"
                )
            owners[cell_id] = piece.run.path
    return owners


def _planned_cells(run_path: Path) -> list[str]:
    plan = _atomic.read_json(run_path / "plan.json")
    return [c["id"] for c in plan["cells"]]


def _missing_artifact(out: RunDir, cell_id: str) -> None:
    stamp = now_iso()
    out.cell(cell_id).write(
        PhaseResult(
            phase="build",
            cell=cell_id,
            status=Status.FAILED,
            inputs_hash="",
            code="artifact_missing",
            message="no results arrived for this cell: its CI job failed before uploading "
            "them, or the artifact was lost; see that job's log",
            started=stamp,
            finished=stamp,
        )
    )


def merge_main(args: argparse.Namespace) -> int:
    from stackmatrix.cli import _fail_on
    from stackmatrix.report import build_report

    merged = merge(args.pieces, args.output)
    # like `stackmatrix run`: without --fail-on, the policy the spec's [report] declares
    recorded = merged.read_run().get("report", {}).get("fail_on", ())
    fail_on = _fail_on(args.fail_on) or tuple(str(x) for x in recorded)
    outcome = build_report(merged.path, fail_on=fail_on, history_db=args.history)
    print(f"merged {len(args.pieces)} piece(s) into {merged.path}")
    if outcome.policy_failures:
        raise PolicyFailure("--fail-on matched: " + "; ".join(outcome.policy_failures))
    return 0
