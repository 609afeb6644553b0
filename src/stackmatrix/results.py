"""The results directory: one per run, one subdirectory per cell, one JSON per phase.

Layout (layout.py names every file, docs/architecture.md shows the whole tree, and
stackmatrix.records types what run.json and the phases' data hold)::

    RUN/run.json                 what was run (spec name + hash, cells, order)
    RUN/spec.toml                the spec, byte for byte
    RUN/plan.json                the planned cells with their content hashes
    RUN/cells/<id>/<phase>.json  one PhaseResult per phase (build, check, bench), or
                                 in a kept example <phase>.json.gz, the same compressed
    RUN/cells/<id>/<phase>.log   that phase's log
    RUN/matrix.{md,html,json}, RUN/junit.xml   the report
"""

from __future__ import annotations

import datetime as _dt
import enum
import fnmatch
import os
import stat
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackmatrix import _atomic, _nofollow, layout
from stackmatrix._cellid import refuse_unsafe
from stackmatrix.errors import ResultsError, Unreadable
from stackmatrix.findings import Finding, mapping, text
from stackmatrix.jsontypes import JSONObject
from stackmatrix.spec_names import CELL_PHASES

SCHEMA_VERSION = 1
PHASES = CELL_PHASES


class Status(enum.StrEnum):
    OK = "ok"  # the phase did its work (its findings may still say fail)
    FAILED = "failed"  # the phase could not do its work; `code` says why
    SKIPPED = "skipped"  # deliberately not run (no GPU, incompatible cell...)
    UNAVAILABLE = "unavailable"  # this phase is not implemented for this backend/engine
    INTERRUPTED = "interrupted"  # Ctrl-C or a crash while it ran; redone on resume


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


@dataclass(kw_only=True)
class PhaseResult:
    """The outcome of one phase for one cell, written as `<phase>.json`."""

    phase: str
    cell: str
    status: Status
    inputs_hash: str
    code: str | None = None  # machine reason for a non-ok status, e.g. "server_failed"
    message: str = ""
    started: str = ""
    finished: str = ""
    duration_s: float = 0.0
    findings: list[Finding] = field(default_factory=list)
    # the phase's data, typed by stackmatrix.records (BuildData, CheckData, BenchData);
    # Any, not JSONObject: tests outside the records index it without narrowing
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Whether a resumed run may reuse this result (failed phases are retried)."""
        return self.status in (Status.OK, Status.SKIPPED) and bool(self.finished)

    def to_dict(self) -> JSONObject:
        return {
            "schema_version": SCHEMA_VERSION,
            "phase": self.phase,
            "cell": self.cell,
            "status": self.status.value,
            "code": self.code,
            "message": self.message,
            "inputs_hash": self.inputs_hash,
            "started": self.started,
            "finished": self.finished,
            "duration_s": round(self.duration_s, 3),
            "findings": [f.to_dict() for f in self.findings],
            "data": self.data,
        }

    @classmethod
    def from_dict(cls, raw: object) -> PhaseResult:
        """Raises Unreadable for anything but a phase result of this schema version."""
        if not isinstance(raw, dict):
            raise Unreadable(f"a phase result is a JSON object, not {type(raw).__name__}")
        version = raw.get("schema_version")
        if version != SCHEMA_VERSION:
            raise Unreadable(
                f"phase result has schema_version {version!r}, this stackmatrix reads "
                f"{SCHEMA_VERSION}; re-run the phase or use a matching stackmatrix version"
            )
        try:
            return cls._from_fields(raw)
        except KeyError as exc:
            raise Unreadable(f"phase result has no {exc.args[0]!r}") from exc
        except (ValueError, TypeError, AttributeError) as exc:
            raise Unreadable(f"phase result is malformed: {exc}") from exc

    @classmethod
    def _from_fields(cls, raw: Mapping[str, object]) -> PhaseResult:
        """KeyError, TypeError or ValueError for a field it cannot have."""
        data = mapping(raw.get("data") or {}, "data")
        return cls(
            phase=str(raw["phase"]),
            cell=str(raw["cell"]),
            status=Status(str(raw["status"])),  # ValueError for any other value
            code=text(raw.get("code")),
            message=str(raw.get("message", "")),
            inputs_hash=str(raw["inputs_hash"]),
            started=str(raw.get("started", "")),
            finished=str(raw.get("finished", "")),
            duration_s=_seconds(raw.get("duration_s", 0.0)),
            findings=[Finding.from_dict(mapping(f, "a finding")) for f in _items(raw)],
            data=dict(data),
        )


def _seconds(value: object) -> float:
    if not isinstance(value, int | float | str):  # float() of a number, or its text
        raise TypeError(f"duration_s is {type(value).__name__}, not a number")
    return float(value)


def _items(raw: Mapping[str, object]) -> list[object]:
    findings = raw.get("findings") or []
    if not isinstance(findings, list):
        raise TypeError(f"findings is {type(findings).__name__}, not a list")
    return findings


INTERNAL_ERROR = "internal_error"  # the code of a result whose phase crashed (CellDir.crashed)
# the bytes of one phase result's JSON, read plain or decompressed: a larger one (a
# sparse file, a gzip bomb) is refused before it exhausts memory
RESULT_LIMIT = _nofollow.DEFAULT_LIMIT


@dataclass(frozen=True)
class CellDir:
    path: Path
    cell: str

    def result_path(self, phase: str) -> Path:
        """Where the phase's result is written."""
        return self.path / layout.phase_result(phase)

    def stored_result(self, phase: str) -> Path | None:
        """The file that holds the phase's result: `<phase>.json`, or where that is
        absent its compressed copy `<phase>.json.gz` (kept examples,
        scripts/compact-example.py); None when neither is there. A link counts as there:
        reading it is refused."""
        written = self.result_path(phase)
        for path in (written, written.with_name(layout.compressed(written.name))):
            if os.path.lexists(path):
                return path
        return None

    def log_path(self, phase: str) -> Path:
        return self.path / layout.phase_log(phase)

    def file(self, name: str) -> Path:
        return self.path / name

    def read(self, phase: str) -> PhaseResult | None:
        """The phase's result, None when the cell has none; raises Unreadable for one
        that cannot be read (a link, a FIFO, too large, a damaged or too large .gz)."""
        path = self.stored_result(phase)
        if path is None:
            return None
        raw = _nofollow.read_json(path, limit=RESULT_LIMIT)  # never through a link
        try:
            return PhaseResult.from_dict(raw)
        except Unreadable as exc:
            raise Unreadable(f"{path}: {exc.message}") from exc

    def read_to_resume(self, phase: str) -> PhaseResult | None:
        """`read`, for a resume that appends to the record: one that cannot be read (cut
        short, or of a newer stackmatrix) may hold measured launches, so it is refused,
        never replaced by a fresh record."""
        try:
            return self.read(phase)
        except Unreadable as exc:
            kept = self.stored_result(phase) or self.result_path(phase)
            raise Unreadable(
                f"{exc.message}\n{kept} is left as it is: it may hold "
                "measured launches that resuming would replace. Move it aside (or resume "
                "with the stackmatrix version that wrote it) and run again"
            ) from exc

    def write(self, result: PhaseResult) -> Path:
        """Written as `<phase>.json`; a compressed copy of an earlier result is removed
        after it (never before: a crash in between leaves the new result, which is
        read first), so the two never disagree."""
        path = self.result_path(result.phase)
        _atomic.write_json(path, result.to_dict())
        _remove(path.with_name(layout.compressed(path.name)))
        return path

    def remove_launch_files(self) -> list[str]:
        """The server logs and request records of earlier launches removed (those of a
        configuration a redone bench replaces would be read as its own); a link is
        removed itself, a directory of such a name is left. Their names, sorted."""
        patterns = [*layout.LAUNCH_FILE_GLOBS, *map(layout.compressed, layout.LAUNCH_FILE_GLOBS)]
        with os.scandir(self.path) as entries:
            names = sorted(
                e.name
                for e in entries
                if not e.is_dir(follow_symlinks=False)
                and any(fnmatch.fnmatchcase(e.name, p) for p in patterns)
            )
        for name in names:
            _remove(self.path / name)
        return names

    def crashed(self, phase: str, exc: BaseException) -> str:
        """A phase's own crash (a bug, a full disk) becomes a status, never the end of the
        run: the traceback goes to <phase>.log, the returned message to the result (code
        INTERNAL_ERROR). The one wording for every phase (pipeline.runner.run_phase, bench)."""
        with self.log_path(phase).open("a", encoding="utf-8") as fh:
            fh.write("".join(traceback.format_exception(exc)))
        return f"{type(exc).__name__}: {exc} (traceback in {layout.phase_log(phase)})"


@dataclass
class PhaseRun:
    """One cell's phase while it runs, and the one place where what happens to it becomes
    its recorded status, the same for build, check and bench: `begin` writes it as
    interrupted (a SIGKILL leaves that), `crash` makes a crash of our own `failed`
    (`internal_error`, traceback in the phase's log), `interrupt` makes Ctrl-C
    `interrupted` (resumable), `end` stamps it finished (a Skip or Fail the phase raised
    is applied first: outcome.record). Build and check run one body per cell
    (pipeline.runner.run_phase); the bench's cells interleave their launches, so each
    keeps its PhaseRun for the whole phase (bench._cell.CellState)."""

    cell_dir: CellDir
    result: PhaseResult
    t0: float = field(default_factory=time.monotonic)

    @classmethod
    def begin(
        cls, cell_dir: CellDir, phase: str, inputs_hash: str, message: str = "in progress"
    ) -> PhaseRun:
        result = PhaseResult(
            phase=phase,
            cell=cell_dir.cell,
            status=Status.INTERRUPTED,
            inputs_hash=inputs_hash,
            started=now_iso(),
            message=message,
        )
        return cls(cell_dir=cell_dir, result=result)

    def save(self) -> None:
        self.result.duration_s = time.monotonic() - self.t0
        self.cell_dir.write(self.result)

    def crash(self, exc: BaseException, what: str = "") -> PhaseResult:
        why = self.cell_dir.crashed(self.result.phase, exc)
        self.result.status, self.result.code = Status.FAILED, INTERNAL_ERROR
        self.result.message = f"{what}: {why}" if what else why
        return self.end()

    def interrupt(self, message: str = "interrupted; re-run with --resume") -> PhaseResult:
        self.result.status, self.result.code = Status.INTERRUPTED, "interrupted"
        self.result.message = message
        self.save()
        return self.result

    def end(self) -> PhaseResult:
        self.result.finished = now_iso()
        self.save()
        return self.result


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def run_json(self) -> Path:
        return self.path / layout.RUN_JSON

    def check_layout(self, cell_ids: Sequence[str], phases: Sequence[str]) -> None:
        """Before a run writes anything: the places it writes into are what it wrote
        (a `cells` that is a file, a cell directory that is a file, a `bench.json` that is
        a directory crashed a resume with a traceback); raises ResultsError (exit 3)."""
        for name in _RUN_FILES:
            _expect(self.path / name, directory=False)
        cells = self.path / layout.CELLS_DIR
        _expect(cells, directory=True)
        for cid in cell_ids:
            _expect(cells / cid, directory=True)
            for phase in phases:
                result = layout.phase_result(phase)
                for name in (result, layout.compressed(result), layout.phase_log(phase)):
                    _expect(cells / cid / name, directory=False)

    def cell(self, cell_id: str) -> CellDir:
        """The cell's directory, made; an id that is not a plain name is refused."""
        refuse_unsafe([cell_id], self.path)
        d = CellDir(self.path / layout.CELLS_DIR / cell_id, cell_id)
        d.path.mkdir(parents=True, exist_ok=True)
        return d

    def cell_ids(self) -> list[str]:
        root = self.path / layout.CELLS_DIR
        try:
            return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        except OSError as exc:
            raise ResultsError(f"cannot list {root}: {exc.strerror}") from exc

    def read_run(self) -> JSONObject:
        if not os.path.lexists(self.run_json):
            raise Unreadable(
                f"{self.path} is not a stackmatrix results directory (no {layout.RUN_JSON}); "
                "pass the directory that `stackmatrix run` printed"
            )
        data = _nofollow.read_json(self.run_json)
        if not isinstance(data, dict):
            raise self.corrupt_run("not an object")
        check_schema_version(data, self.run_json)
        return data  # records.run.read_run_json checks its fields

    def corrupt_run(self, why: str) -> Unreadable:
        return Unreadable(
            f"{self.run_json} is corrupt: {why}; it is written by `stackmatrix run`: "
            "re-run, or restore it from the run's artifacts"
        )

    def write_json(self, name: str, data: Mapping[str, object]) -> Path:
        path = self.path / name
        _atomic.write_json(path, {"schema_version": SCHEMA_VERSION, **data})
        return path


def check_schema_version(raw: Mapping[str, object], path: Path) -> None:
    """A run-level file (run.json, plan.json) of another schema version is refused: read
    as this one, its fields could mean something else. One without a version is read."""
    version = raw.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise Unreadable(
            f"{path} has schema_version {version!r}; this stackmatrix reads "
            f"{SCHEMA_VERSION}: use the stackmatrix version that wrote these results"
        )


_RUN_FILES = (
    layout.RUN_JSON,
    layout.PLAN_JSON,
    layout.SPEC_TOML,
    layout.WORKLOAD_JSON,
    layout.WORKLOAD_JSONL,
    layout.BENCH_SCHEDULE,
    *layout.REPORT_FILES.values(),
)


def _remove(path: Path) -> None:
    """Remove file `path` if it is there (a link itself, never what it points to)."""
    try:
        path.unlink()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ResultsError(
            f"cannot remove {path}, a stale file of an earlier result: {exc.strerror}; "
            "move it aside and run again"
        ) from exc


def _expect(path: Path, *, directory: bool) -> None:
    """`path` is absent, or a directory (`directory`) / a regular file, never a link."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ResultsError(f"cannot read {path}: {exc.strerror}") from exc
    want = "a directory" if directory else "a regular file"
    if stat.S_ISLNK(mode) or not (stat.S_ISDIR(mode) if directory else stat.S_ISREG(mode)):
        raise ResultsError(
            f"{path} is not {want} as stackmatrix writes it; these results were changed "
            "by someone else: move it aside (or use another --output) and run again"
        )
