"""Explain one cell of a finished run: derive the reverts, measure them in rounds, write
RUN/explain/<cell>/explanation.json.

Each round is an ordinary run of a derived spec (the baseline, the candidate and one
cell per reverted group, every cell fully defined) into RUN/explain/<cell>/round-<k>/:
build, check and bench as for any cell, new launches of the baseline and the candidate
interleaved with the reverts so that drift over time cancels out, and resumable.
"""

from __future__ import annotations

import dataclasses
import logging
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from stackmatrix import _atomic, _nofollow, layout
from stackmatrix._secrets import redact_spec_text
from stackmatrix.errors import StackmatrixError, UsageError
from stackmatrix.explain import _toml
from stackmatrix.explain.context import Context, prepare
from stackmatrix.explain.derive import Change, Derived
from stackmatrix.explain.roundspec import derived_spec, group_id
from stackmatrix.explain.search import RoundData, SearchResult, search
from stackmatrix.explain.text import sentences
from stackmatrix.report.config_drift import Difference
from stackmatrix.report.load import RunResults, load_run
from stackmatrix.report.matrix import MatrixReport
from stackmatrix.report.model import build_model, cold_first_launches
from stackmatrix.results import Status

log = logging.getLogger(__name__)
SCHEMA_VERSION = 1
EXPLANATION_FILE = layout.EXPLANATION_JSON


class KeptRound(UsageError):
    """A kept round that this explain would measure over (another round spec)."""


# (spec path, output dir) -> runs that round; the CLI passes the pipeline
RoundRunner = Callable[[Path, Path], None]


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
    out = _explain_dir(run_dir, cell)
    rounds: list[dict[str, Any]] = []

    cannot = [key for key, _ in derived.cannot]

    def measure(groups: list[tuple[Change, ...]]) -> RoundData:
        return _round(ctx, out, len(rounds) + 1, groups, rounds, run_round, cannot)

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
    result.status = _status(result.status, rounds)
    _atomic.write_json(path, _explanation(ctx, derived, result, rounds))
    return path


def _explain_dir(run_dir: Path, cell: str) -> Path:
    """RUN/explain/<cell>/, made sure to hold no link: a round's spec, its results and
    the explanation written through one would land outside the results directory."""
    top = run_dir / layout.EXPLAIN_DIR
    out = top / cell
    _nofollow.refuse_links([top, out])
    if out.is_dir():  # its round specs, round directories and explanation; a round's
        _nofollow.refuse_links(out.iterdir())  # inside is the resumed run's to refuse
    out.mkdir(parents=True, exist_ok=True)
    return out


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
        "cannot_isolate": _cannot_isolate(derived, rounds),
        "notes": list(derived.notes),
        "revert_cells": sum(len(r["cells"]) for r in rounds),
        "launches": sum(int(r["launches"]) for r in rounds),
        "sentences": [
            f"{ctx.cell}: explain stopped in round {k} ({exc}); the rounds done are kept "
            f"under explain/{ctx.cell}/ and `stackmatrix explain` again resumes them."
        ],
    }


# --- one round -----------------------------------------------------------------------


def _round(
    ctx: Context,
    out: Path,
    k: int,
    groups: list[tuple[Change, ...]],
    rounds: list[dict[str, Any]],
    run_round: RoundRunner,
    cannot: Sequence[str],
) -> RoundData:
    ids = [group_id(ctx.cell, k, i, g) for i, g in enumerate(groups)]
    round_dir = out / f"round-{k}"
    if ctx.rejudge:
        _kept_round(round_dir, ids)
    else:
        spec_path = out / f"round-{k}.toml"
        text = _toml.dumps(derived_spec(ctx, k, groups, ids))
        _refuse_other_round(round_dir, text)
        _atomic.write_text(spec_path, text)  # replaces the file, never writes through it
        log.info("explain %s: round %d, %d revert cell(s)", ctx.cell, k, len(groups))
        try:
            run_round(spec_path, round_dir)
        finally:  # the round needed its credentials; the results keep none
            _atomic.write_text(spec_path, redact_spec_text(text))
    results = load_run(round_dir)

    def launches(cid: str) -> list[list[float]]:
        found = results.cell(cid)
        return found.launches(ctx.metric) if found is not None else []

    cells = {cid: [c.to_dict() for c in g] for cid, g in zip(ids, groups, strict=True)}
    every = [ctx.baseline, ctx.cell, *ids]
    measured = sum(len(launches(c)) for c in every)
    model = build_model(results)
    measured_ids = [cid for cid in ids if launches(cid)]
    rounds.append({
        "round": k, "dir": round_dir.name, "cells": cells, "launches": measured,
        "cold_starts": _cold_starts(model, ctx.metric),
        "unfinished": _unfinished(results, every, launches),
        "brought_back": _brought_back(model, ctx.cell, measured_ids, cannot),
    })  # fmt: skip
    return RoundData(baseline=launches(ctx.baseline), candidate=launches(ctx.cell),
                     groups=[launches(cid) for cid in ids],
                     not_run=["" if launches(cid) else _not_run(results, cid)
                              for cid in ids])  # fmt: skip


def _refuse_other_round(round_dir: Path, text: str) -> None:
    """A kept round is resumed only with the spec it was measured with: another machine
    (its paths), other options or another stackmatrix would redo its cells and replace
    launches that took GPU time with whatever happens here."""
    from stackmatrix.pipeline.rundir import digest_of
    from stackmatrix.records import RunRecord
    from stackmatrix.results import RunDir

    run = RunDir(round_dir)
    if not run.run_json.exists():
        return
    kept = RunRecord.read(run).spec_hash
    if kept != digest_of(text.encode("utf-8")):
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


def _cold_starts(model: MatrixReport, metric: str) -> list[dict[str, Any]]:
    """The round's cells whose first measured launch was a cold start: noise that the
    round's warm-up launches did not absorb (revert cells are configurations the machine
    has not served before, so their kernels compile in their first launch)."""
    return [{**dataclasses.asdict(c), "worse": c.worse}
            for c in cold_first_launches(model.cells, metric)]  # fmt: skip


def _brought_back(
    model: MatrixReport, candidate: str, reverts: Sequence[str], cannot: Sequence[str]
) -> dict[str, list[dict[str, Any]]]:
    """Per measured revert cell: the differences that cannot be isolated which the
    candidate still shows in this round and the revert cell no longer does. They are
    not differences of their own but consequences of what that cell reverts (sglang
    captures decode CUDA graphs only up to --max-running-requests)."""

    def differences(cid: str) -> dict[str, Difference] | None:
        report = next((c for c in model.cells if c.id == cid), None)
        drift = report.drift if report is not None else None
        if drift is None or drift.not_compared:
            return None  # a source (its server log) missing: absence proves nothing
        return {d.key: d for d in (*drift.intended, *drift.unintended)}

    shown = differences(candidate) or {}
    out: dict[str, list[dict[str, Any]]] = {}
    for cid in reverts:
        mine = differences(cid)
        if mine is None:
            continue
        gone = [shown[key] for key in cannot if key in shown and key not in mine]
        if gone:
            out[cid] = [{"key": d.key, "value": d.value, "baseline": d.baseline} for d in gone]
    return out


def _unfinished(
    results: RunResults, cells: Sequence[str], launches: Callable[[str], list[list[float]]]
) -> list[dict[str, Any]]:
    """The round's cells whose bench stopped before its end (the machine was taken back,
    a signal): each with the launches it measured and the launches its spec asked for."""
    planned: int | None = None
    try:
        bench = tomllib.loads(results.spec_text or "").get("bench") or {}
        planned = int(bench["launches"])
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError, AttributeError):
        pass  # no readable spec: the counts say what was measured
    out = []
    for cid in cells:
        found = results.cell(cid)
        phase = found.phase("bench") if found is not None else None
        done = len(launches(cid))
        short = planned is None or done < planned
        if phase is not None and phase.status is Status.INTERRUPTED and short:
            out.append({"cell": cid, "launches": done, "planned": planned})
    return out


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
        "cannot_isolate": _cannot_isolate(derived, rounds),
        "notes": [*derived.notes, *([ctx.note] if ctx.note else [])],
        "revert_cells": sum(len(r["cells"]) for r in rounds),
        "launches": sum(int(r["launches"]) for r in rounds),
        "sentences": [
            # what follows the cause is said before the cost ("It took ...")
            *_before_last(
                sentences(ctx.cell, ctx.baseline, result), _follows_sentences(rounds, ctx.baseline)
            ),
            *_cold_sentences(rounds),
            *_unfinished_sentences(rounds),
        ],
    }


def _followed(rounds: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[str, Any]]]:
    """key -> (what was reverted, the difference as the candidate showed it) for every
    difference that cannot be isolated and that a revert cell brought back."""
    out: dict[str, list[tuple[str, Any]]] = {}
    for meta in rounds:
        for cid, gone in (meta.get("brought_back") or {}).items():
            label = "; ".join(str(c.get("label")) for c in meta["cells"].get(cid) or [])
            for d in gone:
                if all(label != seen for seen, _ in out.get(d["key"], [])):
                    out.setdefault(d["key"], []).append((label, d))
    return out


def _cannot_isolate(derived: Derived, rounds: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    followed = _followed(rounds)
    return [
        {"key": key, "why": why, "follows": [label for label, _ in followed.get(key, [])]}
        for key, why in derived.cannot
    ]


def _before_last(said: list[str], more: list[str]) -> list[str]:
    return [*said[:-1], *more, *said[-1:]]


def _follows_sentences(rounds: Sequence[Mapping[str, Any]], baseline: str) -> list[str]:
    out = []
    for key, found in _followed(rounds).items():
        labels = " and ".join(label for label, _ in found)
        d = found[0][1]
        out.append(
            f"{key} ({d['value']} here) is not a difference of its own: it follows {labels}; "
            f"with that taken back it is {d['baseline']}, as in {baseline}."
        )
    return out


def _status(status: str, rounds: Sequence[Mapping[str, Any]]) -> str:
    """An undecided explanation whose round stopped early says so: the launches that
    never ran, not the noise, are what is missing."""
    cut = [meta for meta in rounds if meta.get("unfinished")]
    if not cut or not status.startswith("not explained"):
        return status
    meta = cut[-1]
    counts = _counts(meta["unfinished"])
    return (
        f"not explained: round {meta['round']} is unfinished ({counts}); "
        "`stackmatrix explain` again finishes it"
    )


def _counts(unfinished: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(
        f"{u['cell']} {u['launches']} of {u['planned']} launches" if u.get("planned")
        else f"{u['cell']} {u['launches']} launches"
        for u in unfinished
    )  # fmt: skip


def _unfinished_sentences(rounds: Sequence[Mapping[str, Any]]) -> list[str]:
    return [
        f"Round {meta['round']} stopped before its end ({_counts(meta['unfinished'])}): "
        "`stackmatrix explain` with the same options resumes it, with a warm-up launch of "
        "each cell it has left to measure; launches of another machine or boot then sit "
        "next to these, so move the round aside to measure it whole on one."
        for meta in rounds
        if meta.get("unfinished")
    ]


def _cold_sentences(rounds: Sequence[Mapping[str, Any]]) -> list[str]:
    out = []
    for meta in rounds:
        cold = meta.get("cold_starts") or []
        if not cold:
            continue
        warm = int(cold[0]["warmup_launches"])
        worst = ", ".join(f"{c['cell']} {c['worse']:.0%}" for c in cold)
        out.append(
            f"Round {meta['round']}: the first measured launch was a cold start in "
            f"{len(cold)} of {len(meta['cells']) + 2} cells ({worst} worse than their other "
            f"launches) after {warm} warm-up launch(es): noise the warm-up did not absorb; "
            f"`stackmatrix explain --warmup-launches {warm + 1}` measures past it."
        )
    return out
