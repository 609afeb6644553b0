"""The report's model made from a results directory: `build_model` reads the run (its
cells in report/cells.py), compares every cell with the baseline, at the headline and
at each load point, and gathers the notes shown at the top. The model's classes are in
report/matrix.py (re-exported here)."""

from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from stackmatrix._validate import Problems
from stackmatrix.layout import RUN_JSON
from stackmatrix.metric_registry import DEFAULT_HEADLINE
from stackmatrix.records import PointInfo, RunRecord
from stackmatrix.report import _frontier_text
from stackmatrix.report import config_drift as drift_mod
from stackmatrix.report import frontier as frontier_mod
from stackmatrix.report.cache import cache_notes
from stackmatrix.report.cells import cell_report
from stackmatrix.report.compare import judged
from stackmatrix.report.compat_data import compat_dir
from stackmatrix.report.facts import collect, log_engine
from stackmatrix.report.frontier import Load
from stackmatrix.report.interleaving import not_interleaved
from stackmatrix.report.latency import latency_rows
from stackmatrix.report.load import CellResults, RunResults, read_explanations
from stackmatrix.report.logfacts import LogPattern, load_patterns, read_facts, unread
from stackmatrix.report.matrix import (
    MISSING,
    SCHEMA_VERSION,
    UNREADABLE,
    CellReport,
    HistoryNote,
    LaunchRow,
    LoadPointReport,
    MatrixReport,
    PhaseSummary,
    PointRow,
)
from stackmatrix.report.prompt_lengths import prompt_form_note, prompt_length_notes
from stackmatrix.report.protocol import protocol
from stackmatrix.spec_model import SloBound
from stackmatrix.specfile.report import parse_slo
from stackmatrix.stats.power import Calibration, calibrate
from stackmatrix.stats.verdict import (
    Comparison,
    Thresholds,
    higher_is_better,
    interval,
    launch_samples,
)

log = logging.getLogger(__name__)
__all__ = [  # the model's classes, here too: stackmatrix.report.model is the public path
    "MISSING",
    "SCHEMA_VERSION",
    "UNREADABLE",
    "CellReport",
    "HistoryNote",
    "LaunchRow",
    "LoadPointReport",
    "MatrixReport",
    "PhaseSummary",
    "PointRow",
    "build_model",
    "thresholds_from",
]


def thresholds_from(run: RunRecord) -> tuple[str, Thresholds, tuple[str, ...]]:
    """The headline metric, thresholds and fail_on recorded in run.json (with defaults)."""
    policy = run.report
    defaults = Thresholds()
    thresholds = Thresholds(
        confidence=float(policy.confidence or defaults.confidence),
        min_effect=float(policy.min_effect or defaults.min_effect),
    )
    return policy.headline or DEFAULT_HEADLINE, thresholds, policy.fail_on


def build_model(
    results: RunResults,
    *,
    compat: Path | None = None,
    headline: str | None = None,
    slo: Sequence[SloBound] | None = None,
) -> MatrixReport:
    """`slo` judges the cells against these bounds instead of the spec's `[report] slo`."""
    run = results.record
    spec_headline, thresholds, fail_on = thresholds_from(run)
    headline = headline or spec_headline
    notes = list(results.problems)
    if run.synthetic:
        notes.insert(0, run.synthetic)
    patterns, ranking = _rules(compat, notes)
    base = results.cell(results.baseline)
    if base is None:
        notes.append(f"baseline {results.baseline!r} has no results: no verdicts")
    cells = _cell_reports(results, base, headline, thresholds, (patterns, ranking))
    notes += _later_notes(results, cells, patterns, headline)
    bounds = tuple(slo) if slo is not None else recorded_slo(run)
    where = _loads(results, bounds)
    cells = _with_frontiers(cells, results, where, bounds, thresholds, headline)
    return MatrixReport(
        spec_name=run.spec_name,
        spec_hash=run.spec_hash,
        created=run.created,
        baseline=results.baseline,
        targets=results.targets,
        headline=headline,
        thresholds=thresholds,
        fail_on=fail_on,
        order=run.order,
        cells=tuple(cells),
        spec_text=results.spec_text,
        notes=tuple(notes),
        calibration=_calibration(results, headline, thresholds),
        sample_unit=_unit(cells),
        explanations=read_explanations(results.path, notes),
        points=_points(results, base, thresholds),
        latency=latency_rows(results.cells),
        protocol=protocol(
            results.cells,
            results.baseline,
            headline,
            decided=all(c.verdict.decided for c in cells if not c.is_baseline and c.comparison),
            thresholds=thresholds,
        ),
        slo=bounds,
        loads=where,
    )


def _cell_reports(
    results: RunResults,
    base: CellResults | None,
    headline: str,
    thresholds: Thresholds,
    rules: tuple[Sequence[LogPattern], drift_mod.Ranking],
) -> list[CellReport]:
    """Every cell, compared with the baseline at the headline and in its configuration."""
    patterns, ranking = rules
    base_facts = collect(base, patterns) if base else None
    cells = []
    for cell in results.cells:
        comparison = None
        drift = None
        if base is not None and cell.id != results.baseline:
            comparison = _compare(cell, base, headline, thresholds)
            if base_facts is not None:
                drift = drift_mod.diff(
                    collect(cell, patterns),
                    base_facts,
                    differs=cell.differs,
                    ranking=ranking,
                    cell_server_args=_server_args(cell),
                )
        cells.append(cell_report(cell, results, headline, thresholds, comparison, drift))
    return cells


def _loads(results: RunResults, bounds: Sequence[SloBound]) -> tuple[Load, ...]:
    """The frontier's loads; none without load points and an SLO (nothing to show)."""
    described = _described(results)
    return frontier_mod.loads(results, described) if bounds or described else ()


def _later_notes(
    results: RunResults, cells: Sequence[CellReport], patterns: Sequence[LogPattern], headline: str
) -> list[str]:
    """The notes on the cells' logs, launches, caches, prompts and interleaving."""
    notes = _unread_notes(results.cells, patterns)
    notes += [cold.note() for cold in cold_first_launches(cells, headline)]
    notes += slow_startups(cells)
    notes += cache_notes(results.cells)
    notes += prompt_form_note(results.path, results.cells) + prompt_length_notes(results.cells)
    return notes + not_interleaved(results.cells, results.baseline)


def recorded_slo(run: RunRecord) -> tuple[SloBound, ...]:
    """run.json's `report.slo` (checked when run.json was read); none where absent."""
    if run.report.slo is None:
        return ()
    return parse_slo(run.report.slo, f"{RUN_JSON} report.slo", Problems())


def _with_frontiers(
    cells: Sequence[CellReport],
    results: RunResults,
    where: Sequence[Load],
    bounds: Sequence[SloBound],
    thresholds: Thresholds,
    headline: str,
) -> list[CellReport]:
    """Each cell with its frontier at `where` (none without loads) and, with an SLO, its
    verdicts against the baseline's and the sentence that says them."""
    if not where:
        return list(cells)
    made = {
        c.id: frontier_mod.frontier(c, where, bounds, thresholds.confidence) for c in results.cells
    }
    base, base_results = made.get(results.baseline), results.cell(results.baseline)
    out = []
    for report in cells:
        mine, mine_results = made[report.id], results.cell(report.id)
        if bounds and base is not None and base_results is not None and mine is not base:
            assert mine_results is not None  # every report is of a cell of the results
            mine = frontier_mod.judge(mine, base, (mine_results, base_results), where, thresholds)
        if bounds:
            said = _frontier_text.sentence(
                mine, base, headline=report.comparison, metric=headline, baseline=results.baseline
            )
            mine = replace(mine, sentence=said)
        out.append(replace(report, frontier=mine))
    return out


def _described(results: RunResults) -> dict[str, PointInfo]:
    """The load points, as the cells' bench.json name them (every one the spec's)."""
    described: dict[str, PointInfo] = {}
    for cell in results.cells:
        for name, info in cell.points().items():
            described.setdefault(name, info)
    return described


def _points(
    results: RunResults, base: CellResults | None, thresholds: Thresholds
) -> tuple[LoadPointReport, ...]:
    out = []
    for name, info in _described(results).items():
        metric = info.metric or DEFAULT_HEADLINE
        rows = []
        for cell in results.cells:
            launches = [r for r in cell.launches(metric, point=name) if r]
            samples = launch_samples(launches)
            comparison = None
            if base is not None and cell is not base and launches:
                comparison = _compare_at(cell, base, metric, name, thresholds)
            value = interval(samples, confidence=thresholds.confidence) if samples.values else None
            rows.append(
                PointRow(
                    cell=cell.id,
                    value=value,
                    launches=len(launches),
                    comparison=comparison,
                )
            )
        out.append(
            LoadPointReport(
                name=name,
                metric=metric,
                max_concurrency=info.max_concurrency,
                num_prompts=info.num_prompts,
                rows=tuple(rows),
                latency=latency_rows(results.cells, name),
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class ColdStart:
    """A cell whose first measured launch is an outlier on the bad side: it paid for
    something the warm-up launches did not (a JIT's compiles, cold caches)."""

    cell: str
    label: str  # the launch, e.g. L1
    first: float
    median: float  # of the cell's other launches
    warmup_launches: int
    run_warmups: int = 0  # warm-up launches of the whole run (a host warm-up: one cell's)
    warmed_by: str | None = None  # the cell the run's warm-up launch ran, where one did
    same_stack: bool = False  # that cell's server imported the same key versions

    @property
    def worse(self) -> float:
        return abs(self.first / self.median - 1)

    def note(self) -> str:
        return (
            f"{self.cell}: its first measured launch ({self.label}, {self.first:.4g}) is an "
            f"outlier, {self.worse:.0%} worse than its other launches' median "
            f"({self.median:.4g}): {self._advice()}"
        )

    def _advice(self) -> str:
        if self.warmup_launches:
            return (
                f"after {self.warmup_launches} warm-up launch(es) of its own it still paid "
                "for a cold start (a JIT's compiles, cold caches): raise "
                "bench.warmup_launches"
            )
        if self.run_warmups and self.same_stack and self.warmed_by:
            return (
                f"the run's warm-up launch ran {self.warmed_by}, the same stack, before it, "
                "so this was not the stack's first start; what made it slow is not in "
                "these results (its server log may say): set bench.warmup_launches to "
                "give every cell a warm-up launch of its own"
            )
        if self.run_warmups:
            who = f" (of {self.warmed_by})" if self.warmed_by else ""
            return (
                f"the run's warm-up launch{who} warmed the host, not this cell's own cold "
                "start (its JIT's compiles, its caches): set bench.warmup_launches to warm "
                "every cell"
            )
        return (
            "no warm-up launch ran before it, so it paid for the host's cold start: keep "
            "bench.host_warmup on (the default)"
        )


def cold_first_launches(cells: Sequence[CellReport], headline: str) -> list[ColdStart]:
    """The cells whose first measured launch was a cold start (the H200 upgrade run's
    first 0.5.12 launch was 23% slow after one warm-up launch, and made its noise 11.6%)."""
    out = []
    better_high = higher_is_better(headline)
    warmups = sum(len(c.warmup_launches) for c in cells)
    warmed = next((c for c in cells if c.warmup_launches), None)
    for cell in cells:
        measured = [r for r in cell.launches if r.value is not None]
        values = [r.value for r in measured if r.value is not None]
        if len(values) < 3 or not measured[0].outlier:
            continue
        first, median = values[0], statistics.median(values[1:])
        if median == 0 or (first < median) != better_high:
            continue  # an outlier on the good side is not a cold start
        out.append(
            ColdStart(
                cell=cell.id,
                label=measured[0].label,
                first=first,
                median=median,
                warmup_launches=len(cell.warmup_launches),
                run_warmups=warmups,
                warmed_by=warmed.id if warmed is not None else None,
                same_stack=warmed is not None
                and bool(cell.versions)
                and cell.versions == warmed.versions,
            )
        )
    return out


def slow_startups(cells: Sequence[CellReport]) -> list[str]:
    """Cells whose servers take much longer than the baseline's to be ready (1.5x and 10 s
    at least), in the median of the measured launches and in the fastest of them: a cost
    outside the throughput that every new replica pays. On the H200, flashinfer's servers
    took ~170 s against triton's ~85 s, every launch, caches warm. The fastest start keeps
    cold starts out: in an A/A pair of triton cells whose runs moved to a second host,
    the cell that happened to start first there had a median of 58 s against 37 s, and
    34 s against 34 s at the fastest (reports/examples/h200-sglang-aa)."""
    base = next((c for c in cells if c.is_baseline), None)
    base_ready = _ready(base) if base is not None else None
    if base is None or base_ready is None:
        return []
    out = []
    for cell in cells:
        ready = _ready(cell)
        if (
            cell.is_baseline
            or ready is None
            or not all(r >= 1.5 * b and r - b >= 10 for r, b in zip(ready, base_ready, strict=True))
        ):
            continue
        n = sum(1 for r in cell.launches if r.ready_s is not None)
        out.append(
            f"{cell.id}: its servers took {ready[0]:.0f} s to be ready (median of {n} "
            f"launches; {ready[1]:.0f} s at the fastest) against {base_ready[0]:.0f} s "
            f"({base_ready[1]:.0f} s) for the baseline {base.id}: a start-up cost (JIT "
            "compiles, CUDA graph captures, loading) that every new replica pays"
        )
    return out


def _ready(cell: CellReport) -> tuple[float, float] | None:
    """The median and the fastest of a cell's start-ups (None when none was measured)."""
    values = [r.ready_s for r in cell.launches if r.ready_s is not None]
    return (statistics.median(values), min(values)) if values else None


def _server_args(cell: CellResults) -> tuple[str, ...]:
    """The cell's own server arguments as plan.json defines them (none when absent)."""
    args = cell.definition.get("server_args")
    return tuple(str(a) for a in args) if isinstance(args, list) else ()


def _unread_notes(cells: Sequence[CellResults], patterns: Sequence[LogPattern]) -> list[str]:
    """Facts every log of the cell's engine should state that none of its logs did."""
    out = []
    for cell in cells:
        logs = cell.measured_server_logs()
        missing = unread(read_facts(logs, patterns, engine=log_engine(cell))) if logs else []
        if missing:
            out.append(
                f"{cell.id}: not read from its server logs (no line matched "
                f"compat/log_patterns.toml): {', '.join(missing)}"
            )
    return out


def _rules(compat: Path | None, notes: list[str]) -> tuple[Sequence[LogPattern], drift_mod.Ranking]:
    from stackmatrix.errors import Unreadable

    try:
        patterns: Sequence[LogPattern] = load_patterns(compat)
    except Unreadable as exc:
        notes.append(f"server logs not read: {exc.message}")
        patterns = ()
    try:
        ranking = drift_mod.load_ranking(compat)
    except Unreadable as exc:
        notes.append(f"differences not ranked: {exc.message}")
        ranking = drift_mod.Ranking(rules=())
    log.debug("rules from %s", compat or compat_dir())
    return patterns, ranking


def _compare(
    cell: CellResults, base: CellResults, headline: str, thresholds: Thresholds
) -> Comparison | None:
    return _compare_at(cell, base, headline, None, thresholds)


def _compare_at(
    cell: CellResults, base: CellResults, metric: str, point: str | None, thresholds: Thresholds
) -> Comparison | None:
    values = (cell.launches(metric, point), base.launches(metric, point))
    where = f" at load point {point!r}" if point else ""
    return judged(cell, base, values, metric=metric, thresholds=thresholds, where=where)


def _unit(cells: Sequence[CellReport]) -> str:
    units = {c.comparison.unit for c in cells if c.comparison and c.comparison.unit}
    return "round" if "round" in units else "launch"


def _calibration(
    results: RunResults, headline: str, thresholds: Thresholds
) -> tuple[str, Calibration] | None:
    """Noise estimate from the baseline's launches, else from the first cell with enough."""
    base = results.cell(results.baseline)
    others = [c for c in results.cells if c is not base]
    for cell in [base, *others] if base else others:
        launches = [r for r in cell.launches(headline) if r]
        if len(launches) >= 2:
            alpha = round(1 - thresholds.confidence, 9)
            return cell.id, calibrate(launches, alpha=alpha, power=thresholds.power)
    return None
