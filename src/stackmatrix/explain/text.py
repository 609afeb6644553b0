"""The explanation in plain words, with intervals (for matrix.md, matrix.json, CI)."""

from __future__ import annotations

from collections.abc import Sequence

from stackmatrix.explain.derive import Change
from stackmatrix.explain.search import Effect, Outcome, SearchResult
from stackmatrix.report.fmt import metric_label, ratio_text
from stackmatrix.spec_model import SloBound
from stackmatrix.verdict_registry import traits


def sentences(cell: str, baseline: str, result: SearchResult[Change]) -> list[str]:
    out = []
    gap = ratio_text(result.gap) if result.gap else "—"
    cause = result.cause
    if cause is not None:
        out.append(_cause_sentence(cell, baseline, gap, cause))
        if "combination" in result.status:
            out.append(
                "Only together: reverting a smaller group of them recovered nothing "
                "measurable (an interaction between these differences)."
            )
    else:
        out.append(f"{cell}'s {gap} against {baseline} is {result.status}.")
    for effects in result.rounds:
        for effect in effects:
            if effect is cause:
                continue
            out.append(_effect_sentence(effect))
    rounds = len(result.rounds)
    cells = sum(len(r) for r in result.rounds)
    out.append(f"It took {rounds} round(s) and {cells} revert cell(s).")
    return out


def _names(effect: Effect[Change]) -> str:
    return "; ".join(c.label for c in effect.group)


def _cause_sentence(cell: str, baseline: str, gap: str, cause: Effect[Change]) -> str:
    vs_base = ratio_text(cause.vs_baseline)
    share = f"{cause.recovered:.0%}" if cause.recovered is not None else "part"
    if cause.outcome is Outcome.EXPLAINS:
        return (
            f"{cell}'s {gap} against {baseline} is explained by {_names(cause)}: with it "
            f"taken back, {cell} is equivalent to {baseline} ({vs_base}; {share} of "
            "the gap recovered)."
        )
    base = cause.vs_baseline
    if base is not None and traits(base.verdict).difference:
        rest = f"{cell} still differs from {baseline} ({vs_base})"
    else:  # equivalence to the baseline is not shown: an open question, not a difference
        rest = (
            f"whether {cell} then matches {baseline} is not shown ({vs_base}, "
            f"{base.verdict.value if base else 'not measured'})"
        )
    return (
        f"{cell}'s {gap} against {baseline} is partly explained by {_names(cause)}: with "
        f"it taken back, {share} of the gap is recovered and {rest}."
    )


def _effect_sentence(effect: Effect[Change]) -> str:
    moved = ratio_text(effect.vs_candidate)
    match effect.outcome:
        case Outcome.NO_EFFECT:
            return (
                f"{_names(effect)}: no effect, equivalent to the candidate within "
                f"min_effect ({moved})."
            )
        case Outcome.UNDECIDED:
            return _undecided_sentence(effect, moved)
        case Outcome.NOT_RUN:
            return f"{_names(effect)}: could not be measured: {effect.why}."
        case _:
            return f"{_names(effect)}: moves it {moved} ({effect.outcome.value})."


def _undecided_sentence(effect: Effect[Change], moved: str) -> str:
    """Too noisy, or too few launches for an interval at all (a round cut short): the
    medians are then all there is, said as such."""
    base, cand = effect.vs_baseline, effect.vs_candidate
    if cand is None or cand.low is not None or base is None:
        return f"{_names(effect)}: undecided, too noisy ({moved})."
    medians = ""
    if base.ratio_of_medians is not None and cand.ratio_of_medians is not None:
        medians = (
            f"; medians only: {base.ratio_of_medians:.3f}x the baseline's, "
            f"{cand.ratio_of_medians:.3f}x the candidate's"
        )
    return f"{_names(effect)}: undecided, too few launches for an interval{medians}."


def slo_sentence(bounds: Sequence[SloBound], metric: str) -> str | None:
    """Where the run judges an SLO: that the rounds do not. A round's spec has no load
    points and no SLO (the round spec is what a kept round is resumed by, and an SLO
    re-measures nothing), and the search decides on the headline metric alone."""
    if not bounds:
        return None
    slo = ", ".join(f"{b.key} = {b.ms:g}" for b in bounds)
    return (
        f"The run's SLO ({slo}) is not judged in these rounds: each is judged on "
        f"{metric_label(metric)} at the headline load only, with no load points and no "
        "goodput, so this explains the headline's verdict, not the SLO's."
    )
