"""Typed records of the results directory's JSON: run.json and the phases' data (build,
check, and the bench's launches, their rounds and load points), issue 14 step 1.

`from_dict` reads what stackmatrix writes today and what it wrote before (bench.json
files of earlier versions lack keys; warm-up launches are indexed "W1"): a missing key
or a null is the field's default, never an error, because the report must still load
old results. Where the file is read, `_shapes` has already refused values of the wrong
type; `from_dict` still keeps what does not fit out of the typed fields. Keys no field
names travel in `extra`, so `to_dict` gives back what was read.

bench/phase.py still builds these records as dicts of the same shape; its writer can
switch to `LaunchRecord`/`RoundRecord` later without changing a byte of bench.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from stackmatrix.results import SCHEMA_VERSION, RunDir

__all__ = [
    "SCHEMA_VERSION",
    "BenchData",
    "BuildData",
    "CheckData",
    "LaunchRecord",
    "PointInfo",
    "PointRun",
    "ReportPolicy",
    "RoundRecord",
    "RunRecord",
]

_Dict = dict[str, Any]


def _obj(value: Any) -> _Dict:
    return dict(value) if isinstance(value, dict) else {}


def _objs(value: Any) -> list[_Dict]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _maybe_obj(value: Any) -> _Dict | None:
    """An object that may be absent (None) or empty ({}), kept apart."""
    return dict(value) if isinstance(value, dict) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    """A metric's value; as the report always read them, a bool counts as a number."""
    return float(value) if isinstance(value, int | float) else None


def _real(value: Any) -> float | None:
    """A number as it was written (an int stays an int)."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _extra(raw: Mapping[str, Any], cls: type) -> _Dict:
    known = {f.name for f in fields(cls)} - {"extra"}
    return {k: v for k, v in raw.items() if k not in known}


def _present(pairs: Mapping[str, Any]) -> _Dict:
    """The keys to write: a None field was absent when read (or is not set)."""
    return {k: v for k, v in pairs.items() if v is not None}


# ------------------------------------------------------------------ bench.json


@dataclass(frozen=True, kw_only=True)
class RoundRecord:
    """One measured round: its figures and the file of its request records."""

    index: int | None = None
    metrics: _Dict = field(default_factory=dict)
    requests_file: str | None = None
    warmup_errors: int | None = None
    extra: _Dict = field(default_factory=dict)

    def metric(self, name: str) -> float | None:
        return _number(self.metrics.get(name))

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RoundRecord:
        return cls(
            index=_int(raw.get("index")),
            metrics=_obj(raw.get("metrics")),
            requests_file=_str(raw.get("requests_file")),
            warmup_errors=_int(raw.get("warmup_errors")),
            extra=_extra(raw, cls),
        )

    def to_dict(self) -> _Dict:
        return _present({
            "index": self.index,
            "metrics": self.metrics,
            "requests_file": self.requests_file,
            "warmup_errors": self.warmup_errors,
        }) | self.extra  # fmt: skip


def _rounds(value: Any) -> tuple[RoundRecord, ...]:
    return tuple(RoundRecord.from_dict(r) for r in _objs(value))


def _values(rounds: tuple[RoundRecord, ...], metric: str) -> list[float]:
    return [v for v in (r.metric(metric) for r in rounds) if v is not None]


@dataclass(frozen=True, kw_only=True)
class PointRun:
    """A load point (`[[bench.points]]`) in one launch: its rounds on that server."""

    rounds: tuple[RoundRecord, ...] = ()
    summary: _Dict | None = None
    extra: _Dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> PointRun:
        return cls(
            rounds=_rounds(raw.get("rounds")),
            summary=_maybe_obj(raw.get("summary")),
            extra=_extra(raw, cls),
        )

    def to_dict(self) -> _Dict:
        rounds = [r.to_dict() for r in self.rounds]
        return _present({"rounds": rounds, "summary": self.summary}) | self.extra


@dataclass(frozen=True, kw_only=True)
class LaunchRecord:
    """One server launch: measured (index 1, 2, ...) or a warm-up ("W1", ...).

    `status` is None where an old file has none: such a launch ran to the end."""

    index: int | str | None = None
    status: str | None = None
    code: str | None = None
    message: str | None = None
    env_facts: _Dict = field(default_factory=dict)
    rounds: tuple[RoundRecord, ...] = ()
    points: dict[str, PointRun] | None = None
    summary: _Dict | None = None
    effective_config: _Dict | None = None
    extra: _Dict = field(default_factory=dict)  # sequence, started, finished, teardown...

    @property
    def ok(self) -> bool:
        return (self.status or "ok") == "ok"

    def values(self, metric: str, point: str | None = None) -> list[float]:
        """The rounds' values of `metric`: the headline workload's, or load point
        `point`'s; rounds without the metric are left out."""
        if point is None:
            return _values(self.rounds, metric)
        run = (self.points or {}).get(point)
        return _values(run.rounds, metric) if run is not None else []

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> LaunchRecord:
        index = raw.get("index")
        points = raw.get("points")
        return cls(
            index=index if isinstance(index, str) else _int(index),
            status=_str(raw.get("status")),
            code=_str(raw.get("code")),
            message=_str(raw.get("message")),
            env_facts=_obj(raw.get("env_facts")),
            rounds=_rounds(raw.get("rounds")),
            points=(
                {str(k): PointRun.from_dict(_obj(v)) for k, v in points.items()}
                if isinstance(points, dict)
                else None
            ),
            summary=_maybe_obj(raw.get("summary")),
            effective_config=_maybe_obj(raw.get("effective_config")),
            extra=_extra(raw, cls),
        )

    def to_dict(self) -> _Dict:
        points = (
            {k: p.to_dict() for k, p in self.points.items()} if self.points is not None else None
        )
        return _present({
            "index": self.index,
            "status": self.status,
            "code": self.code,
            "message": self.message,
            "env_facts": self.env_facts,
            "rounds": [r.to_dict() for r in self.rounds],
            "points": points,
            "summary": self.summary,
            "effective_config": self.effective_config,
        }) | self.extra  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class PointInfo:
    """What bench.json says of a load point for the whole cell."""

    metric: str | None = None
    max_concurrency: int | None = None
    num_prompts: int | None = None
    summary: _Dict | None = None
    extra: _Dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> PointInfo:
        return cls(
            metric=_str(raw.get("metric")),
            max_concurrency=_int(raw.get("max_concurrency")),
            num_prompts=_int(raw.get("num_prompts")),
            summary=_maybe_obj(raw.get("summary")),
            extra=_extra(raw, cls),
        )

    def to_dict(self) -> _Dict:
        return _present({
            "metric": self.metric,
            "max_concurrency": self.max_concurrency,
            "num_prompts": self.num_prompts,
            "summary": self.summary,
        }) | self.extra  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class BenchData:
    """bench.json's `data`: the cell's launches and what the engine said it ran."""

    engine: str | None = None
    engine_version: str | None = None
    launches: tuple[LaunchRecord, ...] = ()
    warmup_launches: tuple[LaunchRecord, ...] = ()
    effective_config: _Dict | None = None
    summary: _Dict | None = None
    points: dict[str, PointInfo] = field(default_factory=dict)
    extra: _Dict = field(default_factory=dict)  # workload_hash, server_info, order...

    def completed_values(self, metric: str, point: str | None = None) -> list[list[float]]:
        """Round values of `metric`, one list per launch that ran to the end (possibly
        empty): the samples every verdict is computed from."""
        return [launch.values(metric, point) for launch in self.launches if launch.ok]

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> BenchData:
        def launches(key: str) -> tuple[LaunchRecord, ...]:
            return tuple(LaunchRecord.from_dict(x) for x in _objs(raw.get(key)))

        return cls(
            engine=_str(raw.get("engine")),
            engine_version=_str(raw.get("engine_version")),
            launches=launches("launches"),
            warmup_launches=launches("warmup_launches"),
            effective_config=_maybe_obj(raw.get("effective_config")),
            summary=_maybe_obj(raw.get("summary")),
            points={
                str(k): PointInfo.from_dict(_obj(v)) for k, v in _obj(raw.get("points")).items()
            },
            extra=_extra(raw, cls),
        )

    def to_dict(self) -> _Dict:
        def launches(records: tuple[LaunchRecord, ...]) -> list[_Dict] | None:
            return [x.to_dict() for x in records] if records else None

        return _present({
            "engine": self.engine,
            "engine_version": self.engine_version,
            "launches": launches(self.launches),
            "warmup_launches": launches(self.warmup_launches),
            "effective_config": self.effective_config,
            "summary": self.summary,
            "points": {k: p.to_dict() for k, p in self.points.items()} or None,
        }) | self.extra  # fmt: skip


# ------------------------------------------------------------------ build.json, check.json


@dataclass(frozen=True, kw_only=True)
class BuildData:
    """build.json's `data`: the environment built (backend, interpreter, prefix, env) and
    its resolved lock, one {name, version, source, requested} per package."""

    environment: _Dict | None = None
    lock: tuple[_Dict, ...] | None = None
    lock_digest: str | None = None
    python_version: str | None = None  # results of earlier versions
    extra: _Dict = field(default_factory=dict)  # reused, content_hash, timings...

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> BuildData:
        lock = raw.get("lock")
        return cls(
            environment=_maybe_obj(raw.get("environment")),
            lock=tuple(_objs(lock)) if isinstance(lock, list) else None,
            lock_digest=_str(raw.get("lock_digest")),
            python_version=_str(raw.get("python_version")),
            extra=_extra(raw, cls),
        )

    def to_dict(self) -> _Dict:
        return _present({
            "environment": self.environment,
            "lock": list(self.lock) if self.lock is not None else None,
            "lock_digest": self.lock_digest,
            "python_version": self.python_version,
        }) | self.extra  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class CheckData:
    """check.json's `data`: the verdict, each target's coverage and what the runtime
    probe and the driver said (the check's inventory and analyses stay in `extra`)."""

    verdict: str | None = None
    target_summary: _Dict | None = None  # target -> native | ptx | none | n/a
    probe: _Dict | None = None
    driver: _Dict | None = None
    timing: _Dict | None = None  # "static_scan": "hit" when the scan came from the cache
    extra: _Dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CheckData:
        return cls(
            verdict=_str(raw.get("verdict")),
            target_summary=_maybe_obj(raw.get("target_summary")),
            probe=_maybe_obj(raw.get("probe")),
            driver=_maybe_obj(raw.get("driver")),
            timing=_maybe_obj(raw.get("timing")),
            extra=_extra(raw, cls),
        )

    def to_dict(self) -> _Dict:
        return _present({
            "verdict": self.verdict,
            "target_summary": self.target_summary,
            "probe": self.probe,
            "driver": self.driver,
            "timing": self.timing,
        }) | self.extra  # fmt: skip


# ------------------------------------------------------------------ run.json


@dataclass(frozen=True, kw_only=True)
class ReportPolicy:
    """run.json's `report`: how the spec's [report] asked to judge the cells."""

    headline: str | None = None
    confidence: float | None = None
    min_effect: float | None = None
    fail_on: tuple[str, ...] = ()
    extra: _Dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ReportPolicy:
        fail_on = raw.get("fail_on")
        return cls(
            headline=_str(raw.get("headline")),
            confidence=_real(raw.get("confidence")),
            min_effect=_real(raw.get("min_effect")),
            fail_on=tuple(str(x) for x in fail_on) if isinstance(fail_on, list) else (),
            extra=_extra(raw, cls),
        )

    def to_dict(self) -> _Dict:
        return {
            "headline": self.headline,
            "confidence": self.confidence,
            "min_effect": self.min_effect,
            "fail_on": list(self.fail_on),
        } | self.extra


# written by every run (null when unknown); the others only when they apply
_RUN_ALWAYS = (
    "spec_name", "spec_path", "spec_hash", "baseline", "targets", "driver", "cells",
    "order", "order_seed", "created", "updated", "stackmatrix_version", "run_id", "argv",
    "report",
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """run.json: what was run (the spec, its cells, the order, the report policy), by
    which stackmatrix, when; `merge` adds where the pieces came from."""

    spec_name: str = ""
    spec_path: str | None = None
    spec_hash: str = ""
    baseline: str = ""
    targets: tuple[str, ...] = ()
    driver: str | None = None
    cells: tuple[str, ...] = ()
    order: str = ""
    order_seed: int | None = None
    created: str = ""
    updated: str | None = None
    stackmatrix_version: str | None = None
    run_id: str | None = None
    argv: tuple[str, ...] = ()
    report: ReportPolicy = field(default_factory=ReportPolicy)
    finished: str | None = None  # set when the invocation's phases ended
    synthetic: str | None = None  # a note: the results are made up (examples, tests)
    merged_from: tuple[str, ...] | None = None  # set by `stackmatrix merge`
    merge_skipped: tuple[str, ...] | None = None
    extra: _Dict = field(default_factory=dict)

    @classmethod
    def read(cls, run: RunDir) -> RunRecord:
        """RUN/run.json; raises ResultsError when it is absent or of the wrong shape."""
        return cls.from_dict(run.read_run())

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RunRecord:
        def strs(key: str) -> tuple[str, ...]:
            value = raw.get(key)
            return tuple(str(x) for x in value) if isinstance(value, list) else ()

        def maybe_strs(key: str) -> tuple[str, ...] | None:
            return strs(key) if isinstance(raw.get(key), list) else None

        return cls(
            spec_name=str(raw.get("spec_name", "")),
            spec_path=_str(raw.get("spec_path")),
            spec_hash=str(raw.get("spec_hash", "")),
            baseline=str(raw.get("baseline", "")),
            targets=strs("targets"),
            driver=_str(raw.get("driver")),
            cells=strs("cells"),
            order=str(raw.get("order", "")),
            order_seed=_int(raw.get("order_seed")),
            created=str(raw.get("created", "")),
            updated=_str(raw.get("updated")),
            stackmatrix_version=_str(raw.get("stackmatrix_version")),
            run_id=_str(raw.get("run_id")),
            argv=strs("argv"),
            report=ReportPolicy.from_dict(_obj(raw.get("report"))),
            finished=_str(raw.get("finished")),
            synthetic=_str(raw.get("synthetic")),
            merged_from=maybe_strs("merged_from"),
            merge_skipped=maybe_strs("merge_skipped"),
            extra=_extra({k: v for k, v in raw.items() if k != "schema_version"}, cls),
        )

    def to_dict(self) -> _Dict:
        """run.json as `RunDir.write_json` writes it (it adds the schema version)."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        values["report"] = self.report.to_dict()
        out = {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}
        return {k: v for k, v in out.items() if k in _RUN_ALWAYS or v is not None} | self.extra
