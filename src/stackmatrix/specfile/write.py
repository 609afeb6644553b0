"""A typed spec written as TOML that `load_spec` reads back into an equal `Spec` (its
`path` aside, which is where a spec is read from): what explain writes as each round's
spec, for the round's run, its reports, `--resume` and the people who read it.

Every cell is written whole as a [[cell]] table (no [defaults], no [axes]), and only the
values that differ from the loader's defaults, but for the few a reader looks for first
(a cell's id, python and backend; the bench's engine, launches, rounds and warm-up
launches). A cell's `axes` (the axis labels it was expanded from) are not a key of a
[[cell]] table: a spec whose cells came from [axes] is read back with none."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import fields
from typing import TypeAlias

from stackmatrix.metric_registry import DEFAULT_HEADLINE
from stackmatrix.spec_model import Bench, Cell, Executor, ReportPolicy, Spec, Workload

# what a spec's values are: scalars, arrays of strings, and `launches = {min, max}`
Value: TypeAlias = str | int | float | bool | tuple[str, ...] | dict[str, int] | dict[str, float]
Pairs: TypeAlias = list[tuple[str, Value]]
Model: TypeAlias = Cell | Bench | Workload | ReportPolicy | Executor


def dumps(spec: Spec) -> str:
    """The TOML text of `spec`."""
    lines = _assignments(_top(spec))
    for cell in spec.cells:
        lines += ["", "[[cell]]", *_assignments(_cell(cell))]
        if cell.env:
            lines += ["", "[cell.env]", *_assignments(list(cell.env))]
    if spec.bench is not None:
        lines += _bench(spec.bench)
    lines += _section("report", _report(spec.report))
    lines += _section("executor", _changed(spec.executor, Executor()))
    return "\n".join(lines) + "\n"


def _top(spec: Spec) -> Pairs:
    out: Pairs = [("name", spec.name)]
    if spec.description:
        out.append(("description", spec.description))
    out.append(("baseline", spec.baseline))
    if spec.targets:
        out.append(("targets", spec.targets))
    if spec.driver is not None:
        out.append(("driver", spec.driver))
    if spec.order != "balanced":
        out.append(("order", spec.order))
    if spec.order_seed is not None:
        out.append(("order_seed", spec.order_seed))
    return out


_CELL_ALWAYS = ("id", "python", "backend")


def _cell(cell: Cell) -> Pairs:
    """The cell's keys in the order of its fields; its env is a table of its own."""
    return _changed(cell, Cell(id=cell.id), always=_CELL_ALWAYS, skip=("env", "axes"))


_BENCH_ALWAYS = ("engine", "launches", "rounds", "warmup_launches")


def _bench(bench: Bench) -> list[str]:
    pairs = _changed(
        bench, Bench(), always=_BENCH_ALWAYS, skip=("min_launches", "workload", "points")
    )
    if bench.min_launches is not None:  # adaptive: `launches = {min = 3, max = 12}`
        adaptive = {"min": bench.min_launches, "max": bench.launches}
        pairs = [(k, adaptive if k == "launches" else v) for k, v in pairs]
    lines = ["", "[bench]", *_assignments(pairs)]
    lines += _section("bench.workload", _changed(bench.workload, Workload()))
    for point in bench.points:
        # a point is the headline workload with some of its keys overridden
        head: Pairs = [("name", point.name)]
        if point.metric != DEFAULT_HEADLINE:
            head.append(("metric", point.metric))
        overrides = _changed(point.workload, bench.workload)
        lines += ["", "[[bench.points]]", *_assignments([*head, *overrides])]
    return lines


def _report(report: ReportPolicy) -> Pairs:
    """[report]'s changed keys; its SLO as the table it is written as."""
    pairs = _changed(report, ReportPolicy(), skip=("slo",))
    if report.slo:
        pairs.append(("slo", {b.key: b.ms for b in report.slo}))
    return pairs


def _section(name: str, pairs: Pairs) -> list[str]:
    return ["", f"[{name}]", *_assignments(pairs)] if pairs else []


def _changed(
    value: Model, default: Model, *, always: Iterable[str] = (), skip: Iterable[str] = ()
) -> Pairs:
    """The fields of the dataclass `value` that differ from `default`'s (or are asked for
    always), None left out: TOML has no null, and the loader reads an absent key as None."""
    out: Pairs = []
    for f in fields(value):
        if f.name in skip:
            continue
        mine = getattr(value, f.name)
        if mine is None or (f.name not in always and mine == getattr(default, f.name)):
            continue
        out.append((f.name, _plain(f.name, mine)))
    return out


def _plain(name: str, value: object) -> Value:
    if isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
        return tuple(str(v) for v in value)
    raise TypeError(f"cannot write {name} = {value!r} as TOML")


def _assignments(pairs: Iterable[tuple[str, Value]]) -> list[str]:
    return [f"{_key(k)} = {_value(v)}" for k, v in pairs]


_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _key(key: str) -> str:
    return key if _BARE.fullmatch(key) else _string(key)


def _string(text: str) -> str:
    # A JSON string is a TOML basic string, but for DEL, which TOML wants escaped
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return "nan" if math.isnan(value) else repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(_string(v) for v in value) + "]"
    inner = ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items())
    return "{ " + inner + " }" if inner else "{}"
