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
from collections.abc import Callable, Sequence
from pathlib import Path

from stackmatrix import _atomic, _nofollow, layout
from stackmatrix._secrets import redact_spec_text
from stackmatrix.errors import StackmatrixError, Unreadable, UsageError
from stackmatrix.explain.context import ExplainContext, prepare
from stackmatrix.explain.derive import Change
from stackmatrix.explain.explanation import Round, Unfinished, explanation, status, stopped
from stackmatrix.explain.roundspec import derived_spec, group_id
from stackmatrix.explain.search import RoundData, search
from stackmatrix.report.config_drift import Difference
from stackmatrix.report.load import RunResults, load_run
from stackmatrix.report.matrix import MatrixReport
from stackmatrix.report.model import ColdStart, build_model, cold_first_launches
from stackmatrix.results import PHASES, Status
from stackmatrix.spec_model import Spec
from stackmatrix.specfile.write import dumps

log = logging.getLogger(__name__)
EXPLANATION_FILE = layout.EXPLANATION_JSON


class KeptRound(UsageError):
    """A kept round that this explain would measure over (another round spec)."""


# (the round's spec, written at its path; output dir) -> runs that round; the CLI passes
# the pipeline
RoundRunner = Callable[[Spec, Path], None]


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
    ctx = dataclasses.replace(ctx, warmup=warmup, warmup_launches=warmup_launches, rejudge=rejudge)
    out = _explain_dir(run_dir, cell)
    rounds: list[Round] = []

    cannot = [key for key, _ in derived.cannot]

    def measure(groups: list[tuple[Change, ...]]) -> RoundData:
        return _round(ctx, out, len(rounds) + 1, groups, rounds, run_round, cannot)

    path = out / EXPLANATION_FILE
    try:
        result = search(
            list(derived.changes),
            measure,
            metric=ctx.metric,
            thresholds=ctx.thresholds,
            max_rounds=max_rounds,
        )
    except KeptRound:
        raise  # nothing was measured: the explanation of the kept rounds stands
    except (StackmatrixError, Unreadable) as exc:
        # said in the report, not only in a traceback; the rounds done stay for a re-run
        _atomic.write_json(path, stopped(ctx, derived, rounds, exc))
        raise
    result.status = status(result.status, rounds)
    _atomic.write_json(path, explanation(ctx, derived, result, rounds))
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


# --- one round -----------------------------------------------------------------------


def _round(
    ctx: ExplainContext,
    out: Path,
    k: int,
    groups: list[tuple[Change, ...]],
    rounds: list[Round],
    run_round: RoundRunner,
    cannot: Sequence[str],
) -> RoundData:
    ids = [group_id(ctx.cell, k, i, g) for i, g in enumerate(groups)]
    round_dir = out / layout.explain_round(k)
    if ctx.rejudge:
        _kept_round(round_dir, ids)
    else:
        spec_path = out / layout.explain_round_spec(k)
        spec = derived_spec(ctx, k, groups, ids, spec_path)
        text = dumps(spec)  # for the round's run, its reports and the people reading them
        _refuse_other_round(round_dir, text)
        _atomic.write_text(spec_path, text)  # replaces the file, never writes through it
        log.info("explain %s: round %d, %d revert cell(s)", ctx.cell, k, len(groups))
        try:
            run_round(spec, round_dir)
        finally:  # the round needed its credentials; the results keep none
            _atomic.write_text(spec_path, redact_spec_text(text))
    results = load_run(round_dir)

    def launches(cid: str) -> list[list[float]]:
        found = results.cell(cid)
        return found.launches(ctx.metric) if found is not None else []

    every = [ctx.baseline, ctx.cell, *ids]
    model = build_model(results)
    measured_ids = [cid for cid in ids if launches(cid)]
    rounds.append(
        Round(
            round=k,
            dir=round_dir.name,
            cells=dict(zip(ids, groups, strict=True)),
            launches=sum(len(launches(c)) for c in every),
            cold_starts=_cold_starts(model, ctx.metric),
            unfinished=_unfinished(results, every, launches),
            brought_back=_brought_back(model, ctx.cell, measured_ids, cannot),
        )
    )
    return RoundData(
        baseline=launches(ctx.baseline),
        candidate=launches(ctx.cell),
        groups=[launches(cid) for cid in ids],
        not_run=["" if launches(cid) else _not_run(results, cid) for cid in ids],
    )


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
        what = (
            f"no {layout.RUN_JSON}"
            if not (round_dir / layout.RUN_JSON).is_file()
            else (f"no cell {', '.join(missing)}")
        )
        raise UsageError(
            f"--rejudge: {round_dir} was not measured ({what}): run `stackmatrix explain` "
            "without --rejudge to measure it"
        )


def _cold_starts(model: MatrixReport, metric: str) -> tuple[ColdStart, ...]:
    """The round's cells whose first measured launch was a cold start: noise that the
    round's warm-up launches did not absorb (revert cells are configurations the machine
    has not served before, so their kernels compile in their first launch)."""
    return tuple(cold_first_launches(model.cells, metric))


def _brought_back(
    model: MatrixReport, candidate: str, reverts: Sequence[str], cannot: Sequence[str]
) -> dict[str, tuple[Difference, ...]]:
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
    out: dict[str, tuple[Difference, ...]] = {}
    for cid in reverts:
        mine = differences(cid)
        if mine is None:
            continue
        gone = tuple(shown[key] for key in cannot if key in shown and key not in mine)
        if gone:
            out[cid] = gone
    return out


def _unfinished(
    results: RunResults, cells: Sequence[str], launches: Callable[[str], list[list[float]]]
) -> tuple[Unfinished, ...]:
    """The round's cells whose bench stopped before its end (the machine was taken back,
    a signal): each with the launches it measured and the launches its spec asked for."""
    planned = _planned(results.spec_text)
    out = []
    for cid in cells:
        found = results.cell(cid)
        phase = found.phase("bench") if found is not None else None
        done = len(launches(cid))
        short = planned is None or done < planned
        if phase is not None and phase.status is Status.INTERRUPTED and short:
            out.append(Unfinished(cell=cid, launches=done, planned=planned))
    return tuple(out)


def _planned(spec_text: str | None) -> int | None:
    """The launches per cell the round's spec (the results' copy) asks for; None when it
    is not readable or its launches are adaptive: the counts then say what was measured."""
    try:
        bench = tomllib.loads(spec_text or "").get("bench")
    except tomllib.TOMLDecodeError:
        return None
    launches = bench.get("launches") if isinstance(bench, dict) else None
    return launches if isinstance(launches, int) and not isinstance(launches, bool) else None


def _not_run(results: RunResults, cid: str) -> str:
    """Why a revert cell has no launches: its first phase that did not end ok (a bench
    skipped because the check found it incompatible says so in its message)."""
    found = results.cell(cid)
    if found is None:
        return f"{cid} is missing from the round's results"
    for name in PHASES:
        phase = found.phase(name)
        if phase is None:
            return f"{cid}: no {name} result"
        if phase.status is not Status.OK:
            why = phase.message or phase.code or ""
            return f"{cid}: {name} {phase.status.value}" + (f" ({why})" if why else "")
    return f"{cid}: no launch ran to the end"
