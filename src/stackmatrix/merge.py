"""Merge the results directories of separate CI jobs (one cell each) into one run.

Pieces must agree about the spec (same spec file hash), the run (same run id
where both have one, same stackmatrix version) and every cell of the plan (its
content hash, run hash and definition in each piece's plan.json). Every cell of the plan appears in
the merged run: a cell whose artifact never arrived gets a `failed` build result
with code `artifact_missing`, so the report shows it instead of dropping it.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from stackmatrix import _nofollow, _piececopy, layout
from stackmatrix._cellid import refuse_unsafe
from stackmatrix.errors import PolicyFailure, ResultsError, UsageError
from stackmatrix.jsontypes import JSONObject, JSONValue
from stackmatrix.outcome import Fail, write
from stackmatrix.records import RunRecord
from stackmatrix.results import CellDir, RunDir, check_schema_version, now_iso
from stackmatrix.specfile.cells import MAX_CELLS

log = logging.getLogger(__name__)
AGREE_ON = ("spec_name", "spec_hash", "stackmatrix_version", "baseline")
# the run-level files every piece writes alike, taken from the first piece
SHARED_FILES = (layout.SPEC_TOML, layout.PLAN_JSON, layout.WORKLOAD_JSONL, layout.WORKLOAD_JSON)


@dataclass(frozen=True)
class Piece:
    run: RunDir
    meta: RunRecord

    @property
    def cells(self) -> list[str]:
        """The cells this piece built (or tried to): those with a build.json."""
        root = self.run.path / layout.CELLS_DIR
        if root.is_symlink():
            raise ResultsError(f"{root} is a symbolic link; merge never follows links")
        if not root.is_dir():
            return []
        with os.scandir(root) as entries:
            return sorted(e.name for e in entries if _arrived(e))


def _arrived(entry: os.DirEntry[str]) -> bool:
    """A cell directory with a build.json (or its compressed copy); a link is kept, to be
    reported, not followed."""
    if entry.is_symlink():
        return True
    cell = CellDir(Path(entry.path), entry.name)
    return entry.is_dir(follow_symlinks=False) and cell.stored_result("build") is not None


def _lexists(path: Path) -> bool:
    return os.path.lexists(path)


def load_pieces(paths: Sequence[Path]) -> list[Piece]:
    pieces = []
    for path in paths:
        if not path.is_dir():
            raise UsageError(f"{path}: not a directory; pass the results directories to merge")
        run = RunDir(path)
        # never through a link; refused unless of run.json's shape
        pieces.append(Piece(run, RunRecord.read(run)))
    return pieces


def check_agreement(pieces: Sequence[Piece]) -> None:
    first = pieces[0]
    for other in pieces[1:]:
        for key in AGREE_ON:
            mine, theirs = getattr(first.meta, key), getattr(other.meta, key)
            if mine != theirs:
                raise ResultsError(
                    f"refusing to merge: {first.run.path} and {other.run.path} disagree about "
                    f"{key} ({mine!r} vs {theirs!r}); they were "
                    "not produced from the same spec by the same stackmatrix"
                )
        a, b = first.meta.run_id, other.meta.run_id
        if a and b and a != b:
            raise ResultsError(
                f"refusing to merge: {first.run.path} belongs to run {a!r} and "
                f"{other.run.path} to run {b!r}; merge the artifacts of one CI run"
            )
    _same_workload(pieces)


def _same_workload(pieces: Sequence[Piece]) -> None:
    digests = {}
    for piece in pieces:
        wl = piece.run.path / layout.WORKLOAD_JSONL
        if _lexists(wl):
            digests[piece.run.path] = hashlib.sha256(_nofollow.read_bytes(wl)).hexdigest()
    if len(set(digests.values())) > 1:
        listing = ", ".join(f"{p}: {d[:12]}" for p, d in digests.items())
        raise ResultsError(
            f"refusing to merge: the pieces benchmarked different workloads ({listing}); "
            "every cell must get byte-identical requests"
        )


def merge(paths: Sequence[Path], output: Path) -> RunDir:
    """Everything is checked before anything is written, and the merged run is put
    together beside `output` and renamed into place: a refused or failed merge leaves
    no `output` behind."""
    pieces = load_pieces(paths)
    check_agreement(pieces)
    check_output(output, paths)
    first = pieces[0].run.path
    plan = _plan_cells(first)
    planned = list(plan)
    for piece in pieces[1:]:
        theirs = _plan_cells(piece.run.path)
        if list(theirs) != planned:
            raise ResultsError(
                f"refusing to merge: the {layout.PLAN_JSON} of {piece.run.path} and of "
                f"{first} list other cells; the pieces were not planned from the same spec"
            )
        _same_cells(plan, theirs, first, piece.run.path)
    owners = _cell_owners(pieces)
    unplanned = sorted(set(owners) - set(planned))
    if unplanned:
        raise ResultsError(
            f"refusing to merge: {owners[unplanned[0]]} holds cell {unplanned[0]!r} that "
            f"its {layout.PLAN_JSON} does not list ({len(unplanned)} such cell(s)); a piece "
            "holds only cells of its plan"
        )
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.merging-", dir=output.parent))
    try:
        _fill(RunDir(staging), pieces, planned, owners)
        staging.chmod(0o755)  # mkdtemp makes it 0700; a results directory is shared
        staging.rename(output)  # onto an empty directory too
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return RunDir(output)


def check_output(output: Path, pieces: Sequence[Path]) -> None:
    """Merging into existing results would replace their run.json and spec.toml and mix
    their cells with the pieces'."""
    target = output.resolve()
    for piece in pieces:
        here = piece.resolve()
        if target == here or here in target.parents:
            raise ResultsError(
                f"refusing to merge into {output}: it is the piece {piece} or inside it; "
                "merge writes a new results directory: pass another --output"
            )
    if output.is_symlink() or (output.exists() and not output.is_dir()):
        raise ResultsError(f"refusing to merge into {output}: it is a link or not a directory")
    if output.is_dir() and any(output.iterdir()):
        what = "a results directory" if (output / layout.RUN_JSON).exists() else "not empty"
        raise ResultsError(
            f"refusing to merge into {output}: it is {what}; merging there would replace "
            f"its {layout.RUN_JSON} and {layout.SPEC_TOML} and mix its cells with the "
            "pieces'. Pass a new or empty directory as --output"
        )


def _fill(
    out: RunDir, pieces: Sequence[Piece], planned: Sequence[str], owners: dict[str, Path]
) -> None:
    first = pieces[0].run.path
    points = sorted(p.name for p in first.glob(layout.point_workload("*")))
    for name in (*SHARED_FILES, *points):
        if _lexists(first / name):
            _nofollow.copy_file(first / name, out.path / name)
    _merge_schedules(out, pieces)
    skipped: list[str] = []
    for cell_id in planned:
        source = owners[cell_id] / layout.CELLS_DIR / cell_id if cell_id in owners else None
        if source is None or source.is_symlink():
            _missing_artifact(out, cell_id, linked=source is not None)
            continue
        copied = _nofollow.copy_tree(
            source, out.path / layout.CELLS_DIR / cell_id, copy=_piececopy.copy
        )
        for path in copied.skipped:
            log.warning("%s: a link or special file, not copied: merge never follows links", path)
            skipped.append(str(path))
        for path in copied.cut:
            log.warning(
                "%s: larger than merge copies (a server log: its last %d MiB), only a part copied",
                path,
                _piececopy.LOG_COPY_LIMIT >> 20,
            )
    meta = replace(
        pieces[0].meta,
        cells=tuple(planned),
        merged_from=tuple(str(p.run.path) for p in pieces),
        merge_skipped=tuple(skipped),
        updated=now_iso(),
    )
    out.write_json(layout.RUN_JSON, meta.to_dict())


def _merge_schedules(out: RunDir, pieces: Sequence[Piece]) -> None:
    """Each job ran its own schedule: the merged run keeps every piece's launches,
    piece after piece, with the first piece's order and seed."""
    name = layout.BENCH_SCHEDULE
    schedules = []
    for piece in pieces:
        path = piece.run.path / name
        if _lexists(path):
            schedules.append(_nofollow.read_json(path))
    if not schedules:
        return
    if not all(isinstance(s, dict) and isinstance(s.get("slots"), list) for s in schedules):
        raise ResultsError(f"a piece's {name} is not a schedule (no list of slots)")
    first = {k: v for k, v in schedules[0].items() if k != "schema_version"}
    sessions = [x for s in schedules for x in _sessions(s)]
    out.write_json(
        name, {**first, "slots": [x for s in schedules for x in s["slots"]], "sessions": sessions}
    )


def _sessions(schedule: Mapping[str, JSONValue]) -> list[JSONValue]:
    sessions = schedule.get("sessions")
    if isinstance(sessions, list):
        return sessions
    only: JSONObject = {k: schedule[k] for k in ("order", "order_seed", "slots") if k in schedule}
    return [only]


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


def _same_cells(
    mine: Mapping[str, JSONObject], theirs: Mapping[str, JSONObject], a: Path, b: Path
) -> None:
    """Each cell planned alike in both pieces (content and run hashes, definition): the
    merged plan is the first piece's, so it must describe every piece's cells."""
    for cell_id, entry in mine.items():
        other = theirs[cell_id]
        keys = sorted(k for k in {*entry, *other} if entry.get(k) != other.get(k))
        if not keys:
            continue
        what = ", ".join(_difference(k, entry.get(k), other.get(k)) for k in keys)
        raise ResultsError(
            f"refusing to merge: cell {cell_id!r} is planned otherwise in "
            f"{b / layout.PLAN_JSON} than in {a / layout.PLAN_JSON} ({what}); the pieces "
            "did not build and bench the same cell"
        )


def _difference(key: str, mine: JSONValue | None, theirs: JSONValue | None) -> str:
    if isinstance(mine, dict) and isinstance(theirs, dict):
        fields = sorted(k for k in {*mine, *theirs} if mine.get(k) != theirs.get(k))
        return f"{key}: {', '.join(fields)}"
    if key.endswith("_hash") and isinstance(mine, str) and isinstance(theirs, str):
        return f"{key} {mine[:12]} vs {theirs[:12]}"
    return key


def _plan_cells(run_path: Path) -> dict[str, JSONObject]:
    """The plan's cells by id, in its order; each id must be one a spec could define
    (one plain directory name), or merge would read and write outside the pieces and
    --output."""
    path = run_path / layout.PLAN_JSON
    plan = _nofollow.read_json(path)
    if isinstance(plan, dict):
        check_schema_version(plan, path)
    cells = plan.get("cells") if isinstance(plan, dict) else None
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise ResultsError(f'{path}: expected {{"cells": [{{"id": ...}}, ...]}}')
    if len(cells) > MAX_CELLS:
        raise ResultsError(
            f"{path}: {len(cells)} cells, over the {MAX_CELLS} a spec may define; this "
            f"{layout.PLAN_JSON} was not written by stackmatrix"
        )
    ids = [c.get("id") for c in cells]
    refuse_unsafe(ids, path)
    if len(set(ids)) != len(ids):
        raise ResultsError(f"{path}: a cell id is listed twice; not written by stackmatrix")
    return {str(c["id"]): c for c in cells if isinstance(c, dict)}


def _missing_artifact(out: RunDir, cell_id: str, *, linked: bool = False) -> None:
    why = "its CI job failed before uploading them, or the artifact was lost; see its log"
    if linked:
        why = "its directory in the piece is a symbolic link, which merge never follows"
    message = f"no results arrived for this cell: {why}"
    write(out.cell(cell_id), "build", Fail("artifact_missing", message))


def merge_main(args: argparse.Namespace) -> int:
    from stackmatrix.report import build_report
    from stackmatrix.specfile import parse_fail_on

    merged = merge(args.pieces, args.output)
    # like `stackmatrix run`: without --fail-on, the policy the spec's [report] declares
    recorded = RunRecord.read(merged).report.fail_on
    fail_on = parse_fail_on([args.fail_on]) or recorded
    outcome = build_report(merged.path, fail_on=fail_on, history_db=args.history)
    print(f"merged {len(args.pieces)} piece(s) into {merged.path}")
    if outcome.policy_failures:
        raise PolicyFailure("--fail-on matched: " + "; ".join(outcome.policy_failures))
    return 0
