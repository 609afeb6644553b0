"""The [report] table of a spec, and the one parser of --fail-on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

from stackmatrix._validate import Problems, join
from stackmatrix.errors import UsageError
from stackmatrix.spec._values import (
    check_bool,
    check_int,
    check_list,
    get_choice,
    get_float,
    get_str_list,
    get_table,
    or_default,
)
from stackmatrix.spec_model import (
    CONFIDENCE_RANGE,
    FAIL_ON,
    METRICS,
    MIN_EFFECT_RANGE,
    ReportPolicy,
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
    )


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
