"""The order in which server launches run (issue 7: interleave cells in time).

- interleaved: A1 B1 C1 A2 B2 C2 ... so drift over time (clocks, temperature,
  other tenants) spreads over all cells instead of biasing the last one;
- sequential: A1 A2 A3 B1 ... for when switching cells is expensive;
- random: blocks of one launch per cell, the cells shuffled inside each block
  with a recorded seed (a randomised block design: still balanced in time).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

Slot = tuple[str, int]  # (cell id, launch index, 1-based)


def schedule(
    pending: Mapping[str, Sequence[int]], cell_order: Sequence[str], order: str, seed: int = 0
) -> list[Slot]:
    """All pending (cell, launch) slots in the order they should run."""
    cells = [c for c in cell_order if pending.get(c)]
    if order == "sequential":
        return [(c, k) for c in cells for k in pending[c]]
    if order not in ("interleaved", "random"):
        raise ValueError(f"unknown order {order!r}; use interleaved, sequential or random")
    rng = random.Random(seed)
    depth = max((len(pending[c]) for c in cells), default=0)
    slots: list[Slot] = []
    for level in range(depth):
        block = [(c, pending[c][level]) for c in cells if level < len(pending[c])]
        if order == "random":
            rng.shuffle(block)
        slots.extend(block)
    return slots
