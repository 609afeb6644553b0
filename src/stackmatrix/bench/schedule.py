"""The order in which server launches run (issue 7: interleave cells in time).

- interleaved: A1 B1 C1 A2 B2 C2 ... so drift over time (clocks, temperature,
  other tenants) spreads over all cells instead of biasing the last one;
- sequential: A1 A2 A3 B1 ... for when switching cells is expensive;
- random: blocks of one launch per cell, the cells shuffled inside each block
  with a recorded seed (a randomised block design: still balanced in time).
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from stackmatrix import _nofollow
from stackmatrix.errors import ResultsError

log = logging.getLogger(__name__)

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


def earlier_sessions(path: Path) -> list[dict[str, Any]]:
    """The plans recorded in a results directory's schedule file, one per session that
    ran launches (a file of before sessions were recorded is one session); none for a
    missing file, and none, with a warning, for one that is not a schedule or is a link
    (it is replaced, never followed)."""
    if not os.path.lexists(path):
        return []
    try:
        old = _nofollow.read_json(path)
    except (ResultsError, OSError) as exc:
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
