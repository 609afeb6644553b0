"""One server launch: start it (or reach the external one), measure the headline's
rounds and then each load point's on the same server, stop it, and its record."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackmatrix import layout
from stackmatrix._secrets import redact, redact_argv
from stackmatrix.bench import _workers as client_workers
from stackmatrix.bench import envfacts, metrics, server, workload
from stackmatrix.bench._cell import CellState, round_summary
from stackmatrix.bench.client import ClientOptions, RoundOutcome, run_round
from stackmatrix.bench.engines import EffectiveConfig, Engine, package_version
from stackmatrix.records import LaunchRecord, PointRun, RoundRecord
from stackmatrix.results import now_iso
from stackmatrix.spec_model import Bench, LoadPoint, Workload

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
    before: dict[str, Any] = field(default_factory=lambda: envfacts.collect())
    rounds: list[RoundRecord] = field(default_factory=list)
    points: dict[str, _PointRounds] | None = None
    config: EffectiveConfig | None = None
    launch_argv: list[str] | None = None
    ready_s: float | None = None
    failure: server.ServerFailed | None = None
    teardown: dict[str, Any] | None = None
    finished: str | None = None
    after: dict[str, Any] | None = None

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
            extra={"teardown": self.teardown},
        )


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
    launch = Launch(index=k, sequence=seq)
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
    except server.ServerFailed as exc:
        srv = srv or exc.server
        launch.failure = exc
    started_one = srv is not None and srv.proc is not None
    launch.teardown = srv.teardown.to_dict() if srv is not None and started_one else None
    launch.finished = now_iso()
    launch.after = envfacts.collect()
    return launch


def _serve(
    bench: Bench,
    engine: Engine,
    st: CellState,
    model: str,
    args: Sequence[str],
    log_path: Path,
) -> Any:
    if engine.name == "external":
        assert bench.url is not None
        return server.external(
            bench.url, engine=engine, log_path=log_path, ready_timeout_s=bench.ready_timeout_s
        )
    assert st.environment is not None
    env = dataclasses.replace(st.environment, env={**st.env, **st.environment.env})
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
        rounds.run(bench.workload, wl, None, launch.rounds)
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
        self, wk: Workload, wl: workload.WorkloadSet, point: str | None, out: list[RoundRecord]
    ) -> None:
        """`bench.rounds` measured rounds of `wl`, each appended to `out` as it ends."""
        opts = ClientOptions(
            base_url=self.srv.base_url,
            model=self.model,
            max_concurrency=wk.max_concurrency,
            request_timeout_s=wk.request_timeout_s,
            ignore_eos=wk.ignore_eos and self.engine.accepts_ignore_eos,
            workers=_client_workers(self.bench, wk),
        )
        for r in range(1, self.bench.rounds + 1):
            record, outcome = self._round(opts, wl, r, point)
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

    def _round(
        self, opts: ClientOptions, wl: workload.WorkloadSet, r: int, point: str | None
    ) -> tuple[RoundRecord, RoundOutcome]:
        warm_errors = 0
        if wl.warmup:
            # Warm-up at the measured concurrency and lengths; its figures are discarded.
            warm = run_round(wl.warmup, dataclasses.replace(opts, use_arrivals=False))
            warm_errors = sum(not rec.ok for rec in warm.records)
        outcome = run_round(wl.measured, opts)
        name = layout.requests_file(self.k, r, point)
        records = [x.to_dict() for x in outcome.records]
        workload.write_requests(self.st.cell_dir.file(name), records)
        figures = metrics.round_metrics(outcome.records, outcome.duration_s)
        record = RoundRecord(
            index=r,
            metrics=figures,
            requests_file=name,
            warmup_errors=warm_errors,
            extra=client_cpu(outcome, figures),
        )
        return record, outcome


def _client_workers(bench: Bench, wk: Workload) -> int:
    if bench.client_workers == "auto":
        return client_workers.auto_workers(wk.max_concurrency)
    return bench.client_workers


def client_cpu(outcome: RoundOutcome, figures: dict[str, Any]) -> dict[str, Any]:
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
