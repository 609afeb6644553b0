"""The metrics stackmatrix measures: one entry each, with what the spec, the verdicts and
the report need to know of it, so none of them keeps a table of metric names.

How a metric is computed from a round's requests is `bench/metrics.py` (`round_metrics`,
whose keys are exactly these names: `tests/unit/test_metric_registry.py`); its
definition is in docs/bench.md. This module imports nothing of stackmatrix and nothing
heavy; its dataclass is still more than `stackmatrix inspect` imports, so the CLI reads
the headline names for its choices only when it builds its parser.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DEFAULT_HEADLINE",
    "HEADLINES",
    "LABELS",
    "LATENCY_KINDS",
    "LATENCY_STATS",
    "METRICS",
    "NAMES",
    "OUTPUT_THROUGHPUT",
    "Direction",
    "Metric",
    "find",
    "higher_is_better",
]

Direction = Literal["higher", "lower"]


@dataclass(frozen=True, kw_only=True)
class Metric:
    """One figure of a measured round, and of a launch and a cell by its medians."""

    name: str
    unit: str  # "tok/s", "req/s", "ms", "s" or "count"
    # which way is better; None for a count that describes the round and is not a
    # figure to better (what it compares as is `higher_is_better`'s rule for names)
    direction: Direction | None = None
    # the spec accepts it as `report.headline`, a load point's `metric`, `--headline`
    headline: bool = False
    # the report's words for it; None: the report shows its name
    label: str | None = None


# a latency's kinds and the statistics of each round's samples, in the order
# bench/metrics.py computes them: `<kind>_<stat>_ms` and `<kind>_samples`
LATENCY_KINDS: tuple[str, ...] = ("ttft", "itl", "tpot", "e2e")
LATENCY_STATS: tuple[str, ...] = ("mean", "median", "p90", "p99", "p999")


def _latency(kind: str, stat: str, *, headline: bool = False) -> Metric:
    return Metric(
        name=f"{kind}_{stat}_ms",
        unit="ms",
        direction="lower",
        headline=headline,
        label=f"{kind.upper()} {stat} (ms)" if headline else None,
    )


def _count(name: str, direction: Direction | None = None) -> Metric:
    return Metric(name=name, unit="count", direction=direction)


OUTPUT_THROUGHPUT = Metric(
    name="output_throughput", unit="tok/s", direction="higher", headline=True, label="output tok/s"
)
# The headlines first, in the order the spec's vocabulary lists them (the CLI's choices,
# the spec's messages); then the round's other figures in bench/metrics.py's order.
_HEADLINES: tuple[Metric, ...] = (
    OUTPUT_THROUGHPUT,
    Metric(
        name="request_throughput",
        unit="req/s",
        direction="higher",
        headline=True,
        label="requests/s",
    ),
    # a round's median over requests of 1 / TPOT: the speed one user sees
    Metric(
        name="decode_tok_s",
        unit="tok/s",
        direction="higher",
        headline=True,
        label="decode tok/s",
    ),
    _latency("ttft", "p99", headline=True),
    _latency("ttft", "median", headline=True),
    _latency("itl", "median", headline=True),
    _latency("tpot", "median", headline=True),
    _latency("e2e", "median", headline=True),
)
_ROUND: tuple[Metric, ...] = (
    _count("completed", "higher"),
    _count("errors", "lower"),
    _count("total_output_tokens"),
    _count("total_input_tokens"),
    Metric(name="duration_s", unit="s", direction="lower"),
    # requests in flight on average: the sum of their end-to-end times over the round's
    Metric(name="concurrency", unit="count"),
    Metric(name="queue_wait_mean_ms", unit="ms", direction="lower"),
    Metric(name="queue_wait_max_ms", unit="ms", direction="lower"),
    _count("usage_reported"),  # requests whose token count the server's usage gave
    _count("cached_input_tokens"),  # only where the server says
)
_HEADLINE_NAMES = {m.name for m in _HEADLINES}
_LATENCIES: tuple[Metric, ...] = tuple(
    metric
    for kind in LATENCY_KINDS
    for metric in (
        *(_latency(kind, stat) for stat in LATENCY_STATS),
        _count(f"{kind}_samples"),
    )
    if metric.name not in _HEADLINE_NAMES
)

METRICS: tuple[Metric, ...] = (*_HEADLINES, *_ROUND, *_LATENCIES)
NAMES: tuple[str, ...] = tuple(m.name for m in METRICS)
HEADLINES: tuple[str, ...] = tuple(m.name for m in METRICS if m.headline)
DEFAULT_HEADLINE = OUTPUT_THROUGHPUT.name  # a spec's `report.headline` when it names none
LABELS: dict[str, str] = {m.name: m.label for m in METRICS if m.label is not None}
_BY_NAME = {m.name: m for m in METRICS}
# A name outside the registry (a percentile of the SLO's, `ttft_p50_ms`; a request's
# `e2e_s`) is judged by its name: milliseconds and `e2e_s` are latencies, lower is
# better; anything else is a rate, higher is better.
_LOWER_BY_NAME = frozenset({"e2e_s"})


def find(name: str) -> Metric | None:
    """The metric called `name`, None for a name no metric has."""
    return _BY_NAME.get(name)


def higher_is_better(name: str) -> bool:
    """Whether a larger value of `name` is the better one: the registry's direction, or
    for a name it lacks or a metric without one, the rule of names above."""
    metric = find(name)
    if metric is not None and metric.direction is not None:
        return metric.direction == "higher"
    return not (name.endswith("_ms") or name in _LOWER_BY_NAME)
