"""Where each measured launch ran in the whole run, for the launches-in-time-order plot."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from stackmatrix.report.matrix import CellReport, LaunchRow

BY_SEQUENCE = "slot in the run's schedule (warm-ups take slots too)"
BY_START = "launch order by start time"


@dataclass(frozen=True, kw_only=True)
class Placed:
    cell: str
    launch: LaunchRow
    position: int


def placed_launches(cells: Sequence[CellReport]) -> tuple[tuple[Placed, ...], str]:
    """Every measured launch with its position, and what the position means.

    Positions are the schedule's slots when every launch has its own; otherwise (a
    launch without one, or a resumed run whose second schedule counts its slots from 1
    again) all of them come from start times, since slots and ranks mixed on one axis
    would order nothing."""
    launches = [(c.id, launch) for c in cells for launch in c.launches]
    slots = [launch.sequence for _, launch in launches]
    if launches and all(slots) and len(set(slots)) == len(slots):
        return tuple(_placed(cid, ln, ln.sequence or 0) for cid, ln in launches), BY_SEQUENCE
    order = {c.id: i for i, c in enumerate(cells)}
    ranked = sorted(launches, key=lambda item: (*_start_key(item[1]), order[item[0]]))
    return tuple(_placed(cid, ln, i) for i, (cid, ln) in enumerate(ranked, 1)), BY_START


def _placed(cell: str, launch: LaunchRow, position: int) -> Placed:
    return Placed(cell=cell, launch=launch, position=position)


def _start_key(launch: LaunchRow) -> tuple[int, float, int]:
    """Launches with a readable start time first, by it; the rest after, in file order."""
    try:
        started = datetime.fromisoformat(launch.started or "")
    except ValueError:
        return 1, 0.0, launch.index
    # a time without a zone is read as local time, as the machine that wrote it would
    return 0, started.timestamp(), launch.index
