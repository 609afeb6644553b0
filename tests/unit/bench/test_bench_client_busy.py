"""A client that used more than half a core in a round long enough to tell gets a
finding, never only a number."""

from __future__ import annotations

from pathlib import Path

from stackmatrix.bench import _cell, _launch
from stackmatrix.bench.client import RoundOutcome
from stackmatrix.jsontypes import JSONObject, JSONValue
from stackmatrix.records import LaunchRecord
from stackmatrix.results import CellDir, PhaseRun


def _state(
    tmp_path: Path, rounds: list[tuple[float, float]], point: bool = False
) -> _cell.CellState:
    """A cell whose one launch had rounds of (client_cpu_share, duration_s)."""
    recs: list[JSONValue] = [
        {"metrics": {"client_cpu_share": c, "duration_s": d}} for c, d in rounds
    ]
    launch: JSONObject = {"status": "ok", "rounds": [] if point else recs}
    if point:
        launch["points"] = {"c32": {"rounds": recs}}
    cell_dir = CellDir(tmp_path, "a")
    run = PhaseRun.begin(cell_dir, "bench", "h")
    return _cell.CellState(
        cell_id="a",
        cell_dir=cell_dir,
        run=run,
        environment=None,
        launches=[LaunchRecord.from_dict(launch)],
    )


def test_a_busy_client_is_a_finding(tmp_path: Path) -> None:
    (found,) = _cell.busy_client(_state(tmp_path, [(0.2, 30.0), (0.73, 30.0)]))
    assert found.code == "SM-BENCH-CLIENT-BUSY" and found.severity.value == "warn"
    assert "73% of a core" in found.message and found.details["client_cpu_share_max"] == 0.73


def test_a_load_points_rounds_count_too(tmp_path: Path) -> None:
    assert _cell.busy_client(_state(tmp_path, [(0.9, 10.0)], point=True))


def test_a_calm_client_or_a_short_round_is_not(tmp_path: Path) -> None:
    assert _cell.busy_client(_state(tmp_path, [(0.3, 30.0), (0.5, 30.0)])) == []
    # a 0.2 s round is mostly the loop's and the connections' fixed cost
    assert _cell.busy_client(_state(tmp_path, [(0.95, 0.2)])) == []


def test_a_busy_worker_is_named_among_calm_ones(tmp_path: Path) -> None:
    """With worker processes the busiest one counts: the others' calm hides nothing."""
    st = _state(tmp_path, [(0.8, 30.0)])
    st.launches[0].rounds[0].extra["client_cpu_shares"] = [0.1, 0.8, 0.2]
    (found,) = _cell.busy_client(st)
    assert found.message.startswith("worker 2 of the benchmark client's 3 used 80% of a core")
    assert found.details["client_cpu_shares"] == [0.1, 0.8, 0.2]
    assert "bench.client_workers" in found.message


def test_each_workers_share_is_kept_and_the_busiest_is_the_figure() -> None:
    outcome = RoundOutcome(
        records=[], duration_s=10.0, t0=0.0, cpu_s=9.0, worker_cpu_s=(2.0, 6.0, 1.0)
    )
    figures: dict[str, float | None] = {}
    entry = _launch.client_cpu(outcome, figures)
    assert figures["client_cpu_share"] == 0.6
    assert entry == {"client_workers": 3, "client_cpu_shares": [0.2, 0.6, 0.1]}
    in_process = RoundOutcome(records=[], duration_s=10.0, t0=0.0, cpu_s=3.0)
    assert _launch.client_cpu(in_process, figures) == {}
    assert figures["client_cpu_share"] == 0.3
