"""One cell's bench result while the phase runs: its launches as they are recorded,
a crash as its status, and what it says when it ends (summaries and findings)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from stackmatrix import layout
from stackmatrix._secrets import redact
from stackmatrix.bench import metrics
from stackmatrix.bench.engines import EffectiveConfig, Engine
from stackmatrix.built_environment import Environment
from stackmatrix.findings import Finding, Severity
from stackmatrix.jsontypes import JSONObject, JSONValue
from stackmatrix.metric_registry import DEFAULT_HEADLINE
from stackmatrix.outcome import Fail, apply
from stackmatrix.records import BenchData, LaunchRecord, PointInfo, RoundRecord
from stackmatrix.results import CellDir, PhaseResult, PhaseRun, Status, now_iso
from stackmatrix.spec_model import Bench


@dataclass(kw_only=True)
class CellState:
    """One cell's bench result while the phase runs: its status in `result`, its data
    typed in `data` (the measured launches in `launches`), both written by `save`."""

    cell_id: str
    cell_dir: CellDir
    run: PhaseRun  # its status, and where a crash or Ctrl-C becomes one (results.py)
    environment: Environment | None
    server_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    data: BenchData = field(default_factory=BenchData)
    launches: list[LaunchRecord] = field(default_factory=list)
    version: str | None = None

    @property
    def result(self) -> PhaseResult:
        return self.run.result

    @property
    def failed(self) -> bool:
        return self.result.status is Status.FAILED

    def _sync(self) -> None:
        self.result.data = replace(self.data, launches=tuple(self.launches)).to_dict()

    def save(self) -> None:
        """bench.json as the cell stands now (after every launch: a crash or Ctrl-C
        keeps what was measured)."""
        self._sync()
        self.run.save()

    def crash(self, exc: Exception, what: str) -> None:
        """A crash of ours in `what` (a launch, a warm-up launch) fails this cell only;
        its completed launches stay."""
        self._sync()
        self.run.crash(exc, what)

    def interrupt(self) -> None:
        self._sync()
        self.run.interrupt("interrupted; re-run to resume from the launches done")


def round_summary(rounds: Sequence[RoundRecord]) -> dict[str, float]:
    """Each metric's median over the rounds of one launch (or of one load point in it)."""
    return metrics.launch_summary([{"metrics": r.metrics} for r in rounds])


def record_launch(
    st: CellState,
    launch: LaunchRecord,
    config: EffectiveConfig | None,
    *,
    bench: Bench,
    engine: Engine,
    wl_hash: str,
) -> None:
    """A measured launch into the cell's bench.json, written at once (a crash or Ctrl-C
    after it keeps it); a failed launch fails the cell."""
    st.launches.append(launch)
    extra = {**st.data.extra, "workload_hash": wl_hash}
    effective = st.data.effective_config
    if config is not None:
        effective, extra["server_info"] = redact(config.flat), redact(config.raw)
    extra.setdefault("launch_argv", list(launch.launch_argv or ()))
    st.data = replace(
        st.data,
        engine=engine.name,
        engine_version=config.version if config else st.data.engine_version,
        effective_config=effective,
        extra=extra,
    )
    if launch.status != "ok":
        message = f"launch {launch.index}: {launch.message or ''}"
        apply(st.result, Fail(launch.code or "server_failed", message))
        st.result.finished = now_iso()
    st.data = _summarize(st.data, st.launches, bench)
    st.save()


def finish(st: CellState, bench: Bench, headline: str = DEFAULT_HEADLINE) -> PhaseResult:
    result = st.result
    if result.status is Status.INTERRUPTED:
        result.status = Status.OK
        result.message = _ok_message(st.launches, headline)
        result.finished = now_iso()
    errors = sum(_errors(r) for ln in st.launches for r in ln.rounds)
    result.findings = [*busy_client(st), *result.findings]
    if errors:
        result.findings = [
            *result.findings,
            Finding(
                code="SM-BENCH-REQUEST-ERRORS",
                severity=Severity.WARN,
                cell=st.cell_id,
                subject="bench",
                message=(
                    f"{errors} measured request(s) failed; their errors are in the "
                    f"{layout.REQUESTS_GLOB} files next to {layout.phase_result('bench')}"
                ),
                details={"errors": errors},
            ),
        ]
    st.data = _summarize(st.data, st.launches, bench)
    st.save()
    return result


CLIENT_BUSY = 0.5  # of one core: above it the client's own timing degrades
CLIENT_BUSY_MIN_S = 2.0  # shorter rounds are dominated by fixed costs (loop, connections)


def busy_client(st: CellState) -> list[Finding]:
    """A round where the client (with worker processes: any one of them) used more than
    half a core: what it measured may be the client's limit, not the server's (a
    finding, never a silent number)."""
    rounds = [
        r
        for ln in st.launches
        for rounds in (ln.rounds, *(p.rounds for p in (ln.points or {}).values()))
        for r in rounds
        if figure(r, "duration_s") >= CLIENT_BUSY_MIN_S
    ]
    busiest = max(rounds, key=_cpu_share, default=None)
    if busiest is None or _cpu_share(busiest) <= CLIENT_BUSY:
        return []
    share, per_worker = _cpu_share(busiest), _shares(busiest.extra.get("client_cpu_shares"))
    who = "the benchmark client"
    details: JSONObject = {"client_cpu_share_max": round(share, 3)}
    if per_worker:
        k = per_worker.index(max(per_worker)) + 1
        who = f"worker {k} of the benchmark client's {len(per_worker)}"
        details["client_cpu_shares"] = list(per_worker)  # a copy: list[JSONValue]
    return [
        Finding(
            code="SM-BENCH-CLIENT-BUSY",
            severity=Severity.WARN,
            cell=st.cell_id,
            subject="bench",
            message=(
                f"{who} used {share:.0%} of a core in its busiest round "
                f"of {CLIENT_BUSY_MIN_S:g} s or more (over {CLIENT_BUSY:.0%}): at that "
                "load its timestamps degrade and it may measure itself rather than the "
                'server; raise bench.client_workers (or set it to "auto"), lower the '
                "load point's concurrency, or run the client on a machine with free cores"
            ),
            details=details,
        )
    ]


def _cpu_share(rnd: RoundRecord) -> float:
    return figure(rnd, "client_cpu_share")


def figure(rnd: RoundRecord, name: str) -> float:
    """A round's figure as a float, 0.0 where it has none (absent or null)."""
    value = rnd.metrics.get(name) or 0.0
    if not isinstance(value, int | float | str):
        raise TypeError(f"round metric {name} is {type(value).__name__}, not a number")
    return float(value)


def _errors(rnd: RoundRecord) -> int | float:
    """A round's failed requests (every round the client measured counts them)."""
    value = rnd.metrics["errors"]
    if not isinstance(value, int | float):
        raise TypeError(f"round metric errors is {type(value).__name__}, not a number")
    return value


def _shares(value: JSONValue) -> list[int | float]:
    """Each worker's CPU share, as the round's record lists them (none where the round
    had no workers, or the record says something else)."""
    return [x for x in value if isinstance(x, int | float)] if isinstance(value, list) else []


def _ok_message(launches: Sequence[LaunchRecord], headline: str) -> str:
    """The headline's median of launches (each the median of its rounds): the figure the
    report gives under the same name."""
    summary = _summary(launches)
    value = summary.get(headline)
    shown = f"{value:.4g}" if value is not None else "not measured"
    rounds = max((len(ln.rounds) for ln in launches), default=0)
    shape = f"{len(launches)} launch(es) x {rounds} round(s)"
    return f"{shape}: {headline} {shown} (median of launches)"


def _summary(launches: Sequence[LaunchRecord]) -> dict[str, float]:
    return metrics.cell_summary([ln.summary or {} for ln in launches if ln.status == "ok"])


def _summarize(data: BenchData, launches: Sequence[LaunchRecord], bench: Bench) -> BenchData:
    """The cell's summary, and one per load point (medians over the launches that ran)."""
    ok = [ln.points or {} for ln in launches if ln.status == "ok"]
    points = {
        pt.name: PointInfo(
            metric=pt.metric,
            max_concurrency=pt.workload.max_concurrency,
            num_prompts=pt.workload.num_prompts,
            request_rate=rate if math.isfinite(rate := pt.workload.request_rate) else None,
            summary=metrics.cell_summary(
                [done[pt.name].summary or {} for done in ok if pt.name in done]
            ),
        )
        for pt in bench.points
    }
    return replace(data, summary=_summary(launches), points=points)
