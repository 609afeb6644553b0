"""The halving search on simulated cells with seeded noise."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from stackmatrix.explain.search import Outcome, RoundData, search, split
from stackmatrix.stats.verdict import Thresholds

TH = Thresholds(min_effect=0.02)
# launch noise of the simulated cells: "explains" and "no effect" need equivalence
# within min_effect, which 5 launches show at this noise (SGLang on the H200 repeats a
# launch within 0.1-0.5% when its decode is steady)
NOISE = 0.004


def _simulate(
    effects: dict[str, float], noise: float, launches: int, rng: random.Random
) -> Callable[[list[tuple[str, ...]]], RoundData]:
    """measure() for cells whose speed is 100 x the product of the kept differences."""

    def speed(kept: set[str]) -> list[list[float]]:
        base = 100.0 * math.prod(effects[k] for k in kept)
        return [[base * math.exp(rng.gauss(0.0, noise))] for _ in range(launches)]

    def measure(groups: list[tuple[str, ...]]) -> RoundData:
        every = set(effects)
        return RoundData(
            baseline=speed(set()),
            candidate=speed(every),
            groups=[speed(every - set(g)) for g in groups],
        )

    return measure


def test_split_halves_and_singles() -> None:
    assert split(["a"]) == [("a",)]
    assert split(["a", "b"]) == [("a",), ("b",)]
    assert split(["a", "b", "c"]) == [("a",), ("b",), ("c",)]
    assert split(["a", "b", "c", "d"]) == [("a", "b"), ("c", "d")]
    assert split(["a", "b", "c", "d", "e"]) == [("a", "b", "c"), ("d", "e")]


def test_one_cause_among_eight_is_found_95_percent_of_the_time_at_0_4_percent_noise() -> None:
    names = [f"d{i}" for i in range(8)]
    found = 0
    rounds: list[int] = []
    for seed in range(100):
        rng = random.Random(seed)
        cause = rng.choice(names)
        effects = {n: (0.94 if n == cause else 1.0) for n in names}
        result = search(
            names, _simulate(effects, NOISE, 5, rng), metric="output_throughput", thresholds=TH
        )
        rounds.append(len(result.rounds))
        if result.cause is not None and result.cause.group == (cause,):
            found += 1
            assert result.cause.outcome is Outcome.EXPLAINS
    assert found >= 95
    assert max(rounds) <= 3  # 8 -> 4 -> 2 -> 1: log2(8) rounds


def test_no_cause_among_the_differences_is_said_not_guessed() -> None:
    rng = random.Random(7)
    effects = {"a": 1.0, "b": 1.0, "c": 1.0}

    def measure(groups: list[tuple[str, ...]]) -> RoundData:
        # the candidate is 6% slower for a reason none of the differences holds
        def cell(f: float) -> list[list[float]]:
            return [[100.0 * f * math.exp(rng.gauss(0, NOISE))] for _ in range(5)]

        return RoundData(
            baseline=cell(1.0), candidate=cell(0.94), groups=[cell(0.94) for _ in groups]
        )

    result = search(list(effects), measure, metric="output_throughput", thresholds=TH)
    assert result.cause is None
    assert result.status.startswith("not explained: no group recovers the change, and ")
    assert "a cause outside the known differences" in result.status
    assert all(e.outcome is Outcome.NO_EFFECT for e in result.rounds[0])
    # the last round reverted every difference together, and that changed nothing either
    (together,) = result.rounds[1]
    assert together.group == ("a", "b", "c") and together.outcome is Outcome.NO_EFFECT


def _redundant_causes(
    every: set[str], rng: random.Random
) -> Callable[[list[tuple[str, ...]]], RoundData]:
    return _either_of(every, every, rng)  # any one difference left keeps the slowdown


def test_an_interaction_across_the_halves_is_found_as_a_combination() -> None:
    """Differences that each cost the same 6% on their own (two switches that each take
    the engine off its fast path): reverting one half leaves the other half's, so no
    half recovers the change; reverting all of them together does."""
    found = 0
    for seed in range(50):
        measure = _redundant_causes({"a", "b", "c", "d"}, random.Random(seed))
        result = search(["a", "b", "c", "d"], measure, metric="output_throughput", thresholds=TH)
        if result.cause is not None and result.cause.group == ("a", "b", "c", "d"):
            found += 1
            assert result.status.startswith("explained by a combination")
    assert found >= 45


def test_nothing_to_revert() -> None:
    nothing: list[str] = []
    result = search(
        nothing,
        lambda g: RoundData(baseline=[], candidate=[], groups=[]),
        metric="output_throughput",
        thresholds=TH,
    )
    assert result.status == "not explained: no difference can be reverted"


def test_a_revert_cell_that_did_not_run_is_said_not_called_noise() -> None:
    rng = random.Random(3)

    def cell(f: float) -> list[list[float]]:
        return [[100.0 * f * math.exp(rng.gauss(0, NOISE))] for _ in range(5)]

    def measure(groups: list[tuple[str, ...]]) -> RoundData:
        why = "b~a=1: build failed (uv could not resolve the pins)"
        return RoundData(
            baseline=cell(1.0), candidate=cell(0.8), groups=[[], cell(0.8)], not_run=[why, ""]
        )

    result = search(["a", "b"], measure, metric="output_throughput", thresholds=TH)
    first, second = result.rounds[0]
    assert first.outcome is Outcome.NOT_RUN and "build failed" in first.why
    assert second.outcome is Outcome.NO_EFFECT
    assert result.status == (
        "not explained: 1 revert cell(s) could not be measured "
        "(b~a=1: build failed (uv could not resolve the pins))"
    )


def _either_of(
    causes: set[str], every: set[str], rng: random.Random
) -> Callable[[list[tuple[str, ...]]], RoundData]:
    """Cells 6% slower while any difference of `causes` is kept; the others are free."""

    def speed(kept: set[str]) -> list[list[float]]:
        f = 0.94 if kept & causes else 1.0
        return [[100.0 * f * math.exp(rng.gauss(0, NOISE))] for _ in range(5)]

    def measure(groups: list[tuple[str, ...]]) -> RoundData:
        return RoundData(
            baseline=speed(set()),
            candidate=speed(every),
            groups=[speed(every - set(g)) for g in groups],
        )

    return measure


def test_a_combination_is_narrowed_to_the_differences_it_needs() -> None:
    """Two switches among eight differences, each enough to take the engine off its
    fast path: no half recovers the change, all eight together do, and the narrowing
    rounds find the pair."""
    names = [f"d{i}" for i in range(8)]
    found = 0
    rounds: list[int] = []
    for seed in range(40):
        rng = random.Random(seed)
        pair = set(rng.sample(names[:4], 1) + rng.sample(names[4:], 1))  # one per half
        result = search(
            names, _either_of(pair, set(names), rng), metric="output_throughput", thresholds=TH
        )
        rounds.append(len(result.rounds))
        if result.cause is not None and set(result.cause.group) == pair:
            found += 1
            assert result.cause.outcome is Outcome.EXPLAINS
            assert result.status.startswith("explained by a combination of 2 of 8 differences")
    assert found >= 38
    # halves, all together, quarters left out, then singles left out of the four left
    # (the set measured again next to them), then the pair measured alone: 13 cells
    assert max(rounds) <= 5


def test_narrowing_stops_at_the_round_cap_with_the_last_set_that_explained() -> None:
    names = [f"d{i}" for i in range(8)]
    rng = random.Random(3)
    result = search(
        names,
        _either_of({"d1", "d6"}, set(names), rng),
        metric="output_throughput",
        thresholds=TH,
        max_rounds=3,
    )
    assert len(result.rounds) == 3
    assert result.cause is not None and result.cause.outcome is Outcome.EXPLAINS
    assert {"d1", "d6"} <= set(result.cause.group)  # measured to explain, maybe not minimal
