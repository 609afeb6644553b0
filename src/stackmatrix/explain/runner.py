"""Explain one cell of a finished run: derive the reverts, measure them in rounds, write
RUN/explain/<cell>/explanation.json.

Each round is an ordinary run of a derived spec (the baseline, the candidate and one
cell per reverted group, every cell fully defined) into RUN/explain/<cell>/round-<k>/:
build, check and bench as for any cell, new launches of the baseline and the candidate
interleaved with the reverts so that drift over time cancels out, and resumable.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackmatrix import _atomic, layout
from stackmatrix.errors import ResultsError, StackmatrixError, UsageError
from stackmatrix.explain import _toml
from stackmatrix.explain.derive import Change, Derived, derive
from stackmatrix.explain.search import RoundData, SearchResult, search, split
from stackmatrix.explain.text import sentences
from stackmatrix.report.load import RunResults, load_run
from stackmatrix.report.model import build_model, cold_first_launches
from stackmatrix.report.stats import Thresholds
from stackmatrix.results import Status

log = logging.getLogger(__name__)
SCHEMA_VERSION = 1
EXPLANATION_FILE = layout.EXPLANATION_JSON
_UNSAFE = re.compile(r"[^A-Za-z0-9._~=+,-]+")
_LOCAL_KEYS = ("find_links", "extra_index_urls", "ca_certs")


class KeptRound(UsageError):
    """A kept round that this explain would measure over (another round spec)."""


# (spec path, output dir) -> runs that round; the CLI passes the pipeline
RoundRunner = Callable[[Path, Path], None]


@dataclass(frozen=True, kw_only=True)
class Context:
    run_dir: Path
    cell: str
    baseline: str
    metric: str
    thresholds: Thresholds
    raw_spec: dict[str, Any]
    spec_dir: Path
    definitions: dict[str, dict[str, Any]]
    launches: int | None
    warmup: int | None = None  # warm-up requests per launch in the rounds (None: the run's)
    warmup_launches: int | None = None  # per cell in the rounds (None: the run's, at least 1)
    rejudge: bool = False  # judge the rounds kept under explain/<cell>/, measure nothing
    note: str = ""  # said in the explanation's notes


def explain_cell(
    run_dir: Path,
    cell: str,
    *,
    run_round: RoundRunner,
    launches: int | None = None,
    max_rounds: int = 4,
    warmup: int | None = None,
    warmup_launches: int | None = None,
    rejudge: bool = False,
) -> Path:
    """Explain `cell` against the run's baseline; returns the explanation file. With
    `rejudge`, the rounds kept are judged again (by this version, on any machine) and
    nothing is measured."""
    ctx, derived = prepare(run_dir, cell, launches)
    ctx = dataclasses.replace(ctx, warmup=warmup, warmup_launches=warmup_launches,
                              rejudge=rejudge)  # fmt: skip
    out = run_dir / layout.EXPLAIN_DIR / cell
    out.mkdir(parents=True, exist_ok=True)
    rounds: list[dict[str, Any]] = []

    def measure(groups: list[tuple[Change, ...]]) -> RoundData:
        return _round(ctx, out, len(rounds) + 1, groups, rounds, run_round)

    path = out / EXPLANATION_FILE
    try:
        result = search(list(derived.changes), measure, metric=ctx.metric,
                        thresholds=ctx.thresholds, max_rounds=max_rounds)  # fmt: skip
    except KeptRound:
        raise  # nothing was measured: the explanation of the kept rounds stands
    except StackmatrixError as exc:
        # said in the report, not only in a traceback; the rounds done stay for a re-run
        _atomic.write_json(path, _stopped(ctx, derived, rounds, exc))
        raise
    _atomic.write_json(path, _explanation(ctx, derived, result, rounds))
    return path


def _stopped(
    ctx: Context, derived: Derived, rounds: list[dict[str, Any]], exc: Exception
) -> dict[str, Any]:
    k = len(rounds) + 1
    return {
        "schema_version": SCHEMA_VERSION,
        "cell": ctx.cell,
        "baseline": ctx.baseline,
        "metric": ctx.metric,
        "status": f"failed in round {k}: {exc}",
        "gap": None,
        "cause": None,
        "rounds": [{**meta, "effects": []} for meta in rounds],
        "cannot_isolate": [{"key": key, "why": why} for key, why in derived.cannot],
        "notes": list(derived.notes),
        "revert_cells": sum(len(r["cells"]) for r in rounds),
        "launches": sum(int(r["launches"]) for r in rounds),
        "sentences": [
            f"{ctx.cell}: explain stopped in round {k} ({exc}); the rounds done are kept "
            f"under explain/{ctx.cell}/ and `stackmatrix explain` again resumes them."
        ],
    }


def prepare(run_dir: Path, cell: str, launches: int | None) -> tuple[Context, Derived]:
    """What explaining `cell` starts from: the run's context and the reverts derived from
    its differences (nothing is measured)."""
    results = load_run(run_dir)
    model = build_model(results)
    ctx = _context(results, cell, launches, model.thresholds, model.headline)
    report = model.cell(cell)
    if report.drift is None:
        raise UsageError(f"cell {cell!r} has no comparison with the baseline to explain")
    derived = derive(report.drift.intended, report.drift.unintended,
                     engine=_engine(results, cell), baseline_def=ctx.definitions[ctx.baseline],
                     cell_def=ctx.definitions[cell])  # fmt: skip
    return ctx, derived


def plan_lines(
    run_dir: Path, cell: str, launches: int | None, warmup_launches: int | None = None
) -> list[str]:
    """`explain --plan`: the reverts and the first round's cost, without measuring."""
    ctx, derived = prepare(run_dir, cell, launches)
    ctx = dataclasses.replace(ctx, warmup_launches=warmup_launches)
    groups = split(list(derived.changes)) if derived.changes else []
    per_cell = ctx.launches or int((ctx.raw_spec.get("bench") or {}).get("launches", 5))
    warm = _warmup_launches(ctx, ctx.raw_spec.get("bench") or {})
    out = [f"{cell} against {ctx.baseline} ({ctx.metric}): {len(derived.changes)} revert(s)"]
    for change in derived.changes:
        how = [*change.args, *(f"{k}={v}" for k, v in change.env), *change.pins]
        if change.server_args is not None:
            how = ["server_args:", *change.server_args]
        out.append(f"  revert {change.label}: {' '.join(how)}")
    out += [f"  cannot be isolated: {key}: {why}" for key, why in derived.cannot]
    out += [f"  note: {note}" for note in derived.notes]
    if groups:
        cells = len(groups) + 2
        out.append(f"round 1: {len(groups)} revert cell(s) + {ctx.baseline} + {cell}, "
                   f"{per_cell} launch(es) each = {cells * per_cell} launches"
                   + (f", after {warm} warm-up launch(es) each ({cells * warm} more)"
                      if warm else ""))  # fmt: skip
        out += _round_time(run_dir, ctx.baseline, cell, len(groups), per_cell + warm)
    return out


def _round_time(run_dir: Path, baseline: str, cell: str, reverts: int, each: int) -> list[str]:
    """Round 1's wall time at the launch times of the newest measurement: the last round
    kept under explain/<cell>/ (its revert cells' own times), else the run (a revert
    cell counted at the slower of the two). What a GPU budget must hold."""
    source, results = _newest(run_dir, cell)
    base, cand = _launch_seconds(results, baseline), _launch_seconds(results, cell)
    if not base or not cand:  # not recorded (or no time at all: a synthetic run)
        return []
    kept = [t for c in results.cells if "~" in c.id and (t := _launch_seconds(results, c.id))]
    revert = sum(kept) / len(kept) if kept else max(base, cand)
    total = each * (base + cand + reverts * revert)
    return [
        f"  about {total / 60:.0f} min at the launch times of {source} ({baseline} {base:.0f} "
        f"s, {cell} {cand:.0f} s, a revert cell {revert:.0f} s per launch)"
    ]


def _newest(run_dir: Path, cell: str) -> tuple[str, RunResults]:
    k = 1
    while (run_dir / layout.EXPLAIN_DIR / cell / f"round-{k}" / layout.RUN_JSON).is_file():
        k += 1
    if k > 1:
        return f"its round-{k - 1}", load_run(
            run_dir / layout.EXPLAIN_DIR / cell / f"round-{k - 1}"
        )
    return "this run", load_run(run_dir)


def _launch_seconds(results: RunResults, cid: str) -> float | None:
    """The median wall time of a cell's launches, from start to finish (its server's
    start-up, its rounds, its teardown)."""
    import datetime as _dt
    import statistics

    found = results.cell(cid)
    spans = []
    for launch in found.bench.launches if found is not None else ():
        try:
            start = _dt.datetime.fromisoformat(launch.started or "")
            end = _dt.datetime.fromisoformat(launch.finished or "")
        except ValueError:
            continue
        spans.append((end - start).total_seconds())
    return statistics.median(spans) if spans else None


def _context(
    results: RunResults, cell: str, launches: int | None, th: Thresholds, metric: str
) -> Context:
    if results.cell(cell) is None:
        known = ", ".join(c.id for c in results.cells)
        raise UsageError(f"no cell {cell!r} in {results.path} (cells: {known})")
    if cell == results.baseline:
        raise UsageError(f"{cell!r} is the baseline: explain a cell that differs from it")
    original = Path(str(results.run.get("spec_path") or ""))
    spec_dir = original.resolve().parent if original.is_file() else results.path
    definitions = {c.id: dict(c.definition) for c in results.cells if c.definition}
    unredacted = _original_spec(original, str(results.run.get("spec_hash") or ""))
    if unredacted is not None:
        # the spec as run, secrets included (the results hold it with them hidden)
        raw, definitions = unredacted[0], {**definitions, **unredacted[1]}
        note = ""
    else:
        spec_file = results.path / layout.SPEC_TOML
        try:
            raw = tomllib.loads(spec_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ResultsError(f"cannot read {spec_file}: {exc}") from exc
        note = (
            f"the spec as run ({original}) is not here or has changed: revert cells are "
            "built from the results' copy, whose secret values (index credentials, "
            "secret env) are hidden"
        )
    for needed in (cell, results.baseline):
        if needed not in definitions:
            raise ResultsError(f"plan.json of {results.path} has no definition of {needed!r}")
    return Context(run_dir=results.path, cell=cell, baseline=results.baseline, metric=metric,
                   thresholds=th, raw_spec=raw, spec_dir=spec_dir, definitions=definitions,
                   launches=launches, note=note)  # fmt: skip


def _original_spec(
    path: Path, digest: str
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]] | None:
    """The original spec's TOML and cell definitions, when it is still the one run."""
    from stackmatrix.pipeline.rundir import spec_digest
    from stackmatrix.plan import cell_definition
    from stackmatrix.spec import load_spec

    try:
        if not path.is_file() or spec_digest(path) != digest:
            return None
        spec = load_spec(path)
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, StackmatrixError):
        return None
    return raw, {c.id: cell_definition(c) for c in spec.cells}


def _engine(results: RunResults, cell: str) -> str:
    found = results.cell(cell)
    engine = found.data("bench").get("engine") if found is not None else None
    return str(engine or "")


# --- one round -----------------------------------------------------------------------


def _round(
    ctx: Context,
    out: Path,
    k: int,
    groups: list[tuple[Change, ...]],
    rounds: list[dict[str, Any]],
    run_round: RoundRunner,
) -> RoundData:
    ids = [_group_id(ctx.cell, k, i, g) for i, g in enumerate(groups)]
    round_dir = out / f"round-{k}"
    if ctx.rejudge:
        _kept_round(round_dir, ids)
    else:
        spec_path = out / f"round-{k}.toml"
        text = _toml.dumps(_derived_spec(ctx, k, groups, ids))
        _refuse_other_round(round_dir, text)
        spec_path.write_text(text, encoding="utf-8")
        log.info("explain %s: round %d, %d revert cell(s)", ctx.cell, k, len(groups))
        run_round(spec_path, round_dir)
    results = load_run(round_dir)

    def launches(cid: str) -> list[list[float]]:
        found = results.cell(cid)
        return found.launches(ctx.metric) if found is not None else []

    cells = {cid: [c.to_dict() for c in g] for cid, g in zip(ids, groups, strict=True)}
    measured = sum(len(launches(c)) for c in [ctx.baseline, ctx.cell, *ids])
    rounds.append({"round": k, "dir": round_dir.name, "cells": cells, "launches": measured,
                   "cold_starts": _cold_starts(results, ctx.metric)})  # fmt: skip
    return RoundData(baseline=launches(ctx.baseline), candidate=launches(ctx.cell),
                     groups=[launches(cid) for cid in ids],
                     not_run=["" if launches(cid) else _not_run(results, cid)
                              for cid in ids])  # fmt: skip


def _refuse_other_round(round_dir: Path, text: str) -> None:
    """A kept round is resumed only with the spec it was measured with: another machine
    (its paths), other options or another stackmatrix would redo its cells and replace
    launches that took GPU time with whatever happens here."""
    import hashlib

    from stackmatrix.records import RunRecord
    from stackmatrix.results import RunDir

    run = RunDir(round_dir)
    if not run.run_json.exists():
        return
    kept = RunRecord.read(run).spec_hash
    if kept != hashlib.sha256(text.encode("utf-8")).hexdigest():
        raise KeptRound(
            f"{round_dir} was measured with another round spec (another machine's paths, "
            "other --launches/--warmup options or another stackmatrix): it is kept as it "
            "is; `stackmatrix explain --rejudge` judges it again without measuring, or "
            "move it aside to measure the round anew"
        )


def _kept_round(round_dir: Path, ids: Sequence[str]) -> None:
    missing = [cid for cid in ids if not (round_dir / layout.CELLS_DIR / cid).is_dir()]
    if not (round_dir / layout.RUN_JSON).is_file() or missing:
        what = "no run.json" if not (round_dir / layout.RUN_JSON).is_file() else (
            f"no cell {', '.join(missing)}")  # fmt: skip
        raise UsageError(
            f"--rejudge: {round_dir} was not measured ({what}): run `stackmatrix explain` "
            "without --rejudge to measure it"
        )


def _cold_starts(results: RunResults, metric: str) -> list[dict[str, Any]]:
    """The round's cells whose first measured launch was a cold start: noise that the
    round's warm-up launches did not absorb (revert cells are configurations the machine
    has not served before, so their kernels compile in their first launch)."""
    model = build_model(results)
    return [dataclasses.asdict(c) for c in cold_first_launches(model.cells, metric)]


def _not_run(results: RunResults, cid: str) -> str:
    """Why a revert cell has no launches: its first phase that did not end ok (a bench
    skipped because the check found it incompatible says so in its message)."""
    found = results.cell(cid)
    if found is None:
        return f"{cid} is missing from the round's results"
    for name in ("build", "check", "bench"):
        phase = found.phase(name)
        if phase is None:
            return f"{cid}: no {name} result"
        if phase.status is not Status.OK:
            why = phase.message or phase.code or ""
            return f"{cid}: {name} {phase.status.value}" + (f" ({why})" if why else "")
    return f"{cid}: no launch ran to the end"


def _group_id(cell: str, k: int, i: int, group: Sequence[Change]) -> str:
    if len(group) == 1:
        change = group[0]
        name = f"{cell}~{change.slug}={change.to_value}"
    else:
        name = f"{cell}~revert-r{k}{'abcdefgh'[i % 8]}-{len(group)}"
    return _UNSAFE.sub("_", name)[:128]


def _derived_spec(
    ctx: Context, k: int, groups: Sequence[tuple[Change, ...]], ids: Sequence[str]
) -> dict[str, Any]:
    raw = ctx.raw_spec
    base, cand = ctx.definitions[ctx.baseline], ctx.definitions[ctx.cell]
    cells = [_cell_table(ctx, base), _cell_table(ctx, cand)]
    for cid, group in zip(ids, groups, strict=True):
        cells.append(_cell_table(ctx, _reverted(cand, group), cid))
    bench = _bench(ctx, dict(raw.get("bench") or {}))
    report = {k2: v for k2, v in (raw.get("report") or {}).items()
              if k2 in ("headline", "confidence", "min_effect")}  # fmt: skip
    spec: dict[str, Any] = {
        "name": f"{raw.get('name', 'run')}-explain",
        "description": f"stackmatrix explain {ctx.cell}: round {k}",
        "baseline": ctx.baseline,
        "targets": list(raw.get("targets") or []),
        "order": "interleaved",
        "cell": cells,
        "bench": bench,
        "report": report,
    }
    if raw.get("driver"):
        spec["driver"] = raw["driver"]
    return spec


def _reverted(cand: Mapping[str, Any], group: Sequence[Change]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(dict(cand)))  # a deep copy
    for change in group:
        if change.server_args is not None:
            out["server_args"] = list(change.server_args)
        out["server_args"] = [*out.get("server_args", []), *change.args]
        out["env"] = {**out.get("env", {}), **dict(change.env)}
        out["pins"] = _replace_pins(out.get("pins", []), change.pins)
    return out


def _replace_pins(pins: Sequence[str], new: Sequence[str]) -> list[str]:
    from stackmatrix.explain.derive import pin_names

    names = pin_names(new)
    return [p for p in pins if pin_names([p]) & names == set()] + list(new)


def _cell_table(
    ctx: Context, definition: Mapping[str, Any], cell_id: str | None = None
) -> dict[str, Any]:
    table = {k: v for k, v in definition.items()
             if k not in ("axes",) and v is not None and v != [] and v != {}}  # fmt: skip
    if cell_id is not None:
        table["id"] = cell_id
    for key in _LOCAL_KEYS:
        if key in table:
            table[key] = [_absolute(ctx, v) for v in table[key]]
    if table.get("index_url"):
        table["index_url"] = _absolute(ctx, table["index_url"])
    return table


def _absolute(ctx: Context, value: str) -> str:
    """A path relative to the original spec, made absolute for the derived spec."""
    if value.startswith(("./", "../")):
        return str((ctx.spec_dir / value).resolve())
    return value


def _warmup_launches(ctx: Context, bench: Mapping[str, Any]) -> int:
    """The rounds' warm-up launches per cell: asked for, or the run's, at least one (on
    the H200, 3 of a round's 4 cells paid 30-66% for a cold first launch without one)."""
    if ctx.warmup_launches is not None:
        return ctx.warmup_launches
    return max(int(bench.get("warmup_launches") or 0), 1)


def _bench(ctx: Context, bench: dict[str, Any]) -> dict[str, Any]:
    if ctx.launches is not None:
        bench["launches"] = ctx.launches
    bench["warmup_launches"] = _warmup_launches(ctx, bench)
    if ctx.warmup is not None:
        bench["workload"] = {**(bench.get("workload") or {}), "warmup": ctx.warmup}
    bench.pop("points", None)  # a round judges the headline metric only
    model = bench.get("model")
    if isinstance(model, str) and not Path(model).is_absolute():
        candidate = ctx.spec_dir / model
        if candidate.exists():
            bench["model"] = str(candidate.resolve())
    return bench


# --- the explanation file ------------------------------------------------------------


def _explanation(
    ctx: Context, derived: Derived, result: SearchResult[Change], rounds: list[dict[str, Any]]
) -> dict[str, Any]:
    def describe(c: Change) -> dict[str, Any]:
        return c.to_dict()

    return {
        "schema_version": SCHEMA_VERSION,
        "cell": ctx.cell,
        "baseline": ctx.baseline,
        "metric": ctx.metric,
        "status": result.status,
        "gap": result.gap.to_dict() if result.gap else None,
        "cause": result.cause.to_dict(describe) if result.cause else None,
        "rounds": [
            {**meta, "effects": [e.to_dict(describe) for e in effects]}
            for meta, effects in zip(rounds, result.rounds, strict=True)
        ],
        "cannot_isolate": [{"key": k, "why": why} for k, why in derived.cannot],
        "notes": [*derived.notes, *([ctx.note] if ctx.note else [])],
        "revert_cells": sum(len(r["cells"]) for r in rounds),
        "launches": sum(int(r["launches"]) for r in rounds),
        "sentences": [*sentences(ctx.cell, ctx.baseline, result), *_cold_sentences(rounds)],
    }


def _cold_sentences(rounds: Sequence[Mapping[str, Any]]) -> list[str]:
    out = []
    for meta in rounds:
        cold = meta.get("cold_starts") or []
        if not cold:
            continue
        warm = int(cold[0]["warmup_launches"])
        worst = ", ".join(f"{c['cell']} {abs(c['first'] / c['median'] - 1):.0%}" for c in cold)
        out.append(
            f"Round {meta['round']}: the first measured launch was a cold start in "
            f"{len(cold)} of {len(meta['cells']) + 2} cells ({worst} worse than their other "
            f"launches) after {warm} warm-up launch(es): noise the warm-up did not absorb; "
            f"`stackmatrix explain --warmup-launches {warm + 1}` measures past it."
        )
    return out
