"""The typed records read every bench.json and run.json stackmatrix wrote, old or new,
and give back what they read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stackmatrix import _nofollow
from stackmatrix.findings import Finding, Severity
from stackmatrix.jsontypes import JSONObject
from stackmatrix.records import (
    BenchData,
    BuildData,
    CheckData,
    LaunchRecord,
    PlanCell,
    RoundRecord,
    RunRecord,
    check_verdict,
)
from stackmatrix.records.decode import plain
from stackmatrix.records.phases import data_problem
from stackmatrix.results import PhaseResult, Status

EXAMPLES = Path(__file__).resolve().parents[2] / "reports" / "examples"


def _results(phase: str) -> list[Path]:
    """Every kept `<phase>.json`, as written or compressed (`<phase>.json.gz`)."""
    return sorted(EXAMPLES.glob(f"**/cells/*/{phase}.json*"))


BENCH_FILES = _results("bench")
RUN_FILES = sorted(EXAMPLES.glob("**/run.json"))
PLAN_FILES = sorted(EXAMPLES.glob("**/plan.json"))
PHASE_FILES = _results("build") + _results("check")


def _load(path: Path) -> Any:
    return _nofollow.read_json(path)  # decompressed when it is a .gz


def test_the_examples_are_there() -> None:
    assert len(BENCH_FILES) >= 10 and len(RUN_FILES) >= 5 and len(PLAN_FILES) >= 5


@pytest.mark.parametrize("path", PLAN_FILES, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_every_example_plan_json_round_trips(path: Path) -> None:
    cells = _load(path)["cells"]
    planned = [PlanCell.from_dict(c) for c in cells]
    assert [c.to_dict() for c in planned] == cells
    assert sum(bool(c.baseline) for c in planned) == 1


@pytest.mark.parametrize("path", BENCH_FILES, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_every_example_bench_json_round_trips(path: Path) -> None:
    data = _load(path)["data"]
    assert BenchData.from_dict(data).to_dict() == data


@pytest.mark.parametrize("path", PHASE_FILES, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_every_example_build_and_check_json_round_trips(path: Path) -> None:
    data = _load(path)["data"]
    record = BuildData if path.name.startswith("build.json") else CheckData
    assert record.from_dict(data).to_dict() == data


def test_build_and_check_data_read_what_the_report_needs() -> None:
    build = BuildData.from_dict(
        {"environment": {"prefix": "/e"}, "lock": [{"name": "torch"}, 3], "lock_digest": None}
    )
    assert build.environment == {"prefix": "/e"} and build.lock == ({"name": "torch"},)
    assert build.lock_digest is None and BuildData.from_dict({}).lock is None
    check = CheckData.from_dict({"verdict": "compatible", "timing": {"static_scan": "hit"}})
    assert check.verdict == "compatible" and check.timing == {"static_scan": "hit"}
    assert check.probe is None and check.target_summary is None


@pytest.mark.parametrize("path", RUN_FILES, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_every_example_run_json_round_trips(path: Path) -> None:
    raw = _load(path)
    record = RunRecord.from_dict(raw)
    assert record.to_dict() == {k: v for k, v in raw.items() if k != "schema_version"}
    assert record.cells and record.baseline in record.cells


def test_a_launch_reads_its_rounds_and_load_points() -> None:
    launch = LaunchRecord.from_dict(
        {
            "index": 2,
            "rounds": [
                {"index": 1, "metrics": {"tok_s": 70}},
                {"index": 2, "metrics": {"tok_s": None}},
            ],
            "points": {"c32": {"rounds": [{"metrics": {"tok_s": 500.5}}]}},
        }
    )
    assert launch.ok and launch.index == 2
    assert launch.values("tok_s") == [70.0]
    assert launch.values("tok_s", point="c32") == [500.5]
    assert launch.values("tok_s", point="c64") == []


def test_a_launch_is_written_with_its_keys_in_the_order_bench_json_has() -> None:
    """bench/ writes launches through `to_dict`: a failed one (teardown null, as when no
    server started) comes back key for key and in the same order."""
    raw: JSONObject = {
        "index": 1,
        "sequence": 3,
        "started": "t0",
        "env_facts": {"before": {}, "after": {}},
        "status": "failed",
        "rounds": [
            {
                "index": 1,
                "metrics": {},
                "requests_file": "r",
                "warmup_errors": 0,
                "client_workers": 2,
                "client_cpu_shares": [0.1, 0.2],
            }
        ],
        "launch_argv": ["serve"],
        "points": {"c4": {"rounds": [], "summary": {}}},
        "code": "server_failed",
        "message": "died",
        "teardown": None,
        "finished": "t1",
        "summary": {},
        "effective_config": {"k": 1},
    }
    written = LaunchRecord.from_dict(raw).to_dict()
    assert json.dumps(written) == json.dumps(raw)


def test_old_and_odd_launches_read_with_defaults() -> None:
    """A warm-up launch is indexed "W1"; an old one may lack status and rounds; a
    failed launch keeps the rounds it finished but is no sample of a verdict."""
    bench = BenchData.from_dict(
        {
            "launches": [
                {"index": 1},
                {"index": 2, "status": "failed", "rounds": [{"metrics": {"tok_s": 1.0}}]},
                {"index": 3, "rounds": [{"metrics": {"tok_s": 2}}]},
            ],
            "warmup_launches": [{"index": "W1", "status": "ok"}],
        }
    )
    assert [x.ok for x in bench.launches] == [True, False, True]
    assert bench.completed_values("tok_s") == [[], [2.0]]
    assert bench.warmup_launches[0].index == "W1"
    assert bench.engine is None and bench.points == {}


def test_values_of_the_wrong_type_stay_out_of_the_typed_fields() -> None:
    record = RoundRecord.from_dict({"index": True, "metrics": [1], "requests_file": 3})
    assert record.index is None and record.metrics == {} and record.requests_file is None
    run = RunRecord.from_dict({"cells": "ab", "report": {"fail_on": "regression"}})
    assert run.cells == () and run.report.fail_on == ()
    launch = LaunchRecord.from_dict({"summary": {"tok_s": 2, "ok": True, "note": "x"}})
    assert launch.summary == {"tok_s": 2}


def test_a_field_value_json_lacks_is_written_as_its_text() -> None:
    """As the results' writer (_atomic.py, default=str) writes it to the file."""
    plan = PlanCell(id="a", definition={"python": "3.11"})
    assert plain((Path("/x"), plan, None)) == ["/x", plan.to_dict(), None]


def test_the_check_verdict_is_its_own_else_a_failing_finding_says_incompatible() -> None:
    def check(data: JSONObject, *severities: Severity) -> PhaseResult:
        findings = [Finding(code="SM-X", severity=s, cell="a", message="m") for s in severities]
        return PhaseResult(
            phase="check", cell="a", status=Status.OK, inputs_hash="", findings=findings, data=data
        )

    assert check_verdict(check({"verdict": "warnings"}, Severity.FAIL)) == "warnings"
    assert check_verdict(check({}, Severity.WARN, Severity.FAIL)) == "incompatible"
    assert check_verdict(check({}, Severity.WARN)) is None


def test_a_launch_span_is_read_in_utc_or_not_at_all() -> None:
    from datetime import UTC, datetime

    from stackmatrix.records import LaunchRecord

    def span(started: str | None, finished: str | None) -> object:
        return LaunchRecord(started=started, finished=finished).span()

    assert span("2026-12-01T10:00:00+01:00", "2026-12-01T09:30:00+00:00") == (
        datetime(2026, 12, 1, 9, 0, tzinfo=UTC),
        datetime(2026, 12, 1, 9, 30, tzinfo=UTC),
    )
    assert span("2026-12-01T10:00:00", "2026-12-01T10:01:00") is None  # no zone
    assert span("2026-12-01T10:01:00+00:00", "2026-12-01T10:00:00+00:00") is None
    assert span("t", "t") is None and span(None, None) is None


def test_a_phase_data_problem_names_the_first_key_that_does_not_fit() -> None:
    """What the report shows for a corrupt phase result: the record's fields, and the
    keys a record keeps in `extra` that must still be a list or an object."""
    assert data_problem("build", {"lock": [None]}) == "data.lock[0] is null"
    assert data_problem("check", {"inventory": 3}) == "data.inventory is int 3, not a list"
    assert data_problem("check", {"probe": {"env": [1]}}) == (
        "data.probe.env is list, not an object"
    )
    assert data_problem("bench", {"launches": [{"rounds": 3}]}) == (
        "data.launches[0].rounds is int 3, not a list"
    )
    assert data_problem("bench", {"server_info": "x"}) == (
        "data.server_info is str 'x', not an object"
    )
    assert data_problem("bench", {"summary": None, "launches": []}) is None
