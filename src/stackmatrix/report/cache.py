"""What the report says of the engine's prefix cache in the measured rounds.

Every round replays the same prompts, so a server that keeps its prefix cache serves
rounds 2.. from it: on the H200, SGLang's median TTFT fell from 88 ms in round 1 to
30 ms in rounds 2-4 and decode ran 3-4% faster (reports/examples/h200-sglang-aa). The
bench empties the cache before each round (`bench.flush_cache`); these notes name the
rounds where that did not happen, and the share of prompt tokens the server says it
served from its cache.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from stackmatrix import engine_registry
from stackmatrix.records import LaunchRecord, RoundRecord
from stackmatrix.report.load import CellResults

NOT_FLUSHED = "not flushed: "
CACHED_SHARE_NOTE = 0.01  # a cached share of prompt tokens worth a note


def cache_notes(cells: Sequence[CellResults]) -> list[str]:
    """A note per cell whose measured rounds ran on a cache that was not emptied, or whose
    server says it served prompt tokens from its cache."""
    out = []
    for cell in cells:
        rounds = [r for launch in cell.bench.launches for r in _rounds(launch)]
        out += _never_flushed(cell, rounds) or _unflushed(cell.id, rounds)
        out += _cached(cell.id, rounds)
    return out


def _rounds(launch: LaunchRecord) -> Iterator[RoundRecord]:
    yield from launch.rounds
    for point in (launch.points or {}).values():
        yield from point.rounds


def _never_flushed(cell: CellResults, rounds: Sequence[RoundRecord]) -> list[str]:
    """Rounds of an engine with a prefix cache that say nothing of it: measured with
    `bench.flush_cache = false`, or by a version without the key."""
    engine = engine_registry.find(cell.bench.engine)
    if engine is None or not engine.prefix_cache or not rounds:
        return []
    if any("prefix_cache" in r.extra for r in rounds):
        return []
    return [
        f"{cell.id}: its rounds were measured without emptying {engine.name}'s prefix cache "
        "(bench.flush_cache off, or results of a version without it): rounds after a "
        "launch's first replay its prompts to a cache that holds them (on an H200, "
        "SGLang's decode speed measured 6% higher so)"
    ]


def _unflushed(cell: str, rounds: Sequence[RoundRecord]) -> list[str]:
    why = [
        state.removeprefix(NOT_FLUSHED)
        for r in rounds
        if isinstance(state := r.extra.get("prefix_cache"), str) and state.startswith(NOT_FLUSHED)
    ]
    if not why:
        return []
    return [
        f"{cell}: the prefix cache was not emptied before {len(why)} of its {len(rounds)} "
        f"measured rounds ({why[0]}): rounds after a launch's first replay its prompts "
        "and may be served from the cache (faster prefill, shorter TTFT)"
    ]


def _cached(cell: str, rounds: Sequence[RoundRecord]) -> list[str]:
    told = [r for r in rounds if r.metric("cached_input_tokens") is not None]
    cached = sum(r.metric("cached_input_tokens") or 0.0 for r in told)
    prompt = sum(r.metric("total_input_tokens") or 0.0 for r in told)
    if not told or prompt <= 0 or cached / prompt < CACHED_SHARE_NOTE:
        return []
    return [
        f"{cell}: the server served {cached / prompt:.0%} of the prompt tokens of "
        f"{len(told)} measured rounds from its prefix cache (usage.prompt_tokens_details)"
    ]
