"""The [report] table of a spec, the one parser of --fail-on, and the one reader of an
SLO table (the spec's `slo`, run.json's copy of it, `report --slo`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any, cast

from stackmatrix._validate import Problems, join, type_name
from stackmatrix.errors import UsageError
from stackmatrix.spec_model import (
    CONFIDENCE_RANGE,
    FAIL_ON,
    METRICS,
    MIN_EFFECT_RANGE,
    SLO_FAIL_ON,
    SLO_KEYS,
    ReportPolicy,
    SloBound,
    SloKind,
)
from stackmatrix.specfile._values import (
    check_bool,
    check_int,
    check_list,
    get_choice,
    get_float,
    get_str_list,
    get_table,
    or_default,
)

REPORT_KEYS = tuple(f.name for f in fields(ReportPolicy))


def parse_report(raw: Mapping[str, Any], p: Problems) -> ReportPolicy:
    r = get_table(raw, "report", "", p)
    p.unknown_keys("report", r, REPORT_KEYS)
    d = ReportPolicy()
    headline = get_choice(r, "headline", "report", METRICS, p) or d.headline
    fail_on = check_list(r.get("fail_on", []), "report.fail_on", p)
    for i, item in enumerate(fail_on):
        if item not in FAIL_ON:
            p.add(join("report.fail_on", i), f"{item!r} is not one of {', '.join(FAIL_ON)}")
        elif item in SLO_FAIL_ON and "slo" not in r:
            p.add(
                join("report.fail_on", i),
                f"{item!r} judges cells at the SLO, and [report] sets none: add "
                f"slo = {SLO_EXAMPLE} or leave {item!r} out",
            )
    return ReportPolicy(
        headline=headline,
        confidence=or_default(
            get_float(r, "confidence", "report", p, *CONFIDENCE_RANGE), d.confidence
        ),
        min_effect=or_default(
            get_float(r, "min_effect", "report", p, *MIN_EFFECT_RANGE), d.min_effect
        ),
        fail_on=tuple(fail_on),
        explain=check_bool(r.get("explain", d.explain), "report.explain", p),
        explain_rounds=check_int(
            r.get("explain_rounds", d.explain_rounds), "report.explain_rounds", p, minimum=1
        )
        or d.explain_rounds,
        explain_cells=tuple(get_str_list(r, "explain_cells", "report", p)),
        slo=parse_slo(r["slo"], "report.slo", p) if "slo" in r else (),
    )


SLO_EXAMPLE = "{ ttft_p99_ms = 2000, tpot_p99_ms = 50 }"


def parse_slo(value: object, path: str, p: Problems) -> tuple[SloBound, ...]:
    """`{ ttft_p99_ms = 2000, ... }` as bounds, in SLO_KEYS' order; each problem (an
    unknown key, a value that is no positive, finite number of milliseconds) added."""
    if not isinstance(value, dict):
        p.add(path, f"expected a table such as {SLO_EXAMPLE}, got {type_name(value)} {value!r}")
        return ()
    if not value:
        p.add(path, f"an empty table sets no bound: name at least one, as in {SLO_EXAMPLE}")
        return ()
    p.unknown_keys(path, value, SLO_KEYS)
    found = {k: ms for k in SLO_KEYS if k in value and (ms := _slo_ms(value[k], join(path, k), p))}
    return tuple(_bound(key, ms) for key, ms in found.items())


def _slo_ms(value: object, path: str, p: Problems) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        p.add(path, f"expected a number of milliseconds, got {type_name(value)} {value!r}")
        return None
    if not math.isfinite(value):
        p.add(path, f"{value!r} is not a finite number of milliseconds")
        return None
    if value <= 0:
        p.add(path, f"{value!r} ms is no bound: a latency bound is above 0 ms")
        return None
    return float(value)


def _bound(key: str, ms: float) -> SloBound:
    kind, percentile, _ = key.split("_")  # a key of SLO_KEYS: "ttft_p99_ms"
    return SloBound(kind=cast(SloKind, kind), percentile=int(percentile[1:]), ms=ms)


def slo_table(bounds: Sequence[SloBound]) -> dict[str, float]:
    """The bounds as the table they were read from (run.json keeps it so)."""
    return {b.key: b.ms for b in bounds}


def parse_slo_args(values: Sequence[str]) -> tuple[SloBound, ...]:
    """`report --slo ttft_p99_ms=2000 --slo tpot_p99_ms=50` (or comma-separated): the
    bounds, checked as a spec's are."""
    table: dict[str, object] = {}
    for item in (v.strip() for value in values for v in value.split(",") if v.strip()):
        key, sep, text = item.partition("=")
        try:
            table[key.strip()] = float(text) if sep else text
        except ValueError:
            table[key.strip()] = text
    p = Problems()
    bounds = parse_slo(table, "--slo", p)
    if p:
        raise UsageError("; ".join(p.items) + "; e.g. --slo ttft_p99_ms=2000,tpot_p99_ms=50")
    return bounds


def parse_fail_on(values: Sequence[str]) -> tuple[str, ...]:
    """`["incompatible,regression"]` -> ("incompatible", "regression"), checked: the one
    parser of --fail-on (run, report, merge)."""
    items = tuple(v.strip() for value in values for v in value.split(",") if v.strip())
    unknown = [v for v in items if v not in FAIL_ON]
    if unknown:
        raise UsageError(
            f"--fail-on: unknown value(s) {', '.join(map(repr, unknown))}; "
            f"choose from {', '.join(FAIL_ON)}"
        )
    return items
