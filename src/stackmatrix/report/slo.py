"""Whether requests and loads meet the `[report] slo`, from the request records.

A request meets the SLO when it completed and each of its own latencies is within every
bound of its kind: its TTFT, its TPOT, its inter-token gaps (their percentile of the
bound), its E2E. That is the request-level definition of vLLM's `--goodput` and of
DistServe: for a bound on a percentile, the request is held to the bound itself. A
round's goodput is the requests that met it per second of the round, its attainment
their share of the requests the round sent (failed ones count, and never meet it). A
launch meets the SLO at a load when the load's percentiles (each one the median over
the launch's rounds of the round's percentile, as every figure) are within every bound.
Computed in the report from the request files, so results of any version get them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import assert_never

from stackmatrix.records import LaunchRecord, RoundRecord
from stackmatrix.records.decode import real
from stackmatrix.report.load import CellResults, read_requests
from stackmatrix.spec_model import SloBound

# a bound's percentile -> the name of the round's figure of it (bench/metrics.py)
_ROUND_STAT = {50: "median", 90: "p90", 99: "p99"}


@dataclass(frozen=True, kw_only=True)
class RoundSlo:
    """One round's requests against the SLO."""

    sent: int  # request records in the round's file
    good: int  # of them, completed within every bound
    duration_s: float | None  # the round's, from its record

    @property
    def goodput(self) -> float | None:
        """Requests that met the SLO per second of the round."""
        if self.duration_s is None or not self.duration_s > 0:
            return None
        return self.good / self.duration_s


@dataclass(frozen=True, kw_only=True)
class LaunchSlo:
    """One launch at one load: its rounds, and its percentile of each bound."""

    rounds: tuple[RoundSlo, ...]
    figures: dict[str, float | None]  # bound key -> median over rounds of the round's figure

    @property
    def goodputs(self) -> list[float]:
        return [g for r in self.rounds if (g := r.goodput) is not None]

    @property
    def attainment(self) -> float | None:
        """The share of the launch's requests that met the SLO (its rounds pooled)."""
        sent = sum(r.sent for r in self.rounds)
        return sum(r.good for r in self.rounds) / sent if sent else None

    def meets(self, bounds: Sequence[SloBound]) -> bool | None:
        """Whether every percentile is within its bound; None where one is unknown."""
        values = [self.figures.get(b.key) for b in bounds]
        if not bounds or any(v is None for v in values):
            return None
        return all(v is not None and v <= b.ms for v, b in zip(values, bounds, strict=True))


def request_meets(record: Mapping[str, object], bounds: Sequence[SloBound]) -> bool:
    """A request record (bench/client.py's, as read) against every bound."""
    if record.get("error") or record.get("ok") is False:
        return False
    for bound in bounds:
        value = request_ms(record, bound)
        if value is None or not value <= bound.ms:  # NaN meets nothing
            return False
    return True


def request_ms(record: Mapping[str, object], bound: SloBound) -> float | None:
    """The request's own latency of the bound's kind (ms); None where it has none to
    judge. A request of one token has no TPOT and no gap to exceed: 0."""
    ttft, e2e = real(record.get("ttft_s")), real(record.get("e2e_s"))
    match bound.kind:
        case "ttft":
            return None if ttft is None else ttft * 1e3
        case "e2e":
            return None if e2e is None else e2e * 1e3
        case "tpot":
            tokens = real(record.get("output_tokens"))
            if tokens is not None and tokens <= 1:
                return 0.0
            if ttft is None or e2e is None or tokens is None:
                return None
            return (e2e - ttft) / (tokens - 1) * 1e3
        case "itl":
            return _gaps_ms(record.get("itl_s"), bound.percentile)
        case _:
            assert_never(bound.kind)


def _gaps_ms(gaps: object, q: int) -> float | None:
    """The q-th percentile of a request's gaps between chunks (ms), 0 without gaps; None
    for gaps that are not a list of numbers."""
    if not isinstance(gaps, list):
        return None
    values = sorted(v for g in gaps if (v := real(g)) is not None)
    if len(values) != len(gaps):
        return None
    return _percentile(values, q) * 1e3 if values else 0.0


def _percentile(ordered: Sequence[float], q: float) -> float:
    """bench/metrics.py's: linear interpolation between closest ranks."""
    pos = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def round_slo(cell: CellResults, rnd: RoundRecord, bounds: Sequence[SloBound]) -> RoundSlo | None:
    """The round's requests against the bounds; None where its file cannot be read."""
    path = cell.round_file(rnd)
    if path is None:
        return None
    sent = good = 0
    for record in read_requests(path):  # bounded, never through a link
        sent += 1
        good += request_meets(record, bounds)
    return RoundSlo(sent=sent, good=good, duration_s=rnd.metric("duration_s"))


def launch_slo(
    cell: CellResults, launch: LaunchRecord, point: str | None, bounds: Sequence[SloBound]
) -> LaunchSlo:
    """One launch at the headline's load (`point` None) or at load point `point`."""
    rounds = _rounds(launch, point)
    judged = [r for rnd in rounds if (r := round_slo(cell, rnd, bounds)) is not None]
    figures = {b.key: _median(rounds, _round_figure(b)) for b in bounds}
    return LaunchSlo(rounds=tuple(judged), figures=figures)


def cell_slo(cell: CellResults, point: str | None, bounds: Sequence[SloBound]) -> list[LaunchSlo]:
    """Each launch that ran to the end, in the order of `CellResults.launches`."""
    return [launch_slo(cell, ln, point, bounds) for ln in cell.bench.launches if ln.ok]


def _rounds(launch: LaunchRecord, point: str | None) -> tuple[RoundRecord, ...]:
    if point is None:
        return launch.rounds
    run = (launch.points or {}).get(point)
    return run.rounds if run is not None else ()


def _round_figure(bound: SloBound) -> str:
    """The round's figure of the bound: `ttft_p99_ms`, `tpot_median_ms`..."""
    return f"{bound.kind}_{_ROUND_STAT[bound.percentile]}_ms"


def _median(rounds: Sequence[RoundRecord], metric: str) -> float | None:
    values = [v for r in rounds if (v := r.metric(metric)) is not None]
    return statistics.median(values) if values else None
