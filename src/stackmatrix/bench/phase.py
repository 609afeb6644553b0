"""The bench phase: every cell, every launch, every round, in an interleaved order.

Launches are the unit of repetition: each launch starts a fresh server,
warms it up at the measured load before every round, measures `bench.rounds`
rounds, and stops it. bench.json is rewritten after every launch, so a crash or
Ctrl-C loses at most the launch in progress and a re-run resumes from there.
Layout and fields: docs/bench.md.

    phase      the entry: prepare (skip, resume), schedule, run, finish every cell
    _cell      a cell's state, the record of each launch, its summaries and findings
    _launch    one launch: serve, the headline's and the load points' rounds, its record
    _warmup    the discarded warm-up launches
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from stackmatrix import _atomic, layout
from stackmatrix.bench import adaptive, envfacts, leftovers, schedule, tokenizer, workload
from stackmatrix.bench._cell import CellState, finish, record_launch
from stackmatrix.bench._launch import Points, run_launch
from stackmatrix.bench._warmup import warm_up
from stackmatrix.bench.engines import Engine, get_engine
from stackmatrix.built_environment import Environment
from stackmatrix.errors import SpecError, Unreadable
from stackmatrix.jsontypes import JSONObject
from stackmatrix.outcome import Fail, Skip, apply, record
from stackmatrix.records import BenchData, check_verdict
from stackmatrix.results import CellDir, PhaseResult, PhaseRun, RunDir, Status, now_iso
from stackmatrix.spec_model import Bench, Spec

if TYPE_CHECKING:
    from stackmatrix.stats.verdict import Comparison

log = logging.getLogger(__name__)

Progress = Callable[[str, str], None]
SCHEDULE_FILE = layout.BENCH_SCHEDULE


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
    model = _model(bench, spec_dir)
    tok, lengths = tokenizer.find(bench.tokenizer, model, spec_dir)
    if tok is None and _wants_ids(bench):
        raise SpecError(
            "bench.workload.prompt_form",
            [f'"token_ids" needs the model\'s tokenizer: {lengths.why}'],
        )
    if tok is None:
        say("-", f"prompt lengths are by words, not exact: {lengths.why}")
    wl = workload.generate(bench.workload, spec_dir=spec_dir, tokenizer=tok)
    points = tuple(
        (pt, workload.generate(pt.workload, spec_dir=spec_dir, tokenizer=tok))
        for pt in bench.points
    )
    wl_hash = _write_workload(run_dir, wl, points, lengths)
    states: dict[str, CellState] = {}
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
    plan = adaptive.Plan.of(bench)
    seed = _seed(spec, run_dir)
    cycles = _Cycles(
        spec=spec,
        bench=bench,
        engine=engine,
        states=states,
        model=model,
        wl=wl,
        wl_hash=wl_hash,
        points=points,
        say=say,
        order=order,
        seed=seed,
        run_dir=run_dir,
    )
    if plan.adaptive:
        _record_planned(states, plan)
    try:
        cycles.run(list(cell_ids), plan.low, warm=True)
        if plan.adaptive and spec.baseline in states:
            # every cycle has the baseline: a resumed run whose baseline's launch of an
            # added cycle was cut off runs it first (each candidate's launch is paired
            # with the baseline's of its cycle)
            reached = _most_launches(states, final)
            cycles.run([spec.baseline], min(plan.high, reached), warm=False)
        while plan.adaptive:
            verdicts = adaptive.look(spec, plan, states, list(states))
            more = adaptive.next_cells(spec, plan, states, verdicts)
            _record_plan(states, plan, verdicts, stopped=not more)
            for cid, c in verdicts.items():
                say(
                    cid,
                    f"after {len(states[cid].launches)} launch(es): {c.verdict.value}"
                    + ("" if more else " (final)"),
                )
            if not more:
                break
            target = min(plan.high, max(len(states[c].launches) for c in more) + 1)
            cycles.run(more, target, warm=False)
    except BaseException:
        for st in states.values():
            if st.result.status is Status.INTERRUPTED:
                st.interrupt()
        raise
    for cid, st in states.items():
        final[cid] = finish(st, bench, spec.report.headline)
        say(cid, f"bench {final[cid].status.value}: {final[cid].message}")
    return {cid: final[cid] for cid in cell_ids if cid in final}


def _most_launches(states: Mapping[str, CellState], final: Mapping[str, PhaseResult]) -> int:
    """The most launches a cell has: of those to run, and of those already complete."""
    running = [len(st.launches) for st in states.values() if not st.failed]
    done = [
        sum(ln.status == "ok" for ln in BenchData.from_dict(r.data).launches)
        for r in final.values()
        if r.status is Status.OK
    ]
    return max([*running, *done], default=0)


@dataclass(kw_only=True)
class _Cycles:
    """Runs cycles of launches: each cell's launches up to a target count, in the
    schedule's order, every slot recorded in the schedule file as it is planned."""

    spec: Spec
    bench: Bench
    engine: Engine
    states: Mapping[str, CellState]
    model: str
    wl: workload.WorkloadSet
    wl_hash: str
    points: Points
    say: Progress
    order: str
    seed: int
    run_dir: RunDir
    seq: int = 0
    warmed: bool = False

    def run(self, cells: Sequence[str], target: int, *, warm: bool) -> None:
        pending = {
            cid: list(range(len(self.states[cid].launches) + 1, target + 1))
            for cid in cells
            if cid in self.states and not self.states[cid].failed
        }
        slots = schedule.schedule(
            pending,
            list(self.spec_order()),
            self.order,
            self.seed,
            baseline=self.spec.baseline,
            balance=balance(self.states, self.spec.baseline),
        )
        for st in self.states.values():
            planned: JSONObject = {"order": self.order, "order_seed": self.seed}
            st.data = dataclasses.replace(st.data, extra={**st.data.extra, "order": planned})
        if warm or slots:
            _write_schedule(self.run_dir, self.order, self.seed, slots)
        if slots and not self.warmed:
            # before this process's first launch, whichever call plans it: a resumed run
            # whose first cycles were complete still starts on a cold machine
            self.warmed = True
            warm_up(
                self.bench,
                self.engine,
                self.states,
                slots,
                self.model,
                self.wl,
                self.say,
                self.points,
            )
        for cid, k in slots:
            self.seq += 1
            self._launch(cid, k, len(slots))

    def spec_order(self) -> list[str]:
        return [c.id for c in self.spec.cells if c.id in self.states]

    def _launch(self, cid: str, k: int, planned: int) -> None:
        st = self.states[cid]
        if st.failed:
            return
        self.say(cid, f"launch {k}/{self.bench.launches} (slot {self.seq})")
        try:
            run = run_launch(
                self.bench, self.engine, st, k, self.seq, self.model, self.wl, self.points
            )
            launch = run.record(measured=True)
            record_launch(
                st, launch, run.config, bench=self.bench, engine=self.engine, wl_hash=self.wl_hash
            )
        except Exception as exc:  # a crash of ours fails this cell, not the run
            st.crash(exc, f"launch {k}")
            self.say(cid, f"bench failed: {st.result.message}")


def balance(states: Mapping[str, CellState], baseline: str) -> dict[str, int]:
    """Each candidate's cycles run before the baseline's launch less those run after it,
    over the cycles both have completed launches of (bench/schedule.py evens it out)."""
    base = states.get(baseline)
    if base is None:
        return {}
    starts = _starts(base)
    out = {}
    for cid, st in states.items():
        if cid == baseline:
            continue
        mine = _starts(st)
        out[cid] = sum(1 if t < starts[k] else -1 for k, t in mine.items() if k in starts)
    return out


def _starts(st: CellState) -> dict[int, float]:
    out = {}
    for ln in st.launches:
        span = ln.span()
        if isinstance(ln.index, int) and span is not None:
            out[ln.index] = span[0].timestamp()
    return out


def _seed(spec: Spec, run_dir: RunDir) -> int:
    """The spec's order_seed, else the one an earlier session of these results drew,
    else a new one (recorded in the schedule file: the order can be replayed)."""
    if spec.order_seed is not None:
        return spec.order_seed
    for session in reversed(schedule.earlier_sessions(run_dir.path / SCHEDULE_FILE)):
        if isinstance(seed := session.get("order_seed"), int):
            return int(seed)
    return secrets.randbelow(2**31)


def _record_plan(
    states: Mapping[str, CellState],
    plan: adaptive.Plan,
    verdicts: Mapping[str, Comparison],
    *,
    stopped: bool,
) -> None:
    """The adaptive plan and the latest look, in every cell's bench.json."""
    for cid, st in states.items():
        entry: JSONObject = {**plan.to_dict(), "launches": len(st.launches)}
        if cid in verdicts:
            entry["verdict"] = verdicts[cid].verdict.value
        if stopped:  # no verdict looked at (the candidates were complete): not "decided"
            decided = bool(verdicts) and all(c.verdict.decided for c in verdicts.values())
            entry["stopped"] = "decided" if decided else "max reached"
        st.data = dataclasses.replace(st.data, extra={**st.data.extra, "launch_plan": entry})
        st.save()


def _record_planned(states: Mapping[str, CellState], plan: adaptive.Plan) -> None:
    """The adaptive plan in every cell's bench.json before its first launch (kept where
    an earlier session recorded a look): a run cut off before the first look is still
    reported as the adaptive design it ran under, at that design's levels."""
    for st in states.values():
        if isinstance(st.data.extra.get("launch_plan"), dict):
            continue
        entry: JSONObject = {**plan.to_dict(), "launches": len(st.launches)}
        st.data = dataclasses.replace(st.data, extra={**st.data.extra, "launch_plan": entry})
        st.save()


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
) -> PhaseResult | CellState:
    """A final result for a cell that won't run, or its state (resumed when possible)."""
    cell_dir = run_dir.cell(cid)
    environment = environments.get(cid)
    inputs = inputs_hash(spec, bench, cid, environment, wl_hash)
    try:
        previous = cell_dir.read_to_resume("bench")
    except Unreadable as exc:
        return _kept_unreadable(cell_dir, inputs, exc)
    skip = _skip_reason(spec, bench, engine, cell_dir, cid, environment, force)
    if skip is not None:
        return record(PhaseRun.begin(cell_dir, "bench", inputs), Skip(*skip))
    if previous is not None and previous.inputs_hash == inputs:
        data = BenchData.from_dict(previous.data)
        done = [ln for ln in data.launches if ln.status == "ok"]
        if previous.status is Status.FAILED and previous.complete:
            return previous
        if previous.status is Status.OK and len(done) >= bench.launches:
            return previous
        state = _state(spec, cid, cell_dir, inputs, environment)
        state.launches, state.data = done, data
        state.result.started = previous.started or state.result.started
        return state
    # started afresh: the launches of what it replaces must not be read as its own
    cell_dir.remove_launch_files()
    return _state(spec, cid, cell_dir, inputs, environment)


def _kept_unreadable(cell_dir: CellDir, inputs: str, exc: Unreadable) -> PhaseResult:
    """The cell's status when its bench.json cannot be read: failed, and not written, so
    the file and the launches it may hold stay (the run refuses it before this)."""
    result = PhaseRun.begin(cell_dir, "bench", inputs).result
    return apply(result, Fail("unreadable_record", exc.message))


def _state(
    spec: Spec, cid: str, cell_dir: CellDir, inputs: str, environment: Environment | None
) -> CellState:
    cell = spec.cell(cid)
    return CellState(
        cell_id=cid,
        cell_dir=cell_dir,
        run=PhaseRun.begin(cell_dir, "bench", inputs, message="not finished"),
        environment=environment,
        server_args=cell.server_args,
        env=dict(cell.env),
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
    if engine.launches_server and environment is None:
        built = layout.phase_result("build")
        return "not_built", f"cell {cid!r} has no built environment (see its {built})"
    if not force and _incompatible(cell_dir):
        return "incompatible", (
            "the check phase found the cell incompatible (pass --force to bench it)"
        )
    cell = spec.cell(cid)
    needs_gpu = engine.needs_gpu or cell.gpus > 0
    if needs_gpu and envfacts.gpu_count() == 0:
        return "no_gpu", f"engine {engine.name!r} needs a GPU and nvidia-smi lists none here"
    if not engine.launches_server and not bench.url:
        return "no_url", f"engine {engine.name!r} needs bench.url, the address already serving"
    return None


def _incompatible(cell_dir: CellDir) -> bool:
    check = cell_dir.read("check")
    if check is None or check.status is not Status.OK:
        return False
    return check_verdict(check) == "incompatible"


def inputs_hash(
    spec: Spec, bench: Bench, cid: str, environment: Environment | None, wl_hash: str
) -> str:
    """Everything that defines the cell's measurements, except the number of launches
    (raising it later resumes with more launches instead of starting over)."""
    bench_dict = dataclasses.asdict(bench)
    bench_dict.pop("launches")
    bench_dict.pop("min_launches")  # how many launches, fixed or adaptive, neither
    bench_dict.pop("warmup_launches")  # discarded launches don't define the measurements
    bench_dict.pop("host_warmup")
    bench_dict.pop("workload")
    if bench_dict.get("client_workers") == 1:
        # the in-process client, as before the key existed: earlier results still resume
        bench_dict.pop("client_workers")
    if not bench_dict.get("flush_cache"):
        bench_dict.pop("flush_cache")  # off: measured as before the key existed
    defaults = Bench()
    for key in ("steady_warmup", "warmup_max_batches", "steady_tolerance", "min_duration_s"):
        if bench_dict.get(key) == getattr(defaults, key):
            # at its default, as in results of versions without the key: they resume
            bench_dict.pop(key)
    payload = {
        "bench": bench_dict,
        "workload_hash": wl_hash,
        "cell_server_args": list(spec.cell(cid).server_args),
        "cell_env": list(spec.cell(cid).env),
        "environment": environment.to_dict() if environment is not None else None,
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _crashed_before(cell_dir: CellDir, exc: Exception) -> PhaseResult:
    return PhaseRun.begin(cell_dir, "bench", "").crash(exc)


def _model(bench: Bench, spec_dir: Path | None) -> str:
    """A relative model path is read relative to the spec, when it exists there."""
    if spec_dir is not None and bench.model and not Path(bench.model).is_absolute():
        candidate = spec_dir / bench.model
        if candidate.exists():
            return str(candidate.resolve())
    return bench.model


def _wants_ids(bench: Bench) -> bool:
    workloads = (bench.workload, *(pt.workload for pt in bench.points))
    return any(wk.prompt_form == "token_ids" for wk in workloads)


def _write_workload(
    run_dir: RunDir,
    wl: workload.WorkloadSet,
    points: Points = (),
    lengths: tokenizer.PromptLengths | None = None,
) -> str:
    """RUN/workload.jsonl (and workload-<point>.jsonl per load point) and workload.json
    (with how the prompts got their lengths); the hash of them all (the headline's alone
    when there are no points)."""
    path = run_dir.path / workload.WORKLOAD_FILE
    data = wl.to_jsonl()
    if not path.is_file() or path.read_bytes() != data:
        workload.write(run_dir.path, wl)
    info: JSONObject = {"hash": wl.hash, "measured": len(wl.measured), "warmup": len(wl.warmup)}
    if lengths is not None:
        made = lengths.to_dict()
        forms = {wl.prompt_form, *(pwl.prompt_form for _, pwl in points)}
        if forms != {"text"}:  # sent as token ids: the server's tokenizer not involved
            made["sent_as"] = " and ".join(sorted(forms))
        if unfitted := wl.unfitted + sum(pwl.unfitted for _, pwl in points):
            made["unfitted"] = unfitted  # prompts a token off: no cut reached their length
        info["prompt_lengths"] = made
    if not points:
        run_dir.write_json(layout.WORKLOAD_JSON, info)
        return wl.hash
    combined = hashlib.sha256(wl.hash.encode())
    per_point: JSONObject = {}
    info["points"] = per_point
    for pt, pwl in points:
        _atomic.write_bytes(run_dir.path / layout.point_workload(pt.name), pwl.to_jsonl())
        per_point[pt.name] = {
            "hash": pwl.hash,
            "measured": len(pwl.measured),
            "warmup": len(pwl.warmup),
        }
        combined.update(f"{pt.name}:{pwl.hash}".encode())
    run_dir.write_json(layout.WORKLOAD_JSON, info)
    return combined.hexdigest()


def _write_schedule(
    run_dir: RunDir, order: str, seed: int, slots: Sequence[tuple[str, int]]
) -> None:
    """This session's plan, after the plans of the earlier sessions of these results: a
    resume, or a run of one more cell with --cell, plans only what is left (on the H200
    a third cell run afterwards replaced the interleaved plan of the first two)."""
    planned = [{"cell": c, "launch": k} for c, k in slots]
    this = {"order": order, "order_seed": seed, "slots": planned}
    earlier = schedule.earlier_sessions(run_dir.path / SCHEDULE_FILE)
    sessions = [*earlier, {"started": now_iso(), **this}] if slots or not earlier else earlier
    run_dir.write_json(SCHEDULE_FILE, {**this, "sessions": sessions})
