"""bench.json's data: the cell's launches (measured and warm-up), their rounds and load
points, and what the engine said it ran."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from stackmatrix.jsontypes import JSONObject, JSONValue
from stackmatrix.records.decode import decode, number, numbers, plain, present, written

# a summary of figures: its values that are numbers are read (`numbers`)
_NUMBERS = {"read": numbers}


@dataclass(frozen=True, kw_only=True)
class RoundRecord:
    """One measured round: its figures and the file of its request records."""

    index: int | None = None
    # the client's figures (a number, or None where a round had none) and the keys of
    # other versions (client_cpu_shares...): bench/ narrows what it reads of both
    metrics: JSONObject = field(default_factory=dict)
    requests_file: str | None = None
    warmup_errors: int | None = None
    extra: JSONObject = field(default_factory=dict)

    def metric(self, name: str) -> float | None:
        return number(self.metrics.get(name))

    @classmethod
    def from_dict(cls, raw: Mapping[str, JSONValue]) -> RoundRecord:
        return decode(cls, raw)

    def to_dict(self) -> JSONObject:
        return written(self)


def _values(rounds: tuple[RoundRecord, ...], metric: str) -> list[float]:
    return [v for v in (r.metric(metric) for r in rounds) if v is not None]


@dataclass(frozen=True, kw_only=True)
class PointRun:
    """A load point (`[[bench.points]]`) in one launch: its rounds on that server."""

    rounds: tuple[RoundRecord, ...] = ()
    summary: dict[str, float] | None = field(default=None, metadata=_NUMBERS)
    extra: JSONObject = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: Mapping[str, JSONValue]) -> PointRun:
        return decode(cls, raw)

    def to_dict(self) -> JSONObject:
        return written(self)


def _argv(value: object) -> tuple[str, ...] | None:
    """A list of strings; None for anything else (one item not a string included)."""
    if not isinstance(value, list):
        return None
    argv = tuple(a for a in value if isinstance(a, str))
    return argv if len(argv) == len(value) else None


@dataclass(frozen=True, kw_only=True)
class LaunchRecord:
    """One server launch: measured (index 1, 2, ...) or a warm-up ("W1", ...).

    `status` is None where an old file has none: such a launch ran to the end. The
    fields are in the order bench/ writes them; `teardown` (null when no server
    started, so not a field: a None field is not written) travels in `extra`, which
    stands where the teardown is written."""

    index: int | str | None = None
    sequence: int | None = None
    started: str | None = None
    env_facts: JSONObject = field(default_factory=dict)
    status: str | None = None
    rounds: tuple[RoundRecord, ...] = ()
    launch_argv: tuple[str, ...] | None = field(default=None, metadata={"read": _argv})
    # from the server's start to its readiness (started by us)
    ready_s: float | None = field(default=None, metadata={"read": number})
    points: dict[str, PointRun] | None = None
    code: str | None = None
    message: str | None = None
    # teardown, mapped, other versions' keys; Any, not JSONObject: report/mapped.py
    # indexes `mapped` without narrowing each value
    extra: dict[str, Any] = field(default_factory=dict)
    finished: str | None = None
    summary: dict[str, float] | None = field(default=None, metadata=_NUMBERS)
    effective_config: JSONObject | None = None

    @property
    def ok(self) -> bool:
        return (self.status or "ok") == "ok"

    def span(self) -> tuple[datetime, datetime] | None:
        """When the launch started and finished, in UTC; None where either time is
        missing, unreadable, without a zone, or the end precedes the start (results
        are input)."""
        try:
            start = datetime.fromisoformat(self.started or "")
            end = datetime.fromisoformat(self.finished or "")
        except ValueError:
            return None
        if start.tzinfo is None or end.tzinfo is None or end < start:
            return None
        return start.astimezone(UTC), end.astimezone(UTC)

    def values(self, metric: str, point: str | None = None) -> list[float]:
        """The rounds' values of `metric`: the headline workload's, or load point
        `point`'s; rounds without the metric are left out."""
        if point is None:
            return _values(self.rounds, metric)
        run = (self.points or {}).get(point)
        return _values(run.rounds, metric) if run is not None else []

    @classmethod
    def from_dict(cls, raw: Mapping[str, JSONValue]) -> LaunchRecord:
        return decode(cls, raw)

    def to_dict(self) -> JSONObject:
        return written(self)


@dataclass(frozen=True, kw_only=True)
class PointInfo:
    """What bench.json says of a load point for the whole cell."""

    metric: str | None = None
    max_concurrency: int | None = None
    num_prompts: int | None = None
    # requests per second it was sent at; None: as fast as its concurrency allows (and
    # in results of versions that did not record it: the spec says)
    request_rate: float | None = None
    summary: dict[str, float] | None = field(default=None, metadata=_NUMBERS)
    extra: JSONObject = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: Mapping[str, JSONValue]) -> PointInfo:
        return decode(cls, raw)

    def to_dict(self) -> JSONObject:
        return written(self)


@dataclass(frozen=True, kw_only=True)
class BenchData:
    """bench.json's `data`: the cell's launches and what the engine said it ran."""

    engine: str | None = None
    engine_version: str | None = None
    launches: tuple[LaunchRecord, ...] = ()
    warmup_launches: tuple[LaunchRecord, ...] = ()
    effective_config: JSONObject | None = None
    summary: dict[str, float] | None = field(default=None, metadata=_NUMBERS)
    points: dict[str, PointInfo] = field(default_factory=dict)
    extra: JSONObject = field(default_factory=dict)  # workload_hash, server_info, order...

    def completed_values(self, metric: str, point: str | None = None) -> list[list[float]]:
        """Round values of `metric`, one list per launch that ran to the end (possibly
        empty): the samples every verdict is computed from."""
        return [launch.values(metric, point) for launch in self.launches if launch.ok]

    def completed_blocks(self) -> list[int]:
        """The cycle of each launch `completed_values` lists: launch k of every cell runs in
        cycle k of the schedule (bench/schedule.py), so its index is its block; a launch
        without an integer index takes its position."""
        ok = [launch for launch in self.launches if launch.ok]
        return [ln.index if isinstance(ln.index, int) else i for i, ln in enumerate(ok, 1)]

    def completed_slots(self) -> list[int | None]:
        """When each launch of `completed_values` started (epoch milliseconds; None where
        unknown): which of two launches of a cycle ran first. Start times, not the
        schedule's slot numbers, which restart with every session of a resumed run."""
        return [_epoch_ms(ln) for ln in self.launches if ln.ok]

    def looks(self) -> int:
        """Planned looks at the verdict: max - min + 1 launches per cell when the launches
        were adaptive (`launches = {min, max}`), else 1."""
        bounds = self.launch_bounds()
        return 1 if bounds is None else bounds[1] - bounds[0] + 1

    def launch_bounds(self) -> tuple[int, int] | None:
        """(min, max) launches per cell of an adaptive plan; None for a fixed one."""
        plan = self.extra.get("launch_plan")
        if not isinstance(plan, dict):
            return None
        low, high = plan.get("min"), plan.get("max")
        if not (isinstance(low, int) and isinstance(high, int)) or not 1 <= low < high:
            return None
        return low, min(high, 10_000)

    @classmethod
    def from_dict(cls, raw: Mapping[str, JSONValue]) -> BenchData:
        return decode(cls, raw)

    def to_dict(self) -> JSONObject:
        def launches(records: tuple[LaunchRecord, ...]) -> list[JSONValue] | None:
            return [x.to_dict() for x in records] if records else None

        return (
            present(
                {
                    "engine": self.engine,
                    "engine_version": self.engine_version,
                    "launches": launches(self.launches),
                    "warmup_launches": launches(self.warmup_launches),
                    "effective_config": self.effective_config,
                    "summary": plain(self.summary),
                    "points": {k: p.to_dict() for k, p in self.points.items()} or None,
                }
            )
            | self.extra
        )


def _epoch_ms(launch: LaunchRecord) -> int | None:
    span = launch.span()
    return int(span[0].timestamp() * 1000) if span is not None else None
