"""Which reverted group recovers the gap: halving, so n differences cost ~log2(n) rounds.

A round measures, next to new launches of the baseline and the candidate, one cell per
group (the candidate with that group's differences taken back to the baseline). The
group that recovers the change is split again until one difference (or an inseparable
group) is left. Decisions use the report's own statistics (stats.compare).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from stackmatrix.jsontypes import JSONObject, JSONValue
from stackmatrix.stats.verdict import Comparison, Thresholds, Verdict, compare
from stackmatrix.verdict_registry import traits

T = TypeVar("T")
Launches = list[list[float]]


class Outcome(enum.StrEnum):
    EXPLAINS = "explains"  # with it reverted, the candidate is no different from the baseline
    PARTIAL = "partial"  # it moves the candidate, but a difference remains
    NO_EFFECT = "no effect"  # reverting it changes nothing measurable
    UNDECIDED = "undecided"  # too noisy to say
    NOT_RUN = "not run"  # the revert cell did not build, was incompatible or never served


@dataclass(frozen=True, kw_only=True)
class Effect(Generic[T]):
    group: tuple[T, ...]
    outcome: Outcome
    vs_baseline: Comparison | None
    vs_candidate: Comparison | None
    recovered: float | None  # share of the candidate's gap this revert recovers
    why: str = ""  # NOT_RUN: what stopped the revert cell

    def to_dict(self, describe: Callable[[T], JSONValue]) -> JSONObject:
        return {
            "group": [describe(g) for g in self.group],
            "outcome": self.outcome.value,
            "vs_baseline": self.vs_baseline.to_dict() if self.vs_baseline else None,
            "vs_candidate": self.vs_candidate.to_dict() if self.vs_candidate else None,
            "recovered": self.recovered,
            "why": self.why,
        }


@dataclass(frozen=True, kw_only=True)
class RoundData:
    baseline: Launches
    candidate: Launches
    groups: list[Launches]  # one per group, in the order asked
    not_run: list[str] = field(default_factory=list)  # per group: why it has no launches


@dataclass(kw_only=True)
class SearchResult(Generic[T]):
    gap: Comparison | None = None  # the candidate against the baseline (last round)
    rounds: list[list[Effect[T]]] = field(default_factory=list)
    cause: Effect[T] | None = None
    status: str = ""  # "explained", "partly explained", "not explained: ...", ...


def classify(
    group: tuple[T, ...],
    data: Launches,
    rd: RoundData,
    metric: str,
    th: Thresholds,
    why_not: str = "",
) -> Effect[T]:
    if not any(data):
        outcome = Outcome.NOT_RUN if why_not else Outcome.UNDECIDED
        return Effect(
            group=group,
            outcome=outcome,
            vs_baseline=None,
            vs_candidate=None,
            recovered=None,
            why=why_not,
        )
    vs_base = compare(data, rd.baseline, metric=metric, thresholds=th)
    vs_cand = compare(data, rd.candidate, metric=metric, thresholds=th)
    gap = compare(rd.candidate, rd.baseline, metric=metric, thresholds=th)
    recovered = None
    if gap.ratio is not None and vs_base.ratio is not None and abs(gap.ratio - 1) > 1e-12:
        recovered = (vs_base.ratio - gap.ratio) / (1 - gap.ratio)
    moved = traits(vs_cand.verdict).difference
    # "explains" and "no effect" need equivalence, not an interval that merely
    # contains no change (noisier data would otherwise explain more)
    same_as_base = vs_base.verdict is Verdict.EQUIVALENT
    if moved and same_as_base:
        outcome = Outcome.EXPLAINS
    elif moved:
        outcome = Outcome.PARTIAL
    elif vs_cand.verdict is Verdict.EQUIVALENT:
        outcome = Outcome.NO_EFFECT
    else:
        outcome = Outcome.UNDECIDED
    return Effect(
        group=group, outcome=outcome, vs_baseline=vs_base, vs_candidate=vs_cand, recovered=recovered
    )


def split(items: Sequence[T]) -> list[tuple[T, ...]]:
    """Singles for up to three items (one round of three cells, where halving would take
    two rounds of two); else two halves (the first the larger)."""
    if len(items) <= 3:
        return [(x,) for x in items]
    mid = (len(items) + 1) // 2
    return [tuple(items[:mid]), tuple(items[mid:])]


def search(
    items: Sequence[T],
    measure: Callable[[list[tuple[T, ...]]], RoundData],
    *,
    metric: str,
    thresholds: Thresholds,
    max_rounds: int = 8,
) -> SearchResult[T]:
    """Halve the set of differences until the one that recovers the gap is alone."""
    result: SearchResult[T] = SearchResult()
    current = list(items)
    if not current:
        result.status = "not explained: no difference can be reverted"
        return result
    for _ in range(max_rounds):
        groups = split(current)
        rd = measure(groups)
        result.gap = compare(rd.candidate, rd.baseline, metric=metric, thresholds=thresholds)
        why = rd.not_run or [""] * len(groups)
        effects = [
            classify(g, d, rd, metric, thresholds, w)
            for g, d, w in zip(groups, rd.groups, why, strict=True)
        ]
        result.rounds.append(effects)
        best = _best(effects)
        if best is None:
            if _worth_a_combination(effects, rounds_left=max_rounds - len(result.rounds)):
                _combination(current, measure, result, metric, thresholds)
                if result.cause is not None and result.cause.outcome is Outcome.EXPLAINS:
                    _narrow(result, measure, metric, thresholds, max_rounds - len(result.rounds))
                return result
            result.status = _none_recovers(effects)
            return result
        if len(best.group) == 1:
            result.cause = best
            result.status = "explained" if best.outcome is Outcome.EXPLAINS else "partly explained"
            return result
        current = list(best.group)
    result.status = f"not explained within {max_rounds} rounds"
    return result


def _worth_a_combination(effects: Sequence[Effect[T]], *, rounds_left: int) -> bool:
    """Halves that each change nothing, measured clearly: the cause may need differences
    from both halves at once (an interaction), which one more cell tells."""
    clear = all(e.outcome is Outcome.NO_EFFECT for e in effects)
    return clear and len(effects) > 1 and rounds_left > 0


def _combination(
    current: Sequence[T],
    measure: Callable[[list[tuple[T, ...]]], RoundData],
    result: SearchResult[T],
    metric: str,
    thresholds: Thresholds,
) -> None:
    """One round with every remaining difference reverted together."""
    together = tuple(current)
    rd = measure([together])
    result.gap = compare(rd.candidate, rd.baseline, metric=metric, thresholds=thresholds)
    effect = classify(together, rd.groups[0], rd, metric, thresholds, (rd.not_run or [""])[0])
    result.rounds.append([effect])
    if effect.outcome in (Outcome.EXPLAINS, Outcome.PARTIAL):
        result.cause = effect
        how = "explained" if effect.outcome is Outcome.EXPLAINS else "partly explained"
        result.status = (
            f"{how} by a combination: no half recovers the change alone, all of them "
            "reverted together do (an interaction between differences)"
        )
    elif effect.outcome is Outcome.NO_EFFECT:
        result.status = (
            "not explained: no group recovers the change, and reverting every known "
            "difference together does not either (a cause outside the known differences)"
        )
    else:
        result.status = _none_recovers([effect])


def _narrow(
    result: SearchResult[T],
    measure: Callable[[list[tuple[T, ...]]], RoundData],
    metric: str,
    thresholds: Thresholds,
    rounds_left: int,
) -> None:
    """Shrink an explaining combination to the differences it needs: each round reverts
    the combination without one of its parts; a part whose absence still explains the
    change is not needed. Parts start as quarters and get finer (delta debugging). When
    several parts go at once, the smaller set is measured again in the next round (next
    to its own parts) before it is believed; the last set measured to explain stands."""
    assert result.cause is not None
    known = result.cause  # measured: reverting its group explains the change
    current, verified, n = list(known.group), True, min(len(known.group), 4)
    while (len(current) > 2 or not verified) and rounds_left > 0:
        # a pair left unverified is only measured: its halves are single differences
        parts = _chunks(current, n) if len(current) > 2 else []
        asked = [tuple(x for x in current if x not in p) for p in parts]
        if not verified:
            asked.insert(0, tuple(current))
        rd = measure(asked)
        rounds_left -= 1
        why = rd.not_run or [""] * len(asked)
        effects = [
            classify(g, d, rd, metric, thresholds, w)
            for g, d, w in zip(asked, rd.groups, why, strict=True)
        ]
        result.rounds.append(effects)
        if not verified:
            if effects[0].outcome is not Outcome.EXPLAINS:
                break  # the parts were not independent: the last verified set stands
            known, effects = effects[0], effects[1:]
        unneeded = [p for p, e in zip(parts, effects, strict=True) if e.outcome is Outcome.EXPLAINS]
        if len(unneeded) == 1:
            current = [x for x in current if x not in unneeded[0]]
            known, verified = effects[parts.index(unneeded[0])], True
        elif unneeded and len(unneeded) < len(parts):
            gone = {x for p in unneeded for x in p}
            current, verified = [x for x in current if x not in gone], False
        elif parts and n < len(current):
            n = min(2 * n, len(current))
            continue
        else:
            break
        n = max(min(n, len(current)), 1)
    _set_narrowed(result, known)


def _chunks(items: Sequence[T], n: int) -> list[tuple[T, ...]]:
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(tuple(items[start:end]))
        start = end
    return out


def _set_narrowed(result: SearchResult[T], known: Effect[T]) -> None:
    assert result.cause is not None
    whole = len(result.cause.group)
    result.cause = known
    if len(known.group) < whole:
        result.status = (
            f"explained by a combination of {len(known.group)} of {whole} differences: no "
            "half recovers the change alone, these together do (an interaction between "
            "differences); the others are not needed"
        )


def _best(effects: Sequence[Effect[T]]) -> Effect[T] | None:
    moving = [e for e in effects if e.outcome in (Outcome.EXPLAINS, Outcome.PARTIAL)]
    if not moving:
        return None
    return max(moving, key=lambda e: (e.outcome is Outcome.EXPLAINS, e.recovered or 0.0))


def _none_recovers(effects: Sequence[Effect[T]]) -> str:
    stopped = [e.why for e in effects if e.outcome is Outcome.NOT_RUN]
    if stopped:
        return f"not explained: {len(stopped)} revert cell(s) could not be measured ({stopped[0]})"
    if any(e.outcome is Outcome.UNDECIDED for e in effects):
        return "not explained: too much noise to decide (see the launches each revert needs)"
    if len(effects) > 1:
        return (
            "not explained: no group recovers the change alone (an interaction of "
            "differences in different groups, or a cause outside the known differences)"
        )
    return "not explained: reverting it has no measurable effect"
