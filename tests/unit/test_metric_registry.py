"""The metric registry (metric_registry.py): it names exactly what bench/metrics.py
computes, the spec's and the report's vocabularies are read from it, and its directions
are the ones the names gave before it."""

from __future__ import annotations

import pytest

from stackmatrix import metric_registry, spec_model
from stackmatrix.bench.client import RequestRecord
from stackmatrix.bench.metrics import round_metrics
from stackmatrix.report import fmt as _fmt
from stackmatrix.stats import verdict as stats


def _rec(index: int, *, cached: int | None = None, error: str | None = None) -> RequestRecord:
    return RequestRecord(
        index=index,
        ttft_s=0.1,
        itl_s=[0.02, 0.03],
        e2e_s=0.15,
        output_tokens=3,
        output_tokens_source="usage",
        queue_wait_s=0.0,
        error=error,
        prompt_tokens=10,
        cached_tokens=cached,
    )


def _computed() -> set[str]:
    """Every name a round can have: one with the server's cached tokens, one without,
    and one of no completed request."""
    rounds = (
        round_metrics([_rec(0, cached=4), _rec(1, error="boom")], 1.0),
        round_metrics([_rec(0)], 1.0),
        round_metrics([_rec(0, error="boom")], 0.0),
    )
    return {name for metrics in rounds for name in metrics}


def test_the_registry_names_what_the_bench_computes() -> None:
    computed = _computed()
    registered = set(metric_registry.NAMES)
    assert computed - registered == set(), "computed by bench/metrics.py, not registered"
    assert registered - computed == set(), "registered, computed by nothing"
    assert len(metric_registry.NAMES) == len(registered), "a metric registered twice"


def _old_rule(name: str) -> bool:
    """The direction by name that the registry replaced."""
    return not (name.endswith("_ms") or name in {"duration_s", "e2e_s", "errors"})


@pytest.mark.parametrize(
    "metric", [m for m in metric_registry.METRICS if m.direction is not None], ids=lambda m: m.name
)
def test_a_registered_direction_is_the_one_its_name_gave(metric: metric_registry.Metric) -> None:
    assert (metric.direction == "higher") == _old_rule(metric.name)
    assert stats.higher_is_better(metric.name) == _old_rule(metric.name)


# an SLO's percentile, a request's field, a report's figure, a count with no direction
NAMELESS = ["ttft_p50_ms", "e2e_p50_ms", "e2e_s", "goodput", "total_input_tokens"]


@pytest.mark.parametrize("name", NAMELESS)
def test_a_name_without_a_direction_is_judged_by_its_name(name: str) -> None:
    found = metric_registry.find(name)
    assert found is None or found.direction is None
    assert stats.higher_is_better(name) == _old_rule(name)


def test_the_vocabularies_are_the_registrys() -> None:
    headlines = tuple(m.name for m in metric_registry.METRICS if m.headline)
    assert headlines == spec_model.METRICS == metric_registry.HEADLINES
    assert metric_registry.DEFAULT_HEADLINE in headlines
    # every headline has the report's words, and only a headline has them
    assert tuple(_fmt.METRIC_LABELS) == headlines
    assert all(m.direction is not None for m in metric_registry.METRICS if m.headline)
