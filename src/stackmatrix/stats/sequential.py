"""The group-sequential design behind adaptive verdicts: how much of the error rate
each look at the verdict may spend.

A run with `launches = {min, max}` looks at its verdict after every cycle from `min` to
`max` (bench/adaptive.py). Looking often and stopping at the first look that decides
raises the error rate unless each look is held to a stricter level. Splitting alpha
evenly over the looks (Bonferroni) keeps the rate but wastes it: the looks see nested
data, so their tests are strongly correlated and the union bound is far from tight.

Here the looks spend alpha by a Lan-DeMets error-spending function of the information
fraction t = n / max (n: the pairs seen), and each look's nominal level is the one
whose crossing probability, given no earlier crossing, is exactly the alpha spent
since the last look. That probability is computed for the Brownian motion the
standardized mean follows (independent increments; Jennison and Turnbull, ch. 7), by
numerical integration over a grid, then applied to each look's t statistic at its own
degrees of freedom. The spending function is Pocock's, alpha * ln(1 + (e - 1) t): it
spends early, where the data of a quiet GPU already decide, which is where launches
are saved. Its error rates and expected launches, against the even split, are measured
by simulation (tests/unit/stats/test_sequential_rates.py,
benchmarks/bench_sequential.py).

Two tests use it, each at the report's alpha:
* the difference: two-sided, "faster" or "slower" when the look's interval excludes
  no change;
* equivalence: two one-sided tests (TOST) against +-min_effect, each one-sided at
  alpha, i.e. the look's (1 - 2 alpha_k) interval lies within the margin.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from statistics import NormalDist

_N = NormalDist()
_GRID = 121  # points per look's continuation region (Simpson's rule: odd)


def spent(t: float, alpha: float) -> float:
    """Pocock-type spending: the alpha spent by information fraction t (0..1)."""
    t = min(max(t, 0.0), 1.0)
    return alpha * math.log1p((math.e - 1.0) * t)


def nominal_alpha(n: int, low: int, high: int, alpha: float, *, sides: int = 2) -> float:
    """The level of the look at `n` pairs of a plan that looks at low, low + 1, ..., high
    pairs: `alpha` for a fixed plan (one look), less for each look of an adaptive one.
    `sides` = 2 for a two-sided test at `alpha`, 1 for a one-sided one (TOST's halves)."""
    if high <= low or n <= 0:
        return alpha
    first = min(low, n)
    looks = tuple(range(max(1, first), min(n, high) + 1))
    fractions = tuple(k / high for k in looks)
    return _nominal(fractions, alpha, sides)[-1]


@functools.lru_cache(maxsize=256)
def _nominal(fractions: tuple[float, ...], alpha: float, sides: int) -> tuple[float, ...]:
    """Per-look nominal levels for looks at these information fractions."""
    bounds = boundaries(fractions, alpha, sides=sides)
    tail = 2.0 if sides == 2 else 1.0
    return tuple(tail * (1.0 - _N.cdf(z)) for z in bounds)


def boundaries(fractions: Sequence[float], alpha: float, *, sides: int = 2) -> list[float]:
    """z boundaries c_k: the test at look k rejects when |Z_k| >= c_k (Z_k >= c_k for a
    one-sided test), where P(no crossing before k, crossing at k) = spent(t_k) -
    spent(t_{k-1}) under no effect."""
    out: list[float] = []
    grid: list[float] = []
    density: list[float] = []
    last_t, last_spent = 0.0, 0.0
    for t in fractions:
        goal = spent(t, alpha) - last_spent
        if not out:
            z = _N.inv_cdf(1.0 - goal / sides)
            out.append(z)
            grid, density = _first_density(z, t, sides)
        else:
            step = t - last_t
            z = _solve(grid, density, step, t, goal, sides)
            out.append(z)
            grid, density = _next_density(grid, density, step, z, t, sides)
        last_t, last_spent = t, spent(t, alpha)
    return out


def _region(z: float, t: float, sides: int) -> tuple[float, float]:
    """The continuation region of the sum S (variance t) at a boundary z."""
    top = z * math.sqrt(t)
    bottom = -top if sides == 2 else -8.0 * math.sqrt(t)
    return bottom, top


def _points(bottom: float, top: float) -> tuple[list[float], list[float]]:
    h = (top - bottom) / (_GRID - 1)
    xs = [bottom + i * h for i in range(_GRID)]
    ws = [h / 3 * (1 if i in (0, _GRID - 1) else 4 if i % 2 else 2) for i in range(_GRID)]
    return xs, ws


def _first_density(z: float, t: float, sides: int) -> tuple[list[float], list[float]]:
    xs, ws = _points(*_region(z, t, sides))
    sd = math.sqrt(t)
    return xs, [w * _N.pdf(x / sd) / sd for x, w in zip(xs, ws, strict=True)]


def _next_density(
    grid: Sequence[float], mass: Sequence[float], step: float, z: float, t: float, sides: int
) -> tuple[list[float], list[float]]:
    xs, ws = _points(*_region(z, t, sides))
    sd = math.sqrt(step)
    out = []
    for x, w in zip(xs, ws, strict=True):
        out.append(w * sum(m * _N.pdf((x - s) / sd) for s, m in zip(grid, mass, strict=True)) / sd)
    return xs, out


def _crossing(
    grid: Sequence[float], mass: Sequence[float], step: float, top: float, sides: int
) -> float:
    sd = math.sqrt(step)
    total = 0.0
    for s, m in zip(grid, mass, strict=True):
        p = 1.0 - _N.cdf((top - s) / sd)
        if sides == 2:
            p += _N.cdf((-top - s) / sd)
        total += m * p
    return total


def _solve(
    grid: Sequence[float], mass: Sequence[float], step: float, t: float, goal: float, sides: int
) -> float:
    """The z whose crossing probability at this look equals `goal` (bisection)."""
    low, high = 0.0, 8.0
    for _ in range(48):
        mid = (low + high) / 2
        if _crossing(grid, mass, step, mid * math.sqrt(t), sides) > goal:
            low = mid
        else:
            high = mid
    return (low + high) / 2
