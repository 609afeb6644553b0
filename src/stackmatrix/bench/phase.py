"""The bench phase: every cell, every launch, every round, in an interleaved order.

Launches are the unit of repetition (issue 7): each launch starts a fresh server,
warms it up at the measured load before every round, measures `bench.rounds`
rounds, and stops it. bench.json is rewritten after every launch, so a crash or
Ctrl-C loses at most the launch in progress and a re-run resumes from there.
Layout and fields: docs/bench.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackmatrix import _atomic, layout
from stackmatrix._secrets import redact, redact_argv
from stackmatrix.bench import _workers as client_workers
from stackmatrix.bench import envfacts, leftovers, metrics, schedule, server, workload
from stackmatrix.bench.client import ClientOptions, RoundOutcome, run_round
from stackmatrix.bench.engines import EffectiveConfig, Engine, get_engine, package_version
from stackmatrix.envs.base import Environment
from stackmatrix.findings import Finding, Severity
from stackmatrix.results import INTERNAL_ERROR, CellDir, PhaseResult, RunDir, Status, now_iso
from stackmatrix.spec_model import Bench, LoadPoint, Spec, Workload

log = logging.getLogger(__name__)

Progress = Callable[[str, str], None]
SCHEDULE_FILE = layout.BENCH_SCHEDULE


@dataclass(kw_only=True)
class _CellState:
    """One cell's bench result while the phase runs."""

    cell_id: str
    cell_dir: CellDir
    result: PhaseResult
    environment: Environment | None
    server_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    launches: list[dict[str, Any]] = field(default_factory=list)
    version: str | None = None
    started_monotonic: float = field(default_factory=time.monotonic)

    @property
    def failed(self) -> bool:
        return self.result.status is Status.FAILED


def run_bench_phase(
    spec: Spec,
    run_dir: RunDir,
    cell_ids: Sequence[str],
    *,
    environments: Mapping[str, Environment],
    order: str,
    force: bool = False,
    progress: Progress | None = None,
) -> dict[str, PhaseResult]:
    """Benchmark `cell_ids` and write cells/<id>/bench.json for each; never raises for a cell."""
    say = progress or (lambda cell, msg: log.info("%s: %s", cell, msg))
    bench = spec.bench
    if bench is None:
        raise ValueError("run_bench_phase needs a spec with a [bench] section")
    engine = get_engine(bench.engine)
    for line in leftovers.reap(run_dir.path):  # servers a SIGKILLed run of these results left
        say("-", line)
    spec_dir = Path(spec.path).parent if spec.path else None
    wl = workload.generate(bench.workload, spec_dir=spec_dir)
    points = tuple((pt, workload.generate(pt.workload, spec_dir=spec_dir)) for pt in bench.points)
    wl_hash = _write_workload(run_dir, wl, points)
    states: dict[str, _CellState] = {}
    final: dict[str, PhaseResult] = {}
    for cid in cell_ids:
        try:
            prepared = _prepare(spec, bench, engine, run_dir, cid, environments, wl_hash, force)
        except Exception as exc:  # this cell's crash is its status; the others go on
            prepared = _crashed_before(run_dir.cell(cid), exc)
        if isinstance(prepared, PhaseResult):
            final[cid] = prepared
            say(cid, f"bench {prepared.status.value}: {prepared.message}")
        else:
            states[cid] = prepared
    pending = {
        cid: list(range(len(st.launches) + 1, bench.launches + 1)) for cid, st in states.items()
    }
    slots = schedule.schedule(pending, list(cell_ids), order, spec.order_seed)
    for st in states.values():
        st.result.data["order"] = {"order": order, "order_seed": spec.order_seed}
    _write_schedule(run_dir, order, spec.order_seed, slots)
    model = _model(bench, spec_dir)
    try:
        _warm_up(bench, engine, states, slots, model, wl, say, points)
        for seq, (cid, k) in enumerate(slots, start=1):
            st = states[cid]
            if st.failed:
                continue
            say(cid, f"launch {k}/{bench.launches} ({seq}/{len(slots)} overall)")
            try:
                launch = _run_launch(bench, engine, st, k, seq, model, wl, points)
                _record_launch(st, launch, bench, engine, wl_hash)
            except Exception as exc:  # a crash of ours fails this cell, not the run
                _crashed(st, exc, f"launch {k}")
                say(cid, f"bench failed: {st.result.message}")
    except BaseException:
        for st in states.values():
            if st.result.status is Status.INTERRUPTED:
                st.result.message = "interrupted; re-run to resume from the launches done"
                st.cell_dir.write(st.result)
        raise
    for cid, st in states.items():
        final[cid] = _finish(st, bench)
        say(cid, f"bench {final[cid].status.value}: {final[cid].message}")
    return {cid: final[cid] for cid in cell_ids if cid in final}


# --- preparing a cell ----------------------------------------------------------


def _prepare(
    spec: Spec,
    bench: Bench,
    engine: Engine,
    run_dir: RunDir,
    cid: str,
    environments: Mapping[str, Environment],
    wl_hash: str,
    force: bool,
) -> PhaseResult | _CellState:
    """A final result for a cell that won't run, or its state (resumed when possible)."""
    cell_dir = run_dir.cell(cid)
    environment = environments.get(cid)
    inputs = inputs_hash(spec, bench, cid, environment, wl_hash)
    skip = _skip_reason(spec, bench, engine, cell_dir, cid, environment, force)
    if skip is not None:
        code, message = skip
        result = _new_result(cid, inputs, Status.SKIPPED, code=code, message=message)
        result.finished = now_iso()
        cell_dir.write(result)
        return result
    previous = cell_dir.read("bench")
    if previous is not None and previous.inputs_hash == inputs:
        done = [ln for ln in previous.data.get("launches", []) if ln.get("status") == "ok"]
        if previous.status is Status.FAILED and previous.complete:
            return previous
        if previous.status is Status.OK and len(done) >= bench.launches:
            return previous
        state = _state(spec, cid, cell_dir, inputs, environment)
        state.launches = done
        state.result.data = dict(previous.data, launches=done)
        state.result.started = previous.started or state.result.started
        return state
    return _state(spec, cid, cell_dir, inputs, environment)


def _state(
    spec: Spec, cid: str, cell_dir: CellDir, inputs: str, environment: Environment | None
) -> _CellState:
    result = _new_result(cid, inputs, Status.INTERRUPTED, message="not finished")
    cell = spec.cell(cid)
    return _CellState(
        cell_id=cid,
        cell_dir=cell_dir,
        result=result,
        environment=environment,
        server_args=cell.server_args,
        env=dict(cell.env),
    )


def _new_result(
    cid: str, inputs: str, status: Status, *, code: str | None = None, message: str = ""
) -> PhaseResult:
    return PhaseResult(
        phase="bench",
        cell=cid,
        status=status,
        inputs_hash=inputs,
        code=code,
        message=message,
        started=now_iso(),
    )


def _skip_reason(
    spec: Spec,
    bench: Bench,
    engine: Engine,
    cell_dir: CellDir,
    cid: str,
    environment: Environment | None,
    force: bool,
) -> tuple[str, str] | None:
    if engine.name != "external" and environment is None:
        return "not_built", f"cell {cid!r} has no built environment (see its build.json)"
    if not force and _incompatible(cell_dir):
        return "incompatible", (
            "the check phase found the cell incompatible (pass --force to bench it)"
        )
    cell = spec.cell(cid)
    needs_gpu = engine.needs_gpu or cell.gpus > 0
    if needs_gpu and envfacts.gpu_count() == 0:
        return "no_gpu", f"engine {engine.name!r} needs a GPU and nvidia-smi lists none here"
    if engine.name == "external" and not bench.url:
        return "no_url", "engine 'external' needs bench.url, the address already serving"
    return None


def _incompatible(cell_dir: CellDir) -> bool:
    check = cell_dir.read("check")
    if check is None or check.status is not Status.OK:
        return False
    verdict = check.data.get("verdict")
    if verdict is None:
        return any(f.severity is Severity.FAIL for f in check.findings)
    return str(verdict) == "incompatible"


def inputs_hash(
    spec: Spec, bench: Bench, cid: str, environment: Environment | None, wl_hash: str
) -> str:
    """Everything that defines the cell's measurements, except the number of launches
    (raising it later resumes with more launches instead of starting over)."""
    bench_dict = dataclasses.asdict(bench)
    bench_dict.pop("launches")
    bench_dict.pop("warmup_launches")  # discarded launches don't define the measurements
    bench_dict.pop("workload")
    if bench_dict.get("client_workers") == 1:
        # the in-process client, as before the key existed: earlier results still resume
        bench_dict.pop("client_workers")
    payload = {
        "bench": bench_dict,
        "workload_hash": wl_hash,
        "cell_server_args": list(spec.cell(cid).server_args),
        "cell_env": list(spec.cell(cid).env),
        "environment": environment.to_dict() if environment is not None else None,
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- warm-up launches -----------------------------------------------------------


def _warm_up(
    bench: Bench,
    engine: Engine,
    states: Mapping[str, _CellState],
    slots: Sequence[tuple[str, int]],
    model: str,
    wl: workload.WorkloadSet,
    say: Progress,
    points: _Points = (),
) -> None:
    """`bench.warmup_launches` discarded launches of each cell that has launches to run,
    in the schedule's order, before the first measured one: a machine's first server
    launch pays for cold caches (files, GPU clocks, compile caches) that later launches
    do not. Each runs one round of the headline and of each load point (what a JIT
    compiles for a point's batch sizes, it compiles here, not in a measured launch);
    it is recorded in bench.json under "warmup_launches"
    and left out of every statistic. A failure here is recorded, not fatal: the
    measured launches then fail (or not) on their own."""
    if not bench.warmup_launches or engine.name == "external":
        return
    cells = list(dict.fromkeys(cid for cid, _ in slots))
    one_round = dataclasses.replace(bench, rounds=1)
    for w in range(1, bench.warmup_launches + 1):
        for cid in cells:
            st = states[cid]
            if st.failed:
                continue
            say(cid, f"warm-up launch {w}/{bench.warmup_launches} (discarded)")
            try:
                launch = _run_launch(one_round, engine, st, f"W{w}", 0, model, wl, points)
            except Exception as exc:  # as for a measured launch
                _crashed(st, exc, f"warm-up launch {w}")
                say(cid, f"bench failed: {st.result.message}")
                continue
            launch.pop("config", None)
            launch["summary"] = metrics.launch_summary(launch["rounds"])
            warm = [x for x in st.result.data.get("warmup_launches", []) if x["index"] != f"W{w}"]
            st.result.data["warmup_launches"] = [*warm, launch]
            st.cell_dir.write(st.result)
            if launch["status"] != "ok":
                say(cid, f"warm-up launch failed: {launch.get('message', '')}")


# --- one launch ----------------------------------------------------------------


_Points = Sequence[tuple[LoadPoint, workload.WorkloadSet]]


def _run_launch(
    bench: Bench,
    engine: Engine,
    st: _CellState,
    k: int | str,
    seq: int,
    model: str,
    wl: workload.WorkloadSet,
    points: _Points = (),
) -> dict[str, Any]:
    launch: dict[str, Any] = {
        "index": k,
        "sequence": seq,
        "started": now_iso(),
        "env_facts": {"before": envfacts.collect()},
        "status": "ok",
        "rounds": [],
    }
    log_path = st.cell_dir.file(layout.server_log(k))
    args = [*bench.server_args, *st.server_args]
    args += engine.pinned_args(args, seed=bench.workload.seed)
    srv: server.RunningServer | None = None
    try:
        with _serve(bench, engine, st, model, args, log_path) as srv:
            config = engine.effective_config(
                srv.base_url, launch_args=args, env_version=_version(engine, st)
            )
            launch["config"] = config
            launch["launch_argv"] = redact_argv(srv.argv)
            _measure(bench, engine, st, srv, k, model, wl, launch)
            for point, point_wl in points:
                _measure(bench, engine, st, srv, k, model, point_wl, launch, point)
    except server.ServerFailed as exc:
        srv = srv or exc.server
        launch.update(status="failed", code=exc.code, message=exc.message)
    started_one = srv is not None and srv.proc is not None
    launch["teardown"] = srv.teardown.to_dict() if srv is not None and started_one else None
    launch["finished"] = now_iso()
    launch["env_facts"]["after"] = envfacts.collect()
    return launch


def _serve(
    bench: Bench,
    engine: Engine,
    st: _CellState,
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
    st: _CellState,
    srv: server.RunningServer,
    k: int | str,
    model: str,
    wl: workload.WorkloadSet,
    launch: dict[str, Any],
    point: LoadPoint | None = None,
) -> None:
    """The headline's rounds into `launch["rounds"]`, or a load point's (on the same
    server, after them) into `launch["points"][name]` (files: layout.requests_file)."""
    if point is None:
        _rounds(bench, engine, st, srv, model, bench.workload, wl, k, None, launch["rounds"])
        return
    entry: dict[str, Any] = {"rounds": []}
    launch.setdefault("points", {})[point.name] = entry
    _rounds(bench, engine, st, srv, model, point.workload, wl, k, point.name, entry["rounds"])
    entry["summary"] = metrics.launch_summary(entry["rounds"])


def _rounds(
    bench: Bench,
    engine: Engine,
    st: _CellState,
    srv: server.RunningServer,
    model: str,
    wk: Workload,
    wl: workload.WorkloadSet,
    k: int | str,
    point: str | None,
    rounds: list[dict[str, Any]],
) -> None:
    """`bench.rounds` measured rounds of `wl`, each appended to `rounds` as it ends (a
    server that dies mid-launch keeps the rounds it finished)."""
    opts = ClientOptions(
        base_url=srv.base_url,
        model=model,
        max_concurrency=wk.max_concurrency,
        request_timeout_s=wk.request_timeout_s,
        ignore_eos=wk.ignore_eos and engine.accepts_ignore_eos,
        workers=_client_workers(bench, wk),
    )
    for r in range(1, bench.rounds + 1):
        warm_errors = 0
        if wl.warmup:
            # Warm-up at the measured concurrency and lengths; its figures are discarded.
            warm = run_round(wl.warmup, dataclasses.replace(opts, use_arrivals=False))
            warm_errors = sum(not rec.ok for rec in warm.records)
        outcome = run_round(wl.measured, opts)
        name = layout.requests_file(k, r, point)
        workload.write_requests(st.cell_dir.file(name), [x.to_dict() for x in outcome.records])
        figures = metrics.round_metrics(outcome.records, outcome.duration_s)
        entry = {
            "index": r,
            "metrics": figures,
            "requests_file": name,
            "warmup_errors": warm_errors,
        }
        _client_cpu(outcome, figures, entry)
        rounds.append(entry)
        if not srv.alive():
            raise server.ServerFailed(srv.exit_message())
        if figures["completed"] == 0:
            first = next((x.error for x in outcome.records if x.error), "no requests")
            where = f" of load point {point!r}" if point else ""
            raise server.ServerFailed(
                f"every request of round {r}{where} failed; first error: {first}",
                code="requests_failed",
            )


def _client_workers(bench: Bench, wk: Workload) -> int:
    if bench.client_workers == "auto":
        return client_workers.auto_workers(wk.max_concurrency)
    return bench.client_workers


def _client_cpu(outcome: RoundOutcome, figures: dict[str, Any], entry: dict[str, Any]) -> None:
    """The client's own CPU share of one core (a busy client measures itself): with
    worker processes, the busiest worker's in `client_cpu_share` and each worker's in
    the round's `client_cpu_shares`."""
    d = outcome.duration_s
    shares = [c / d if d > 0 else 0.0 for c in outcome.worker_cpu_s or (outcome.cpu_s,)]
    figures["client_cpu_share"] = max(shares)
    if outcome.worker_cpu_s:
        entry["client_workers"] = len(shares)
        entry["client_cpu_shares"] = [round(x, 4) for x in shares]


def _version(engine: Engine, st: _CellState) -> str | None:
    if st.version is None and engine.package and st.environment is not None:
        env = {**os.environ, **st.environment.env}
        st.version = package_version(st.environment.python, engine.package, env=env)
    return st.version


def _model(bench: Bench, spec_dir: Path | None) -> str:
    """A relative model path is read relative to the spec, when it exists there."""
    if spec_dir is not None and bench.model and not Path(bench.model).is_absolute():
        candidate = spec_dir / bench.model
        if candidate.exists():
            return str(candidate.resolve())
    return bench.model


# --- recording -----------------------------------------------------------------


def _record_launch(
    st: _CellState, launch: dict[str, Any], bench: Bench, engine: Engine, wl_hash: str
) -> None:
    config: EffectiveConfig | None = launch.pop("config", None)
    launch["summary"] = metrics.launch_summary(launch["rounds"])
    for entry in (launch.get("points") or {}).values():  # a point cut short by a failure
        entry.setdefault("summary", metrics.launch_summary(entry["rounds"]))
    if config is not None:
        launch["effective_config"] = redact(config.flat)
    st.launches.append(launch)
    data = st.result.data
    data.update(
        engine=engine.name,
        engine_version=config.version if config else data.get("engine_version"),
        workload_hash=wl_hash,
        launches=st.launches,
    )
    if config is not None:
        data.update(effective_config=redact(config.flat), server_info=redact(config.raw))
    data.setdefault("launch_argv", launch.get("launch_argv", []))
    if launch["status"] != "ok":
        st.result.status = Status.FAILED
        st.result.code = launch.get("code", "server_failed")
        st.result.message = f"launch {launch['index']}: {launch.get('message', '')}"
        st.result.finished = now_iso()
    _summarize(st.result.data, st.launches, bench)
    st.result.duration_s = time.monotonic() - st.started_monotonic
    st.cell_dir.write(st.result)


def _crashed(st: _CellState, exc: Exception, what: str) -> None:
    st.result.status = Status.FAILED
    st.result.code = INTERNAL_ERROR
    st.result.message = f"{what}: {st.cell_dir.crashed('bench', exc)}"
    st.result.finished = now_iso()
    st.result.duration_s = time.monotonic() - st.started_monotonic
    st.cell_dir.write(st.result)


def _crashed_before(cell_dir: CellDir, exc: Exception) -> PhaseResult:
    result = _new_result(cell_dir.cell, "", Status.FAILED, code=INTERNAL_ERROR,
                         message=cell_dir.crashed("bench", exc))  # fmt: skip
    result.finished = now_iso()
    cell_dir.write(result)
    return result


def _finish(st: _CellState, bench: Bench) -> PhaseResult:
    result = st.result
    if result.status is Status.INTERRUPTED:
        result.status = Status.OK
        result.message = _ok_message(st.launches, bench)
        result.finished = now_iso()
    errors = sum(r["metrics"]["errors"] for ln in st.launches for r in ln.get("rounds", []))
    result.findings = [*_busy_client(st), *result.findings]
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
                    "requests-L*-R*.jsonl files next to bench.json"
                ),
                details={"errors": errors},
            ),
        ]
    _summarize(result.data, st.launches, bench)
    result.duration_s = time.monotonic() - st.started_monotonic
    st.cell_dir.write(result)
    return result


CLIENT_BUSY = 0.5  # of one core: above it the client's own timing degrades (issue 17)
CLIENT_BUSY_MIN_S = 2.0  # shorter rounds are dominated by fixed costs (loop, connections)


def _busy_client(st: _CellState) -> list[Finding]:
    """A round where the client (with worker processes: any one of them) used more than
    half a core: what it measured may be the client's limit, not the server's (a
    finding, never a silent number)."""
    rounds = [
        r
        for ln in st.launches
        for entry in (ln, *(ln.get("points") or {}).values())
        for r in entry.get("rounds", [])
        if float(r["metrics"].get("duration_s", 0.0)) >= CLIENT_BUSY_MIN_S
    ]
    busiest = max(rounds, key=_cpu_share, default=None)
    if busiest is None or _cpu_share(busiest) <= CLIENT_BUSY:
        return []
    share, per_worker = _cpu_share(busiest), busiest.get("client_cpu_shares") or []
    who = "the benchmark client"
    details: dict[str, Any] = {"client_cpu_share_max": round(share, 3)}
    if per_worker:
        k = per_worker.index(max(per_worker)) + 1
        who = f"worker {k} of the benchmark client's {len(per_worker)}"
        details["client_cpu_shares"] = per_worker
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


def _cpu_share(rnd: Mapping[str, Any]) -> float:
    return float(rnd["metrics"].get("client_cpu_share", 0.0))


def _ok_message(launches: Sequence[dict[str, Any]], bench: Bench) -> str:
    summary = _summary(launches)
    tput = summary.get("output_throughput")
    shown = f"{tput:.1f} tok/s" if tput is not None else "no throughput"
    return f"{len(launches)} launch(es) x {bench.rounds} round(s): output {shown} (median)"


def _summary(launches: Sequence[dict[str, Any]]) -> dict[str, float]:
    return metrics.cell_summary([ln["summary"] for ln in launches if ln.get("status") == "ok"])


def _summarize(data: dict[str, Any], launches: Sequence[dict[str, Any]], bench: Bench) -> None:
    """The cell's summary, and one per load point (medians over the launches that ran)."""
    data["summary"] = _summary(launches)
    if not bench.points:
        data.pop("points", None)
        return
    ok = [ln.get("points") or {} for ln in launches if ln.get("status") == "ok"]
    data["points"] = {
        pt.name: {
            "metric": pt.metric,
            "max_concurrency": pt.workload.max_concurrency,
            "num_prompts": pt.workload.num_prompts,
            "summary": metrics.cell_summary(
                [done[pt.name]["summary"] for done in ok if pt.name in done]
            ),
        }
        for pt in bench.points
    }


def _write_workload(run_dir: RunDir, wl: workload.WorkloadSet, points: _Points = ()) -> str:
    """RUN/workload.jsonl (and workload-<point>.jsonl per load point) and workload.json;
    the hash of them all (the headline's alone when there are no points)."""
    path = run_dir.path / workload.WORKLOAD_FILE
    data = wl.to_jsonl()
    if not path.is_file() or path.read_bytes() != data:
        workload.write(run_dir.path, wl)
    info: dict[str, Any] = {"hash": wl.hash, "measured": len(wl.measured), "warmup": len(wl.warmup)}
    if not points:
        run_dir.write_json(layout.WORKLOAD_JSON, info)
        return wl.hash
    combined = hashlib.sha256(wl.hash.encode())
    info["points"] = {}
    for pt, pwl in points:
        _atomic.write_bytes(run_dir.path / layout.point_workload(pt.name), pwl.to_jsonl())
        info["points"][pt.name] = {"hash": pwl.hash, "measured": len(pwl.measured),
                                   "warmup": len(pwl.warmup)}  # fmt: skip
        combined.update(f"{pt.name}:{pwl.hash}".encode())
    run_dir.write_json(layout.WORKLOAD_JSON, info)
    return combined.hexdigest()


def _write_schedule(
    run_dir: RunDir, order: str, seed: int, slots: Sequence[tuple[str, int]]
) -> None:
    run_dir.write_json(
        SCHEDULE_FILE,
        {
            "order": order,
            "order_seed": seed,
            "slots": [{"cell": c, "launch": k} for c, k in slots],
        },
    )
