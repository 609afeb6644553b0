"""One server launch: start it (or reach the external one), warm it up until steady,
measure the headline's rounds and then each load point's on the same server, stop it,
and its record."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackmatrix import layout
from stackmatrix._secrets import redact, redact_argv
from stackmatrix.bench import _workers as client_workers
from stackmatrix.bench import envfacts, metrics, server, workload
from stackmatrix.bench._cell import CellState, figure, round_summary
from stackmatrix.bench._maps import Mapped, server_mapped
from stackmatrix.bench._steady import FALLBACK_BATCH, SteadyLog, batch_figures, judge
from stackmatrix.bench.client import ClientOptions, RoundOutcome, run_round
from stackmatrix.bench.engines import EffectiveConfig, Engine, package_version
from stackmatrix.jsontypes import JSONObject
from stackmatrix.records import LaunchRecord, PointRun, RoundRecord
from stackmatrix.results import now_iso
from stackmatrix.spec_model import MAX_ROUNDS, Bench, LoadPoint, Workload

log = logging.getLogger(__name__)

Points = Sequence[tuple[LoadPoint, workload.WorkloadSet]]


@dataclass(kw_only=True)
class _PointRounds:
    rounds: list[RoundRecord] = field(default_factory=list)
    summary: dict[str, float] | None = None  # once its rounds all ran

    def record(self, measured: bool) -> PointRun:
        """A measured launch's point cut short is summarized too; a warm-up's is not."""
        summary = self.summary
        if summary is None and measured:
            summary = round_summary(self.rounds)
        return PointRun(rounds=tuple(self.rounds), summary=summary)


@dataclass(kw_only=True)
class Launch:
    """A launch as it runs: its rounds are kept as each ends (a server that dies
    mid-launch keeps the rounds it finished)."""

    index: int | str
    sequence: int
    started: str = field(default_factory=now_iso)
    before: JSONObject = field(default_factory=lambda: envfacts.collect())
    rounds: list[RoundRecord] = field(default_factory=list)
    points: dict[str, _PointRounds] | None = None
    config: EffectiveConfig | None = None
    launch_argv: list[str] | None = None
    ready_s: float | None = None
    failure: server.ServerFailed | None = None
    teardown: JSONObject | None = None
    finished: str | None = None
    after: JSONObject | None = None
    steady: SteadyLog | None = None  # the headline's warm-up batches (bench.steady_warmup)
    min_duration_s: float = 0.0
    mapped: Mapped | None = None  # the shared objects the live server mapped (bench/_maps.py)

    def record(self, *, measured: bool) -> LaunchRecord:
        """Its record: a measured launch's says what the engine ran and summarizes a
        load point cut short too; a warm-up's does neither."""
        points = None
        if self.points is not None:
            points = {name: p.record(measured) for name, p in self.points.items()}
        config = self.config if measured else None
        failure = self.failure
        return LaunchRecord(
            index=self.index,
            sequence=self.sequence,
            started=self.started,
            env_facts={"before": self.before, "after": self.after},
            status="failed" if failure else "ok",
            rounds=tuple(self.rounds),
            launch_argv=tuple(self.launch_argv) if self.launch_argv is not None else None,
            ready_s=self.ready_s,
            points=points,
            code=failure.code if failure else None,
            message=failure.message if failure else None,
            finished=self.finished,
            summary=round_summary(self.rounds),
            effective_config=redact(config.flat) if config is not None else None,
            extra=self._extra(),
        )

    def _extra(self) -> JSONObject:
        """teardown, and with them on, the steady warm-up and the minimum duration (off,
        the record is as it was before they existed)."""
        extra: JSONObject = {"teardown": self.teardown}
        if self.steady is not None:
            extra["steady"] = self.steady.to_dict()
        if self.min_duration_s > 0:
            extra["min_duration_s"] = self.min_duration_s
        if self.mapped is not None:
            extra["mapped"] = self.mapped.to_dict()
        return extra


def run_launch(
    bench: Bench,
    engine: Engine,
    st: CellState,
    k: int | str,
    seq: int,
    model: str,
    wl: workload.WorkloadSet,
    points: Points = (),
) -> Launch:
    launch = Launch(index=k, sequence=seq, min_duration_s=bench.min_duration_s)
    log_path = st.cell_dir.file(layout.server_log(k))
    args = [*bench.server_args, *st.server_args]
    args += engine.pinned_args(args, seed=bench.workload.seed)
    srv: server.RunningServer | None = None
    try:
        with _serve(bench, engine, st, model, args, log_path) as srv:
            launch.ready_s = srv.ready_s
            launch.config = engine.effective_config(
                srv.base_url, launch_args=args, env_version=_version(engine, st)
            )
            launch.launch_argv = redact_argv(srv.argv)
            _measure(bench, engine, st, srv, model, wl, launch)
            for point, point_wl in points:
                _measure(bench, engine, st, srv, model, point_wl, launch, point)
            if srv.proc is not None and _on_host(st):  # a container's processes are not ours
                launch.mapped = server_mapped(srv.proc.pid)
    except server.ServerFailed as exc:
        srv = srv or exc.server
        launch.failure = exc
    started_one = srv is not None and srv.proc is not None
    launch.teardown = srv.teardown.to_dict() if srv is not None and started_one else None
    launch.finished = now_iso()
    launch.after = envfacts.collect()
    return launch


def _on_host(st: CellState) -> bool:
    from stackmatrix.builder.backends import get_backend

    return st.environment is not None and get_backend(st.environment.backend).on_host


def _serve(
    bench: Bench,
    engine: Engine,
    st: CellState,
    model: str,
    args: Sequence[str],
    log_path: Path,
) -> Any:
    if not engine.launches_server:
        assert bench.url is not None
        return server.external(
            bench.url, engine=engine, log_path=log_path, ready_timeout_s=bench.ready_timeout_s
        )
    assert st.environment is not None
    # the spec's env wins: what build.json recorded is what the build saw
    env = dataclasses.replace(st.environment, env={**st.environment.env, **st.env})
    return server.launch(
        engine=engine,
        environment=env,
        model=model,
        args=args,
        log_path=log_path,
        ready_timeout_s=bench.ready_timeout_s,
        gpus=engine.needs_gpu,
    )


def _measure(
    bench: Bench,
    engine: Engine,
    st: CellState,
    srv: server.RunningServer,
    model: str,
    wl: workload.WorkloadSet,
    launch: Launch,
    point: LoadPoint | None = None,
) -> None:
    """The headline's rounds into `launch.rounds`, or a load point's (on the same
    server, after them) into `launch.points[name]` (files: layout.requests_file)."""
    rounds = _Rounds(bench=bench, engine=engine, st=st, srv=srv, model=model, k=launch.index)
    if point is None:
        if bench.steady_warmup:
            launch.steady = SteadyLog(
                max_batches=bench.warmup_max_batches, tolerance=bench.steady_tolerance
            )
        rounds.run(bench.workload, wl, None, launch.rounds, launch.steady)
        return
    entry = _PointRounds()
    launch.points = {**(launch.points or {}), point.name: entry}
    rounds.run(point.workload, wl, point.name, entry.rounds)
    entry.summary = round_summary(entry.rounds)


@dataclass(kw_only=True)
class _Rounds:
    """The measured rounds of one workload on one server."""

    bench: Bench
    engine: Engine
    st: CellState
    srv: server.RunningServer
    model: str
    k: int | str

    def run(
        self,
        wk: Workload,
        wl: workload.WorkloadSet,
        point: str | None,
        out: list[RoundRecord],
        steady: SteadyLog | None = None,
    ) -> None:
        """`bench.rounds` measured rounds of `wl` (for the headline, more until they
        last `bench.min_duration_s`), each appended to `out` as it ends; with `steady`,
        warm-up batches until the server is steady first, in place of round 1's
        fixed warm-up. With `bench.flush_cache`, each round (its warm-up included)
        starts from an emptied prefix cache."""
        opts = ClientOptions(
            base_url=self.srv.base_url,
            model=self.model,
            max_concurrency=wk.max_concurrency,
            request_timeout_s=wk.request_timeout_s,
            ignore_eos=wk.ignore_eos and self.engine.accepts_ignore_eos,
            workers=_client_workers(self.bench, wk),
        )
        r = 0
        while self._more(r, out, point):
            r += 1
            cache = self._flush_cache()
            warm = None
            if r == 1 and steady is not None:
                warm = self._warm_until_steady(opts, wl, steady)
            record, outcome = self._round(opts, wl, r, point, warm)
            if cache is not None:
                record = dataclasses.replace(record, extra={**record.extra, **cache})
            out.append(record)
            if not self.srv.alive():
                raise server.ServerFailed(self.srv.exit_message())
            if record.metrics["completed"] == 0:
                first = next((x.error for x in outcome.records if x.error), "no requests")
                where = f" of load point {point!r}" if point else ""
                raise server.ServerFailed(
                    f"every request of round {r}{where} failed; first error: {first}",
                    code="requests_failed",
                )

    def _flush_cache(self) -> JSONObject | None:
        """Empty the server's prefix cache before a round (`bench.flush_cache`) where the
        engine has one and the server is ours: the round's record says whether it was
        (`prefix_cache`). An external server may serve others: its cache is left alone."""
        engine = self.engine
        if not self.bench.flush_cache or engine.cache_flush_path is None:
            return None
        if not engine.launches_server:
            return None
        why = engine.flush_cache(self.srv.base_url)
        if why is None:
            return {"prefix_cache": "flushed"}
        log.warning("launch %s: the prefix cache was not flushed: %s", self.k, why)
        return {"prefix_cache": f"not flushed: {why}"}

    def _more(self, done: int, out: Sequence[RoundRecord], point: str | None) -> bool:
        """Another round? `bench.rounds` of them; for the headline, more until their
        durations add up to `bench.min_duration_s` (a launch of a few seconds is
        dominated by noise), at most MAX_ROUNDS."""
        if done < self.bench.rounds:
            return True
        if point is not None or done >= MAX_ROUNDS:
            return False
        measured = sum(figure(x, "duration_s") for x in out)
        return measured < self.bench.min_duration_s

    def _warm_until_steady(
        self, opts: ClientOptions, wl: workload.WorkloadSet, steady: SteadyLog
    ) -> int:
        """Warm-up batches at the measured concurrency, figures discarded, until one is
        steady (bench/_steady.py judge) or `steady.max_batches` ran; each is kept in
        `steady`. A server never steady is still measured: its record says so. The
        last batch's failed requests, which stand for round 1's warm-up errors."""
        batch = wl.warmup or wl.measured[:FALLBACK_BATCH]
        warm_opts = dataclasses.replace(opts, use_arrivals=False)
        prev = None
        for _ in range(steady.max_batches):
            cur = batch_figures(run_round(batch, warm_opts).records)
            verdict = judge(cur, prev, steady.tolerance)
            steady.batches.append((cur, verdict))
            if not self.srv.alive():
                raise server.ServerFailed(self.srv.exit_message())
            if verdict.steady:
                return cur.errors
            prev = cur
        log.warning(
            "launch %s: not steady after %d warm-up batches (%s); measured anyway",
            self.k,
            steady.max_batches,
            steady.batches[-1][1].reason,
        )
        return steady.batches[-1][0].errors

    def _round(
        self,
        opts: ClientOptions,
        wl: workload.WorkloadSet,
        r: int,
        point: str | None,
        warm_errors: int | None = None,
    ) -> tuple[RoundRecord, RoundOutcome]:
        """One measured round, after its fixed warm-up unless one ran already
        (`warm_errors` given: the steady warm-up's)."""
        if warm_errors is None:
            warm_errors = self._fixed_warmup(opts, wl)
        outcome = run_round(wl.measured, opts)
        name = layout.requests_file(self.k, r, point)
        workload.write_requests(self.st.cell_dir.file(name), _rows(outcome, wl))
        figures = metrics.round_metrics(outcome.records, outcome.duration_s)
        extra = client_cpu(outcome, figures)  # adds the client's share to `figures`
        if wl.exact_lengths:
            extra["prompt_lengths"] = metrics.prompt_check(outcome.records, wl.measured)
        record = RoundRecord(
            index=r,
            metrics=dict(figures),
            requests_file=name,
            warmup_errors=warm_errors,
            extra=extra,
        )
        return record, outcome

    @staticmethod
    def _fixed_warmup(opts: ClientOptions, wl: workload.WorkloadSet) -> int:
        """`wl.warmup` at the measured concurrency and lengths, figures discarded; its
        failed requests."""
        if not wl.warmup:
            return 0
        warm = run_round(wl.warmup, dataclasses.replace(opts, use_arrivals=False))
        return sum(not rec.ok for rec in warm.records)


def _rows(outcome: RoundOutcome, wl: workload.WorkloadSet) -> list[JSONObject]:
    """The round's request records; of a workload of exact lengths, each with its
    input_len, and `prompt_len_mismatch` where the server counted another."""
    rows = [x.to_dict() for x in outcome.records]
    if not wl.exact_lengths:
        return rows
    wanted = {r.index: r.input_len for r in wl.measured}
    bad = {rec.index for rec, _ in metrics.prompt_mismatches(outcome.records, wl.measured)}
    for row, rec in zip(rows, outcome.records, strict=True):
        row["input_len"] = wanted[rec.index]
        if rec.index in bad:
            row["prompt_len_mismatch"] = True
    return rows


def _client_workers(bench: Bench, wk: Workload) -> int:
    if bench.client_workers == "auto":
        return client_workers.auto_workers(wk.max_concurrency)
    return bench.client_workers


def client_cpu(outcome: RoundOutcome, figures: dict[str, float | None]) -> JSONObject:
    """The client's own CPU share of one core (a busy client measures itself): with
    worker processes, the busiest worker's in `client_cpu_share` and each worker's in
    the round's `client_cpu_shares` (the keys returned, for the round's record)."""
    d = outcome.duration_s
    shares = [c / d if d > 0 else 0.0 for c in outcome.worker_cpu_s or (outcome.cpu_s,)]
    figures["client_cpu_share"] = max(shares)
    if not outcome.worker_cpu_s:
        return {}
    return {"client_workers": len(shares), "client_cpu_shares": [round(x, 4) for x in shares]}


def _version(engine: Engine, st: CellState) -> str | None:
    if st.version is None and engine.package and st.environment is not None:
        env = {**os.environ, **st.environment.env}
        st.version = package_version(st.environment.python, engine.package, env=env)
    return st.version
