"""Read a results directory for the report, tolerating every missing or broken file.

A cell that failed early has no bench.json, a corrupt file is a problem to show: the
report says so per cell and never stops because of it.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from stackmatrix import _jsonload, _nofollow, layout
from stackmatrix._cellid import refuse_unsafe
from stackmatrix._secrets import redact, redact_spec_text
from stackmatrix.errors import Unreadable
from stackmatrix.jsontypes import JSONObject
from stackmatrix.plan import public
from stackmatrix.records import (
    BenchData,
    BuildData,
    CheckData,
    PlanCell,
    PlanRecord,
    PointInfo,
    RoundRecord,
    RunRecord,
)
from stackmatrix.records.decode import problem
from stackmatrix.records.phases import data_problem
from stackmatrix.records.run import read_run_json
from stackmatrix.results import (
    PHASES,
    CellDir,
    PhaseResult,
    RunDir,
    Status,
    check_schema_version,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class CellResults:
    id: str
    path: Path
    content_hash: str | None = None
    definition: JSONObject = field(default_factory=dict)
    differs: dict[str, list[Any]] = field(default_factory=dict)
    phases: dict[str, PhaseResult] = field(default_factory=dict)
    problems: tuple[str, ...] = ()  # files that exist but could not be read
    unreadable: dict[str, str] = field(default_factory=dict)  # phase -> why its file is not

    def phase(self, name: str) -> PhaseResult | None:
        return self.phases.get(name)

    def data(self, name: str) -> JSONObject:
        result = self.phases.get(name)
        if result is None:
            return {}
        # An interrupted bench keeps the launches it completed: a user who stops a
        # long run still wants them (reports/examples/h200-sglang-interrupted/).
        usable = result.status is Status.OK or (
            name == "bench" and result.status is Status.INTERRUPTED
        )
        return result.data if usable else {}

    @cached_property
    def build(self) -> BuildData:
        """The build phase's data, typed (empty when the phase is not usable)."""
        return BuildData.from_dict(self.data("build"))

    @cached_property
    def check(self) -> CheckData:
        """The check phase's data, typed (empty when the phase is not usable)."""
        return CheckData.from_dict(self.data("check"))

    @cached_property
    def bench(self) -> BenchData:
        """The bench phase's data, typed (empty when the phase is not usable)."""
        return BenchData.from_dict(self.data("bench"))

    def launches(self, metric: str, point: str | None = None) -> list[list[float]]:
        """Round values of `metric`, one list per launch that ran to the end: of the
        headline workload, or of the load point named `point` (`[[bench.points]]`)."""
        return self.bench.completed_values(metric, point)

    def points(self) -> dict[str, PointInfo]:
        """The load points bench.json summarizes: name -> metric, max_concurrency, ..."""
        return dict(self.bench.points)

    def request_files(self) -> Iterator[Path]:
        """Each round's request records: the file bench wrote, or its gzip-compressed
        copy (`<name>.gz`, as kept examples store them)."""
        for launch in self.bench.launches:
            for rnd in launch.rounds:
                if (path := self.round_file(rnd)) is not None:
                    yield path

    def round_file(self, rnd: RoundRecord) -> Path | None:
        """The file of one round's request records (or its compressed copy), where
        there is one that may be read: a plain name in the cell's directory (a name
        with a path in it, `../x` or `/etc/x`, would read outside the results)."""
        name = rnd.requests_file
        if not name or Path(name).name != name or name in (".", ".."):
            return None
        for path in (self.path / name, self.path / layout.compressed(name)):
            if _regular(path):
                return path
        return None

    def server_logs(self) -> list[Path]:
        """The servers' logs in the order of their names, each the file bench wrote or,
        where that is absent, its compressed copy (`<name>.gz`)."""
        logs = {
            p.name.removesuffix(layout.COMPRESSED_SUFFIX): p
            for p in self.path.glob(layout.compressed(layout.SERVER_LOG_GLOB))
            if _regular(p)
        }
        logs.update((p.name, p) for p in self.path.glob(layout.SERVER_LOG_GLOB) if _regular(p))
        return [logs[name] for name in sorted(logs)]

    def measured_server_logs(self) -> list[Path]:
        """The logs of the launches the verdicts are computed from (those that ran to the
        end): not a warm-up's, nor an interrupted launch's few lines, whose settings
        describe no measurement. Results whose launches name no log keep every log."""
        logs = self.server_logs()
        names = {
            layout.server_log(launch.index)
            for launch in self.bench.launches
            if launch.ok and isinstance(launch.index, int | str)
        }
        mine = [p for p in logs if p.name.removesuffix(layout.COMPRESSED_SUFFIX) in names]
        return mine if mine else logs


def read_explanations(run_dir: Path, problems: list[str]) -> tuple[JSONObject, ...]:
    """RUN/explain/<cell>/explanation.json, as `stackmatrix explain` wrote them."""
    out: list[JSONObject] = []
    for path in sorted((run_dir / layout.EXPLAIN_DIR).glob(f"*/{layout.EXPLANATION_JSON}")):
        if not _regular(path):
            continue
        try:  # never through a link, never a FIFO, never unbounded
            data = _nofollow.read_json(path)
        except Unreadable as exc:
            problems.append(f"explanation {path} is unreadable: {exc}")
            continue
        if isinstance(data, dict) and isinstance(data.get("sentences"), list):
            out.append(data)
        else:
            problems.append(f"explanation {path} has no sentences")
    return tuple(out)


def _regular(path: Path) -> bool:
    """A file the report may read: a link (to /dev/zero, or outside the results) or a
    FIFO is not read."""
    return path.is_file() and not path.is_symlink()


@dataclass(frozen=True, kw_only=True)
class RunResults:
    path: Path
    run: JSONObject
    cells: tuple[CellResults, ...]
    spec_text: str | None
    problems: tuple[str, ...] = ()

    @cached_property
    def record(self) -> RunRecord:
        """run.json, typed (`run` is the dict as read)."""
        return RunRecord.from_dict(self.run)

    @property
    def baseline(self) -> str:
        return self.record.baseline

    @property
    def targets(self) -> tuple[str, ...]:
        return self.record.targets

    def cell(self, cell_id: str) -> CellResults | None:
        return next((c for c in self.cells if c.id == cell_id), None)


def load_run(run_dir: Path) -> RunResults:
    """Everything the report needs from `run_dir`; raises Unreadable only when run.json
    is absent or unreadable, or run.json or plan.json names a cell id that is not a plain
    name (the cells' directories are those ids or names listed in `cells/`)."""
    rd = RunDir(run_dir)
    run = read_run_json(rd)
    problems: list[str] = []
    plan = _read_plan(run_dir / layout.PLAN_JSON, problems)
    order = _cell_order(RunRecord.from_dict(run), plan, rd.cell_ids())
    cells = tuple(_load_cell(run_dir / layout.CELLS_DIR / cid, cid, plan.get(cid)) for cid in order)
    spec_text = _read_text(run_dir / layout.SPEC_TOML, problems)
    return RunResults(
        path=run_dir, run=run, cells=cells, spec_text=spec_text, problems=tuple(problems)
    )


def _read_text(path: Path, problems: list[str]) -> str | None:
    """The spec as the run saw it, for display: undecodable bytes are shown replaced,
    and secret values hidden (the report is published)."""
    if not os.path.lexists(path):
        return None
    try:
        text = _nofollow.read_bytes(path).decode("utf-8", errors="replace")
    except Unreadable as exc:
        problems.append(exc.message)
        return None
    return redact_spec_text(text)


def _read_plan(path: Path, problems: list[str]) -> dict[str, PlanCell]:
    if not path.is_file():
        problems.append(f"{path.name} is missing: cell definitions and intended changes unknown")
        return {}
    try:
        raw = _nofollow.read_json(path)
    except Unreadable as exc:
        problems.append(exc.message)
        return {}
    if isinstance(raw, dict):
        check_schema_version(raw, path)  # refused, not a problem: it may mean otherwise
    why = problem(PlanRecord, raw)
    if why:
        problems.append(f"cannot read {path.name}: {why}")
        return {}
    planned = [PlanCell.from_dict(c) for c in raw.get("cells") or [] if "id" in c]
    refuse_unsafe((c.id for c in planned), path)  # a path outside: refused, not a problem
    return {c.id: c for c in planned}


def _cell_order(run: RunRecord, plan: dict[str, PlanCell], on_disk: list[str]) -> list[str]:
    return list(dict.fromkeys([*run.cells, *plan, *on_disk]))


def _load_cell(path: Path, cell_id: str, planned: PlanCell | None) -> CellResults:
    phases: dict[str, PhaseResult] = {}
    problems: list[str] = []
    unreadable: dict[str, str] = {}
    for phase in PHASES:
        found = _read_phase(CellDir(path, cell_id), phase)
        if isinstance(found, str):
            problems.append(f"{layout.phase_result(phase)} unreadable: {found}")
            unreadable[phase] = found
            log.warning("cell %s: cannot read its %s result: %s", cell_id, phase, found)
        elif found is not None:
            phases[phase] = found
    cell = CellResults(
        id=cell_id,
        path=path,
        content_hash=planned.content_hash if planned else None,
        # results written before secrets were kept out of them
        definition={k: public(k, v) for k, v in (planned.definition if planned else {}).items()},
        differs={
            k: _public_pair(k, v)
            for k, v in (planned.differs_from_baseline if planned else {}).items()
        },
        phases=_without_secret_env(phases),
        problems=tuple(problems),
        unreadable=unreadable,
    )
    return replace(cell, problems=(*problems, *_request_problems(cell)))


def _request_problems(cell: CellResults) -> list[str]:
    found = []
    for path in cell.request_files():
        with contextlib.suppress(OSError):  # a file gone or unreadable is read as none
            if (why := requests_problem(path, path.lstat().st_size)) is not None:
                found.append(why)
    return found


def _read_phase(cell_dir: CellDir, phase: str) -> PhaseResult | str | None:
    """The phase's result (`<phase>.json` or its compressed copy), why it cannot be
    used, or None when the cell has none."""
    try:
        result = cell_dir.read(phase)
    except Unreadable as exc:
        return exc.message
    if result is None:
        return None
    return data_problem(phase, result.data) or result


def _public_pair(field: str, pair: Any) -> Any:
    """A `differs_from_baseline` entry: [baseline value, this cell's value]."""
    return [public(field, v) for v in pair] if isinstance(pair, list) else public(field, pair)


def _without_secret_env(phases: dict[str, PhaseResult]) -> dict[str, PhaseResult]:
    build = phases.get("build")
    environment = build.data.get("environment") if build is not None else None
    if isinstance(environment, dict) and environment.get("env"):
        environment["env"] = redact(environment["env"])
    return phases


REQUESTS_LIMIT = 256 << 20  # bytes of one round's records, after decompression
_LINE_LIMIT = 16 << 20


def read_requests(path: Path) -> Iterator[JSONObject]:
    """Per-request records of one round (bad lines, too deep ones included, are skipped:
    they are not results),
    plain or gzip-compressed (`.gz`); at most REQUESTS_LIMIT bytes are read, so a
    compressed file that expands without end is cut short, not read to the end, and a
    compressed file larger than that on disk is not read (requests_problem)."""
    fd = _nofollow.open_regular(path)
    with os.fdopen(fd, "rb") as raw:
        if (why := requests_problem(path, os.fstat(raw.fileno()).st_size)) is not None:
            log.warning("request records %s not read: %s", path, why)
            return
        stream: io.BufferedIOBase = raw
        if path.suffix == layout.COMPRESSED_SUFFIX:
            stream = io.BufferedReader(_nofollow.ChunkReader(_nofollow.gunzip(raw, path)))
        try:
            yield from _records(stream)
        except Unreadable as exc:  # a damaged .gz ends its records
            log.warning("request records %s end early: %s", path, exc.message)


def requests_problem(path: Path, size: int) -> str | None:
    """Why a request file of `size` bytes on disk is not read: a compressed one larger
    than REQUESTS_LIMIT (its sparse holes or zero padding would be read to its end)."""
    if path.suffix != layout.COMPRESSED_SUFFIX or size <= REQUESTS_LIMIT:
        return None
    return (
        f"{path.name} is too large: {size} bytes compressed, over {REQUESTS_LIMIT >> 20} MiB; "
        "its records are not read (replace it with the file from the run)"
    )


def _records(stream: io.BufferedIOBase) -> Iterator[JSONObject]:
    left = REQUESTS_LIMIT
    while left > 0 and (line := stream.readline(min(_LINE_LIMIT, left))):
        left -= len(line)
        try:  # a line that is not UTF-8 is a bad line like any other
            record = _jsonload.loads(line.decode("utf-8", errors="replace"))
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record
