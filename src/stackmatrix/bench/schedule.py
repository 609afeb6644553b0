"""The order in which server launches run.

- interleaved: A1 B1 C1 A2 B2 C2 ... so drift over time (clocks, temperature,
  other tenants) spreads over all cells instead of biasing the last one;
- sequential: A1 A2 A3 B1 ... for when switching cells is expensive;
- random: blocks of one launch per cell, the cells shuffled inside each block
  with a recorded seed (a randomised block design: still balanced in time);
- balanced (the default): blocks of one launch per cell whose orders follow a
  Williams design: over every n cycles (2n for an odd number n of cells) each cell
  takes each position in the cycle equally often, and follows each other cell
  equally often; which cell plays which part of the design, and the order of the
  design's rows within each set of cycles, are drawn from the recorded seed. On the
  H200, a fixed order (the baseline always first) turned a position effect into a
  +3.8% "difference" between two identical cells; a balanced order makes it cancel
  in the paired analysis (stats/verdict.py). When cells stop early (adaptive launches)
  the design of the full set no longer balances the cells that continue, so with a
  baseline named the order of each cycle is the one that keeps every candidate's
  count of running before and after the baseline closest to even, counting the cycles
  already run (`balance`); the Williams row breaks ties.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

from stackmatrix import _nofollow
from stackmatrix.errors import Unreadable
from stackmatrix.jsontypes import JSONObject
from stackmatrix.spec_names import ORDERS

log = logging.getLogger(__name__)

Slot = tuple[str, int]  # (cell id, launch index, 1-based)


def schedule(
    pending: Mapping[str, Sequence[int]],
    cell_order: Sequence[str],
    order: str,
    seed: int = 0,
    *,
    baseline: str | None = None,
    balance: Mapping[str, int] | None = None,
) -> list[Slot]:
    """All pending (cell, launch) slots in the order they should run. For the balanced
    order, `balance` holds each candidate's cycles run before the baseline less those
    run after it, in the cycles already run."""
    cells = [c for c in cell_order if pending.get(c)]
    if order == "sequential":
        return [(c, k) for c in cells for k in pending[c]]
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; use one of {', '.join(ORDERS)}")
    rng = random.Random(seed)
    by_cycle: dict[int, list[str]] = {}
    for c in cells:  # launch k of every cell belongs to cycle k
        for k in pending[c]:
            by_cycle.setdefault(k, []).append(c)
    slots: list[Slot] = []
    net = dict(balance or {})
    for k in sorted(by_cycle):
        block = by_cycle[k]
        if order == "random":
            rng.shuffle(block)
        elif order == "balanced":
            block = balanced_cycle(block, k, seed)
            if baseline in block:
                block = evened(block, baseline, net)
                _count(block, baseline, net)
        slots.extend((c, k) for c in block)
    return slots


MAX_EVENED = 6  # cells in a cycle whose orders are all tried (6! = 720)


def evened(preferred: Sequence[str], baseline: str, net: Mapping[str, int]) -> list[str]:
    """The order of one cycle that leaves the candidates' before/after counts against
    the baseline closest to even; `preferred` (the design's row) when it does as well."""
    if len(preferred) > MAX_EVENED or len(preferred) < 2:
        return list(preferred)

    def cost(order: Sequence[str]) -> int:
        at = order.index(baseline)
        return sum(
            abs(net.get(c, 0) + (1 if i < at else -1)) for i, c in enumerate(order) if c != baseline
        )

    best = min(itertools.permutations(preferred), key=cost)
    return list(preferred) if cost(preferred) <= cost(best) else list(best)


def _count(block: Sequence[str], baseline: str, net: dict[str, int]) -> None:
    at = block.index(baseline)
    for i, c in enumerate(block):
        if c != baseline:
            net[c] = net.get(c, 0) + (1 if i < at else -1)


def williams(n: int) -> list[list[int]]:
    """A Williams design for n treatments: n rows (2n for odd n), each a permutation of
    range(n); every treatment takes every position equally often, and every ordered
    pair of treatments is adjacent equally often (first-order carry-over balanced)."""
    if n <= 1:
        return [[0] * n]
    first, low, high = [0], 1, n - 1
    while len(first) < n:  # 0, 1, n-1, 2, n-2, ...
        first.append(low)
        low += 1
        if len(first) < n:
            first.append(high)
            high -= 1
    rows = [[(x + i) % n for x in first] for i in range(n)]
    return rows if n % 2 == 0 else rows + [row[::-1] for row in rows]


def balanced_cycle(cells: Sequence[str], cycle: int, seed: int) -> list[str]:
    """The order of `cells` in cycle `cycle` (1-based) of a balanced design: a row of a
    Williams square, the rows of each set of cycles shuffled and the cells assigned to
    the design's treatments by the seed. A function of (cells, cycle, seed) alone, so a
    resumed or extended run continues the same design."""
    rows = williams(len(cells))
    key = "|".join(cells)
    assign = list(cells)
    random.Random(f"{seed}:{key}:cells").shuffle(assign)
    turn, at = divmod(cycle - 1, len(rows))
    order = list(range(len(rows)))
    random.Random(f"{seed}:{key}:rows:{turn}").shuffle(order)
    return [assign[t] for t in rows[order[at]]]


def earlier_sessions(path: Path) -> list[JSONObject]:
    """The plans recorded in a results directory's schedule file, one per session that
    ran launches (a file of before sessions were recorded is one session); none for a
    missing file, and none, with a warning, for one that is not a schedule or is a link
    (it is replaced, never followed)."""
    if not os.path.lexists(path):
        return []
    try:
        old = _nofollow.read_json(path)
    except (Unreadable, OSError) as exc:
        log.warning("replacing %s: %s", path, exc)
        return []
    if isinstance(old, dict):
        sessions = old.get("sessions")
        if isinstance(sessions, list) and all(isinstance(s, dict) for s in sessions):
            return sessions
        if isinstance(old.get("slots"), list):
            return [{k: old[k] for k in ("order", "order_seed", "slots") if k in old}]
    log.warning("replacing %s: not a schedule", path)
    return []
