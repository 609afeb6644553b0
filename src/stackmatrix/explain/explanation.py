"""RUN/explain/<cell>/explanation.json: what each round measured (`Round`), the search's
result, and the sentences the report shows; or, for an explain that stopped, what was
done before it did."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stackmatrix.explain.context import ExplainContext
from stackmatrix.explain.derive import Change, Derived
from stackmatrix.explain.search import Effect, SearchResult
from stackmatrix.explain.text import sentences, slo_sentence
from stackmatrix.jsontypes import JSONObject, JSONValue
from stackmatrix.report.config_drift import Difference
from stackmatrix.report.model import ColdStart

SCHEMA_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class Unfinished:
    """A cell whose bench stopped before its end (the machine was taken back, a signal)."""

    cell: str
    launches: int  # measured
    planned: int | None  # asked for by the round's spec (None: not readable)

    def to_dict(self) -> JSONObject:
        return {"cell": self.cell, "launches": self.launches, "planned": self.planned}


@dataclass(frozen=True, kw_only=True)
class Round:
    """What one round measured, as explanation.json keeps it (next to its effects)."""

    round: int
    dir: str  # round-<k>, under explain/<cell>/
    cells: Mapping[str, tuple[Change, ...]]  # revert cell -> the changes it reverts
    launches: int  # measured, every cell of the round
    # revert cell -> the differences that cannot be isolated which it brought back
    brought_back: Mapping[str, tuple[Difference, ...]]
    cold_starts: tuple[ColdStart, ...] = ()
    unfinished: tuple[Unfinished, ...] = ()

    def to_dict(self) -> JSONObject:
        return {
            "round": self.round,
            "dir": self.dir,
            "cells": {cid: [c.to_dict() for c in group] for cid, group in self.cells.items()},
            "launches": self.launches,
            "cold_starts": [_cold(c) for c in self.cold_starts],
            "unfinished": [u.to_dict() for u in self.unfinished],
            "brought_back": {
                cid: [{"key": d.key, "value": d.value, "baseline": d.baseline} for d in gone]
                for cid, gone in self.brought_back.items()
            },
        }


def _cold(c: ColdStart) -> JSONObject:
    return {
        "cell": c.cell,
        "label": c.label,
        "first": c.first,
        "median": c.median,
        "warmup_launches": c.warmup_launches,
        "worse": c.worse,
    }


def stopped(
    ctx: ExplainContext, derived: Derived, rounds: Sequence[Round], exc: Exception
) -> JSONObject:
    k = len(rounds) + 1
    return {
        "schema_version": SCHEMA_VERSION,
        "cell": ctx.cell,
        "baseline": ctx.baseline,
        "metric": ctx.metric,
        "status": f"failed in round {k}: {exc}",
        "gap": None,
        "cause": None,
        "rounds": [{**r.to_dict(), "effects": []} for r in rounds],
        "cannot_isolate": _cannot_isolate(derived, rounds),
        "notes": list(derived.notes),
        "revert_cells": sum(len(r.cells) for r in rounds),
        "launches": sum(r.launches for r in rounds),
        "sentences": [
            f"{ctx.cell}: explain stopped in round {k} ({exc}); the rounds done are kept "
            f"under explain/{ctx.cell}/ and `stackmatrix explain` again resumes them."
        ],
    }


def explanation(
    ctx: ExplainContext, derived: Derived, result: SearchResult[Change], rounds: Sequence[Round]
) -> JSONObject:
    def describe(c: Change) -> JSONValue:
        return c.to_dict()

    def effects(found: Sequence[Effect[Change]]) -> JSONValue:
        return [e.to_dict(describe) for e in found]

    return {
        "schema_version": SCHEMA_VERSION,
        "cell": ctx.cell,
        "baseline": ctx.baseline,
        "metric": ctx.metric,
        "status": result.status,
        "gap": result.gap.to_dict() if result.gap else None,
        "cause": result.cause.to_dict(describe) if result.cause else None,
        "rounds": [
            {**meta.to_dict(), "effects": effects(found)}
            for meta, found in zip(rounds, result.rounds, strict=True)
        ],
        "cannot_isolate": _cannot_isolate(derived, rounds),
        "notes": [*derived.notes, *([ctx.note] if ctx.note else [])],
        "revert_cells": sum(len(r.cells) for r in rounds),
        "launches": sum(r.launches for r in rounds),
        "sentences": [
            # what follows the cause is said before the cost ("It took ...")
            *_before_last(
                sentences(ctx.cell, ctx.baseline, result), _follows_sentences(rounds, ctx.baseline)
            ),
            *_cold_sentences(rounds),
            *_unfinished_sentences(rounds),
            *[said for said in [slo_sentence(ctx.spec.report.slo, ctx.metric)] if said],
        ],
    }


def _followed(rounds: Sequence[Round]) -> dict[str, list[tuple[str, Difference]]]:
    """key -> (what was reverted, the difference as the candidate showed it) for every
    difference that cannot be isolated and that a revert cell brought back."""
    out: dict[str, list[tuple[str, Difference]]] = {}
    for meta in rounds:
        for cid, gone in meta.brought_back.items():
            label = "; ".join(c.label for c in meta.cells.get(cid) or ())
            for d in gone:
                if all(label != seen for seen, _ in out.get(d.key, [])):
                    out.setdefault(d.key, []).append((label, d))
    return out


def _cannot_isolate(derived: Derived, rounds: Sequence[Round]) -> JSONValue:
    followed = _followed(rounds)
    return [
        {"key": key, "why": why, "follows": [label for label, _ in followed.get(key, [])]}
        for key, why in derived.cannot
    ]


def _before_last(said: list[str], more: list[str]) -> list[str]:
    return [*said[:-1], *more, *said[-1:]]


def _follows_sentences(rounds: Sequence[Round], baseline: str) -> list[str]:
    out = []
    for key, found in _followed(rounds).items():
        labels = " and ".join(label for label, _ in found)
        d = found[0][1]
        out.append(
            f"{key} ({d.value} here) is not a difference of its own: it follows {labels}; "
            f"with that taken back it is {d.baseline}, as in {baseline}."
        )
    return out


def status(found: str, rounds: Sequence[Round]) -> str:
    """An undecided explanation whose round stopped early says so: the launches that
    never ran, not the noise, are what is missing."""
    cut = [meta for meta in rounds if meta.unfinished]
    if not cut or not found.startswith("not explained"):
        return found
    meta = cut[-1]
    counts = _counts(meta.unfinished)
    return (
        f"not explained: round {meta.round} is unfinished ({counts}); "
        "`stackmatrix explain` again finishes it"
    )


def _counts(unfinished: Sequence[Unfinished]) -> str:
    return ", ".join(
        f"{u.cell} {u.launches} of {u.planned} launches"
        if u.planned
        else f"{u.cell} {u.launches} launches"
        for u in unfinished
    )


def _unfinished_sentences(rounds: Sequence[Round]) -> list[str]:
    return [
        f"Round {meta.round} stopped before its end ({_counts(meta.unfinished)}): "
        "`stackmatrix explain` with the same options resumes it, with a warm-up launch of "
        "each cell it has left to measure; launches of another machine or boot then sit "
        "next to these, so move the round aside to measure it whole on one."
        for meta in rounds
        if meta.unfinished
    ]


def _cold_sentences(rounds: Sequence[Round]) -> list[str]:
    out = []
    for meta in rounds:
        cold = meta.cold_starts
        if not cold:
            continue
        warm = cold[0].warmup_launches
        worst = ", ".join(f"{c.cell} {c.worse:.0%}" for c in cold)
        out.append(
            f"Round {meta.round}: the first measured launch was a cold start in "
            f"{len(cold)} of {len(meta.cells) + 2} cells ({worst} worse than their other "
            f"launches) after {warm} warm-up launch(es): noise the warm-up did not absorb; "
            f"`stackmatrix explain --warmup-launches {warm + 1}` measures past it."
        )
    return out
