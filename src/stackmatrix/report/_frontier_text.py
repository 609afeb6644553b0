"""The frontier's words and its table, for matrix.md and matrix.html alike: the SLO as
a reader says it, one row per cell and load, one sentence per cell that gives the
headline's verdict and the SLO's together (a cell can be faster at the headline and
slower at the SLO)."""

from __future__ import annotations

from collections.abc import Sequence

from stackmatrix.report import fmt as _fmt
from stackmatrix.report.frontier import (
    MIN_LAUNCHES,
    CellFrontier,
    FrontierPoint,
    Load,
    fewest,
    per_gpu,
)
from stackmatrix.spec_model import SloBound
from stackmatrix.stats.verdict import Comparison

TITLE = "SLO, goodput and the frontier"
NOTE = (
    "Every load measured in the headline's launches, in the order of their load (by request "
    "rate where a load has one, then by concurrency): the server's output "
    "tok/s (and per GPU where a cell holds several) and the per-user tok/s (the median "
    "request's 1 / TPOT), each the median of launches with its interval."
)
SLO_NOTE = (
    "Goodput counts the requests whose own latencies are all within the SLO's bounds, per "
    "second of the round; attainment is their share of the requests sent; the SLO is met "
    "where the load's percentiles (medians of launches) are within its bounds, and the "
    "launches where each one's own are."
)
_KIND = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E"}
_VERSUS = {"higher": "faster", "lower": "slower", "same": "the same"}


def bound_label(bound: SloBound) -> str:
    """`TTFT p99 ≤ 2000 ms`."""
    return f"{_KIND[bound.kind]} p{bound.percentile} ≤ {bound.ms:g} ms"


def slo_text(bounds: Sequence[SloBound]) -> str:
    return ", ".join(bound_label(b) for b in bounds)


def header(bounds: Sequence[SloBound], conf: str) -> list[str]:
    head = ["cell", "load", f"output tok/s ({conf} CI)", f"per-user tok/s ({conf} CI)"]
    if not bounds:
        return head
    slo = [f"{_KIND[b.kind]} p{b.percentile} ms" for b in bounds]
    return [*head, f"goodput req/s ({conf} CI)", "attainment", *slo, "SLO met"]


def rows(frontiers: Sequence[CellFrontier], bounds: Sequence[SloBound]) -> list[list[str]]:
    return [_row(f, p, bounds) for f in frontiers for p in f.points]


def _row(f: CellFrontier, p: FrontierPoint, bounds: Sequence[SloBound]) -> list[str]:
    out = [f.cell, load_text(p.load), _throughput(p, f.gpus), _fmt.interval_text(p.per_user)]
    if not bounds:
        return out
    figures = [_fmt.number(p.figures.get(b.key)) for b in bounds]
    attained = "—" if p.attainment is None else f"{p.attainment:.0%}"
    return [*out, _fmt.interval_text(p.goodput), attained, *figures, _met(p)]


def load_text(load: Load) -> str:
    """`c4 (c=4)`, `r2 (rate 2/s, c=4)`."""
    said = load.described("c=")
    return f"{load.name} ({said})" if said else load.name


def order_note(loads: Sequence[Load]) -> str | None:
    """Where a load comes before one of a lower concurrency (by its rate), which offers
    the server more load is not known: the note says so, and that the largest load
    within the SLO follows this order. None where concurrency never falls along it."""
    pairs = [
        (a, b)
        for i, a in enumerate(loads)
        for b in loads[i + 1 :]
        if (a.max_concurrency or 0) > (b.max_concurrency or 0)
    ]
    if not pairs:
        return None
    a, b = pairs[0]
    return (
        f"These loads mix request rates and concurrencies: {a.label()} comes before "
        f"{b.label()} by its rate, though either may offer the server more load; the "
        "largest load within the SLO is the last one met in this order."
    )


def _throughput(p: FrontierPoint, gpus: int) -> str:
    text = _fmt.interval_text(p.throughput)
    shared = per_gpu(p.throughput, gpus) if gpus > 1 else None
    return text if shared is None else f"{text}; {_fmt.number(shared.median)} per GPU"


def _met(p: FrontierPoint) -> str:
    if p.slo_met is None:
        return "—"
    return f"{'yes' if p.slo_met else 'no'}, {p.met_launches}/{p.launches} launches"


def sentence(
    mine: CellFrontier,
    base: CellFrontier | None,
    *,
    headline: Comparison | None,
    metric: str,
    baseline: str,
) -> str:
    """The cell's headline verdict and its verdicts at the SLO, in one sentence."""
    if base is None or mine is base or mine.versus is None:
        return f"{mine.cell} (baseline) {_held(mine)}."
    verdict = headline.verdict.value if headline is not None else "not measured"
    at = "at the headline load"
    if headline is not None and headline.ratio is not None:
        at += f" ({_fmt.ratio_text(headline)} {_fmt.metric_label(metric)})"
    return (
        f"{mine.cell} is {verdict} {at} {_at_slo(mine, base, verdict, baseline)}{_goodput(mine)}."
    )


def _at_slo(mine: CellFrontier, base: CellFrontier, verdict: str, baseline: str) -> str:
    if mine.versus == "open":
        return f"and not judged at the SLO ({open_text(mine, base)}): " + largest_text(
            mine, base, baseline
        )
    said = _VERSUS.get(mine.versus or "")
    joined = "but" if {verdict, said} == {"faster", "slower"} else "and"
    if said is None:
        return (
            f"{joined} neither it nor the baseline {baseline} meets the SLO in every launch "
            "at any load"
        )
    return f"{joined} {said} at the SLO: {largest_text(mine, base, baseline)}"


def open_text(mine: CellFrontier, base: CellFrontier) -> str:
    """`1 launch against 3; a verdict needs 2 per cell, as the headline's`."""
    a, b = fewest(mine), fewest(base)
    return (
        f"{a} launch{'es' if a != 1 else ''} against {b}; a verdict needs {MIN_LAUNCHES} "
        "per cell, as the headline's"
    )


def largest_text(mine: CellFrontier, base: CellFrontier, baseline: str) -> str:
    """`it meets the SLO in every launch up to c2 (concurrency 2), the baseline a in
    every launch up to c4 (concurrency 4)` (`in its one launch` where it had one)."""
    return f"it {_held(mine)}, the baseline {baseline} {_held(base, again=True)}"


def _held(f: CellFrontier, *, again: bool = False) -> str:
    """`meets the SLO in every launch up to c4 (concurrency 4)`, or where no load held
    in every launch, `misses the SLO at every load in at least one launch`."""
    one = fewest(f) == 1
    if f.largest is None:
        return (
            ("misses it" if again else "misses the SLO")
            + " at every load"
            + (" in its one launch" if one else " in at least one launch")
        )
    every = "in its one launch" if one else "in every launch"
    verb = "" if again else "meets the SLO "  # `again`: said just before, not repeated
    return f"{verb}{every} up to {f.largest.label()}"


def _goodput(mine: CellFrontier) -> str:
    g = mine.goodput
    if g is None:
        return "; its goodput at the headline load was not measured"
    why = _fmt.ratio_text(g) if g.ratio is not None else g.reason
    return f"; its goodput at the headline load is {g.verdict.value} ({why})"
