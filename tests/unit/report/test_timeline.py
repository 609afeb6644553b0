"""Where each launch sits on the launches-in-time-order plot."""

from types import SimpleNamespace
from typing import Any, cast

from stackmatrix.report._timeline import BY_SEQUENCE, BY_START, placed_launches
from stackmatrix.report.matrix import LaunchRow


def _row(index: int, sequence: int | None, started: str) -> LaunchRow:
    return LaunchRow(
        index=index,
        status="ok",
        value=1.0,
        rounds=(1.0,),
        outlier=False,
        env_facts={},
        sequence=sequence,
        started=started,
    )


def _cells(**launches: list[LaunchRow]) -> Any:
    return cast(
        Any, [SimpleNamespace(id=cid, launches=tuple(rows)) for cid, rows in launches.items()]
    )


def _order(placed: tuple[Any, ...]) -> list[tuple[str, int]]:
    return [(p.cell, p.launch.index) for p in sorted(placed, key=lambda p: p.position)]


def test_a_single_schedule_places_launches_by_their_slots() -> None:
    cells = _cells(
        a=[_row(1, 2, "2026-01-01T00:02:00"), _row(2, 3, "2026-01-01T00:01:00")],
        b=[_row(1, 1, "2026-01-01T00:03:00")],
    )
    placed, axis = placed_launches(cells)
    assert axis == BY_SEQUENCE
    assert _order(placed) == [("b", 1), ("a", 1), ("a", 2)]


def test_a_resumed_run_whose_slots_start_again_is_placed_by_start_time() -> None:
    """The second invocation's schedule counts from 1 again: slot 1 twice would put a
    launch of the resumed part before the first part's."""
    day = "2026-01-01T"
    cells = _cells(
        a=[_row(1, 1, f"{day}00:00:00"), _row(2, 1, f"{day}01:00:00")],
        b=[_row(1, 2, f"{day}00:01:00"), _row(2, 2, f"{day}01:01:00")],
    )
    placed, axis = placed_launches(cells)
    assert axis == BY_START
    assert _order(placed) == [("a", 1), ("b", 1), ("a", 2), ("b", 2)]
