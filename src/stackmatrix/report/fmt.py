"""Number and text formatting shared by the renderers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from stackmatrix import metric_registry
from stackmatrix.jsontypes import JSONObject, JSONValue
from stackmatrix.report.config_drift import Difference
from stackmatrix.report.latency import KINDS, SMALL_P999, LatencyRow, Percentiles
from stackmatrix.stats.verdict import Comparison, Interval

METRIC_LABELS = metric_registry.LABELS


def metric_label(metric: str) -> str:
    return METRIC_LABELS.get(metric, metric)


def number(value: float | None) -> str:
    """Three significant digits at least, never scientific for everyday magnitudes."""
    if value is None or not math.isfinite(value):
        return "—"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}" if magnitude >= 10000 else f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}" if magnitude < 10 else f"{value:.1f}"
    return f"{value:.3g}"


def seconds(value: float | None) -> str:
    """A duration of seconds to minutes (a server's start-up), to the second."""
    return "—" if value is None or not math.isfinite(value) else f"{value:.0f} s"


def count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def pct(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value:+.1%}"


def interval_text(iv: Interval | None) -> str:
    if iv is None:
        return "—"
    # the median of launches: the figure the console and bench.json give under this name
    if iv.low is None or iv.high is None:
        return number(iv.median)
    return f"{number(iv.median)} [{number(iv.low)}, {number(iv.high)}]"


def ratio_text(c: Comparison | None) -> str:
    if c is None or c.ratio is None:
        return "—"
    if c.low is None or c.high is None:
        return pct(c.change)
    return f"{pct(c.change)} [{pct(c.low - 1)}, {pct(c.high - 1)}]"


def shorten(value: str | None, limit: int = 60) -> str:
    if value is None:
        return "(absent)"
    return value if len(value) <= limit else value[: limit - 1] + "…"


def facts_text(facts: JSONObject, limit: int = 160) -> str:
    """Per-launch environment facts (clocks, load...) on one line, `before.loadavg=
    3.2/4.1/4.8`: nested facts as dotted keys, not raw JSON."""
    parts = [f"{key}={value}" for key, value in _flat_facts("", facts)]
    return shorten(", ".join(parts), limit) if parts else ""


def distinct_facts(facts: JSONObject, others: Sequence[JSONObject], limit: int = 160) -> str:
    """The facts of one launch that set it apart from the other launches of its cell: a
    number outside their range (each part of `1.1/0.9/0.5`), any other value none of
    them had. An outlier's note names these, not every fact (the GPU's name is the same
    in every launch and explains nothing)."""
    theirs: dict[str, list[str]] = {}
    for other in others:
        for key, value in _flat_facts("", other):
            theirs.setdefault(key, []).append(value)
    parts: list[str] = []
    if not others:
        return ""
    for key, value in _flat_facts("", facts):
        if not _could_explain(key):
            continue
        seen = theirs.get(key, [])  # none: the others had nothing there (no GPU process)
        if value in seen:
            continue
        mine, rest = _numbers(value), [_numbers(v) for v in seen]
        if seen and mine is not None and all(r is not None and len(r) == len(mine) for r in rest):
            ranges = list(zip(*[r for r in rest if r is not None], strict=True))
            if all(min(rng) <= x <= max(rng) for x, rng in zip(mine, ranges, strict=True)):
                continue
        parts.append(f"{key}={value}")
    return shorten(", ".join(parts), limit) if parts else ""


# Facts read on an idle GPU before or after a launch (its clocks and power at rest, the
# time, the GPU's name) say nothing of how fast the launch ran: on the H200 every launch
# read 345 MHz before it started. Only another tenant (processes, memory, utilization),
# heat and CPU load could explain a slow launch.
_NOT_EXPLAINING = ("clocks.", "power.draw", "time", "name", "index", "cpu_count")


def _could_explain(key: str) -> bool:
    last = key.rsplit(".", 1)[-1]
    return not any(part in key for part in _NOT_EXPLAINING[:2]) and last not in _NOT_EXPLAINING


def _numbers(value: str) -> tuple[float, ...] | None:
    try:
        return tuple(float(p) for p in value.split("/"))
    except ValueError:
        return None


def _flat_facts(prefix: str, value: JSONValue) -> list[tuple[str, str]]:
    if value is None or prefix.rsplit(".", 1)[-1] == "time":  # the clock is no cause
        return []
    if prefix.count(".") + prefix.count("[") > 8:  # results are input: bounded depth
        return [(prefix, "…")]
    if isinstance(value, dict):
        return [
            pair for k, v in value.items() for pair in _flat_facts(f"{prefix}.{k}".lstrip("."), v)
        ]
    if isinstance(value, list) and all(isinstance(x, str | int | float) for x in value):
        return [(prefix, "/".join(str(x) for x in value))] if value else []
    if isinstance(value, list):
        return [pair for i, v in enumerate(value) for pair in _flat_facts(f"{prefix}[{i}]", v)]
    return [(prefix, str(value))]


def setting(d: Difference) -> str:
    """`server:attention_backend` reads as attention_backend; packages keep their kind."""
    kind, _, name = d.key.partition(":")
    if kind in ("server", "log"):
        return name
    if kind == "cell":
        return f"{name} (cell)"
    return f"{kind} {name}" if name else kind


def origin(d: Difference, limit: int = 70) -> str:
    if d.evidence:
        return f"{d.source}: “{shorten(d.evidence, limit)}”"
    return d.source


POINTS_NOTE = (
    "Each load point is measured in the same server launches as the headline, after it; "
    "its comparison is shown, the headline alone decides the verdict."
)


def point_title(point: Any) -> str:
    """`c32: concurrency 32, 64 prompts` for a LoadPointReport."""
    parts = []
    if point.max_concurrency is not None:
        parts.append(f"concurrency {point.max_concurrency}")
    if point.num_prompts is not None:
        parts.append(count(point.num_prompts, "prompt"))
    return f"{point.name}: {', '.join(parts)}" if parts else str(point.name)


def items(value: JSONValue) -> list[JSONValue]:
    """The entries of a list read loosely from JSON (explanation.json's sentences,
    notes...): none when it is absent or not a list."""
    return value if isinstance(value, list) else []


def cannot_isolate_text(entry: JSONValue) -> str:
    """A difference `explain` could not revert alone, and what it follows where a revert
    cell brought it back (explanation.json's cannot_isolate entries)."""
    why = str(entry.get("why") or "") if isinstance(entry, dict) else str(entry)
    follows = entry.get("follows") if isinstance(entry, dict) else None
    if isinstance(follows, list) and follows:
        return f"{why}; it follows {' and '.join(str(f) for f in follows)} (see above)"
    return why


def method_text(min_effect: float, unit: str) -> str:
    """How the verdicts are made, in a reader's words (matrix.md and matrix.html)."""
    if unit != "launch":
        return (
            "Some cells had a single launch: the rounds inside one launch ignore "
            "launch-to-launch noise, so their verdict stays inconclusive."
        )
    return (
        "A cell's figure is the median of its launches (each launch the median of its "
        "rounds), shown with a confidence interval of their geometric mean. Launches run "
        "in cycles, one per cell in a randomized balanced order; each launch is paired "
        "with the baseline's of the same cycle, and the interval of their ratio decides: "
        f"equivalent when it lies within ±{min_effect:.0%}, slower or faster when it "
        "excludes no change, otherwise inconclusive (with the launches that would decide)."
    )


def detectable_text(report: Any) -> str:
    """The one power figure the report gives: each candidate verdict's own smallest
    change found with the report's power at the plan's last look (Comparison.detectable,
    from the verdict's paired spread), not a second estimate from one cell's launches."""
    found = [
        (c.id, c.comparison.detectable)
        for c in report.cells
        if not c.is_baseline and c.comparison is not None and c.comparison.detectable is not None
    ]
    if not found:
        return ""
    power = report.thresholds.power
    listed = ", ".join(f"`{cid}` {change:.1%}" for cid, change in found)
    return (
        f"Smallest change each verdict finds {power:.0%} of the time at the plan's last look, "
        f"from its own pairs: {listed}."
    )


def shape_text(launches: Sequence[Any], sep: str = " x ") -> str:
    """Measured launches x the rounds they ran: "5 x 2", or "5 x 2-7" where the launches
    ran different numbers of rounds (a minimum duration extends a launch's rounds)."""
    counts = sorted({len(launch.rounds) for launch in launches})
    if not counts:
        return "0"
    rounds = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    return f"{len(launches)}{sep}{rounds}"


LATENCY_TITLE = "Latency percentiles (ms): p50 / p90 / p99 / p99.9, samples per round"
FEW_P999_MARK = "†"
FEW_P999_NOTE = (
    f"{FEW_P999_MARK} a p99.9 of fewer than {SMALL_P999:,} samples per round: it lies "
    "among the round's few largest values, not a measured 99.9th percentile."
)


def latency_table(rows: Sequence[LatencyRow]) -> tuple[list[str], list[list[str]], str | None]:
    """The header, the rows and the footnote (where a p99.9 is of few samples) of a
    load's latency percentiles."""
    header = ["cell"] + [h for _, label in KINDS for h in (label, "n")]
    body = [[r.cell] + [x for p in r.percentiles for x in _latency_cells(p)] for r in rows]
    few = any(p.few_for_p999 and p.values[-1] is not None for r in rows for p in r.percentiles)
    return header, body, FEW_P999_NOTE if few else None


def _latency_cells(p: Percentiles) -> list[str]:
    texts = [number(v) for v in p.values]
    if p.few_for_p999 and p.values[-1] is not None:
        texts[-1] += FEW_P999_MARK
    return [" / ".join(texts), "—" if p.samples is None else f"{p.samples:,}"]
