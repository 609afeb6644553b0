"""Simulated adaptive runs with noise shaped like the H200's, to measure a verdict
design's error rates and cost: a log-normal launch effect, a cold first launch on the
host, a drift over time shared by the cells (and optionally one of a cell alone), an
effect of the launch's position in its cycle and an occasional cold launch.

A run here follows what the bench phase does: cycles ordered by bench/schedule.py,
looks after every cycle from `low` with the report's `compare`, the undecided cells
(with the baseline) continuing until `high`. Two designs: today's (`NEW`: error
spending, TOST, a host warm-up launch, the order evened for continuing cells, a
position term from 6 pairs) and the earlier one (`OLD`: alpha / looks at every look,
equivalence from the 95% interval, no warm-up, a position term from 4 pairs)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from stackmatrix.bench.schedule import schedule
from stackmatrix.stats.verdict import Spending, Thresholds, Verdict, compare


@dataclass(frozen=True)
class Noise:
    launch_sd: float = 0.005  # launch to launch (log scale): 0.2-1% on the H200
    host_cold: tuple[float, float] = (0.08, 0.15)  # the host's first launch: 12% on the H200
    drift_per_cycle: float = -0.002  # shared by the cells
    cell_drift: float = 0.0  # the candidate's own, on top
    first_in_cycle: float = 0.005  # the first launch of a cycle runs this much slower
    cold_rate: float = 0.02  # any other launch that pays for a cold start
    cold_slow: tuple[float, float] = (0.15, 0.30)


H200 = Noise()


@dataclass(frozen=True)
class Design:
    name: str
    spending: Spending
    position_from: int | None
    host_warmup: bool
    evened: bool


NEW = Design("error spending + TOST", "pocock", None, True, True)
OLD = Design("alpha / looks", "bonferroni", 4, False, False)


@dataclass(frozen=True)
class Outcome:
    verdicts: dict[str, Verdict]
    launches: dict[str, int]  # measured launches per cell
    cost: int  # every launch run, warm-ups included


def run(
    rng: random.Random,
    changes: Sequence[float],
    *,
    low: int = 3,
    high: int = 8,
    noise: Noise = H200,
    design: Design = NEW,
    margin: float = 0.02,
) -> Outcome:
    """One adaptive run of a baseline and one candidate per entry of `changes` (the
    candidates' true relative changes)."""
    cells = ["base", *(f"c{i}" for i in range(len(changes)))]
    truth = {"base": 1.0, **{f"c{i}": 1.0 + ch for i, ch in enumerate(changes)}}
    values: dict[str, list[list[float]]] = {c: [] for c in cells}
    starts: dict[str, list[int | None]] = {c: [] for c in cells}
    th = Thresholds(
        min_effect=margin,
        plan=(low, high),
        spending=design.spending,
        position_from=design.position_from,
    )
    seed, clock, cost = rng.randrange(2**31), 0, 0
    cold = design.host_warmup is False  # the warm-up launch takes the cold start
    cost += 1 if design.host_warmup else 0
    active, verdicts = list(cells), dict.fromkeys(cells[1:], Verdict.INCONCLUSIVE)
    for cycle in range(1, high + 1):
        balance = _balance(starts) if design.evened else None
        order = schedule(
            {c: [cycle] for c in active},
            cells,
            "balanced",
            seed,
            baseline="base" if design.evened else None,
            balance=balance,
        )
        for position, (cid, _) in enumerate(order):
            clock += 1
            cost += 1
            value = _launch(rng, truth[cid], cycle, position, cid, noise, cold)
            cold = False
            values[cid].append([value])
            starts[cid].append(clock)
        if cycle < low:
            continue
        for cid in active[1:]:
            slots = (starts[cid], starts["base"])
            verdicts[cid] = compare(
                values[cid], values["base"], metric="decode_tok_s", thresholds=th, slots=slots
            ).verdict
        undecided = [c for c in active[1:] if not verdicts[c].decided]
        if not undecided:
            break
        active = ["base", *undecided]
    return Outcome(verdicts=verdicts, launches={c: len(v) for c, v in values.items()}, cost=cost)


def _balance(starts: dict[str, list[int | None]]) -> dict[str, int]:
    base = starts["base"]
    return {
        cid: sum(1 if s < b else -1 for s, b in zip(ss, base, strict=False) if s and b)
        for cid, ss in starts.items()
        if cid != "base"
    }


def _launch(
    rng: random.Random,
    true: float,
    cycle: int,
    position: int,
    cid: str,
    noise: Noise,
    cold: bool,
) -> float:
    log_value = math.log(true) + rng.gauss(0.0, noise.launch_sd)
    log_value += noise.drift_per_cycle * cycle
    if cid != "base":
        log_value += noise.cell_drift * cycle
    if position == 0:
        log_value -= noise.first_in_cycle
    if cold:
        log_value += math.log1p(-rng.uniform(*noise.host_cold))
    elif rng.random() < noise.cold_rate:
        log_value += math.log1p(-rng.uniform(*noise.cold_slow))
    return math.exp(log_value)


@dataclass(frozen=True)
class Rates:
    runs: int
    called_a_change: float  # faster or slower
    equivalent: float
    right: float  # the verdict that matches the truth's sign (for a change)
    median_launches: float  # the candidate's measured launches
    cost_per_decided: float  # launches run (warm-ups included) per decided verdict


def rates(
    change: float,
    *,
    runs: int = 400,
    seed: int = 1,
    design: Design = NEW,
    noise: Noise = H200,
    low: int = 3,
    high: int = 8,
) -> Rates:
    """The verdicts of `runs` simulated runs of one candidate with a true `change`."""
    rng = random.Random(seed)
    outcomes = [
        run(rng, [change], low=low, high=high, noise=noise, design=design) for _ in range(runs)
    ]
    verdicts = [o.verdicts["c0"] for o in outcomes]
    want = Verdict.FASTER if change > 0 else Verdict.SLOWER
    decided = sum(v.decided for v in verdicts)
    launches = sorted(o.launches["c0"] for o in outcomes)
    return Rates(
        runs=runs,
        called_a_change=sum(v in (Verdict.FASTER, Verdict.SLOWER) for v in verdicts) / runs,
        equivalent=sum(v is Verdict.EQUIVALENT for v in verdicts) / runs,
        right=sum(v is want for v in verdicts) / runs,
        median_launches=float(launches[len(launches) // 2]),
        cost_per_decided=sum(o.cost for o in outcomes) / max(decided, 1),
    )
