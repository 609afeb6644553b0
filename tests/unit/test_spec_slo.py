"""[report] slo: strict checks with the key path and the value, the one reader shared
by the spec, run.json and `report --slo`, and no effect on what defines a cell."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from stackmatrix.bench import phase
from stackmatrix.built_environment import Environment
from stackmatrix.errors import SpecError, Unreadable, UsageError
from stackmatrix.plan import make_plan
from stackmatrix.records import RunRecord
from stackmatrix.records.run import read_run_json
from stackmatrix.results import RunDir
from stackmatrix.spec_model import SloBound
from stackmatrix.specfile import parse_spec
from stackmatrix.specfile.report import parse_slo_args

ENV = Environment(backend="venv", python=("/nowhere/python",))


def _raw(report: dict[str, Any] | None = None) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "m",
        "baseline": "a",
        "cell": [{"id": "a"}, {"id": "b", "pins": ["six==1.16.0"]}],
        "bench": {"engine": "transformers", "model": "/m"},
    }
    if report is not None:
        raw["report"] = report
    return raw


def _problems(slo: object) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(_raw({"slo": slo}))
    assert info.value.exit_code == 2
    return info.value.problems


def test_an_slo_is_read_into_bounds_in_a_fixed_order() -> None:
    spec = parse_spec(_raw({"slo": {"tpot_p99_ms": 50, "ttft_p99_ms": 2000, "e2e_p50_ms": 9.5}}))
    assert spec.report.slo == (
        SloBound(kind="ttft", percentile=99, ms=2000.0),
        SloBound(kind="tpot", percentile=99, ms=50.0),
        SloBound(kind="e2e", percentile=50, ms=9.5),
    )
    assert [b.key for b in spec.report.slo] == ["ttft_p99_ms", "tpot_p99_ms", "e2e_p50_ms"]
    assert parse_spec(_raw()).report.slo == ()


def test_every_bad_bound_is_reported_at_once_with_its_key_path() -> None:
    found = _problems(
        {
            "ttft_p95_ms": 10,
            "tpot_p99_ms": -1,
            "itl_p50_ms": math.nan,
            "e2e_p90_ms": math.inf,
            "ttft_p99_ms": "2s",
            "tpot_p90_ms": True,
            "e2e_p99_ms": 0,
        }
    )
    text = "\n".join(found)
    assert "report.slo.ttft_p95_ms: unknown key 'ttft_p95_ms'; did you mean" in text
    assert "report.slo.tpot_p99_ms: -1 ms is no bound: a latency bound is above 0 ms" in text
    assert "report.slo.e2e_p99_ms: 0 ms is no bound" in text
    assert "report.slo.itl_p50_ms: nan is not a finite number of milliseconds" in text
    assert "report.slo.e2e_p90_ms: inf is not a finite number of milliseconds" in text
    assert "report.slo.ttft_p99_ms: expected a number of milliseconds, got a string '2s'" in text
    assert "report.slo.tpot_p90_ms: expected a number of milliseconds, got a boolean True" in text
    assert len(found) == 7


def test_an_slo_that_is_no_table_or_an_empty_one_is_refused() -> None:
    assert _problems(2000) == [
        "report.slo: expected a table such as { ttft_p99_ms = 2000, tpot_p99_ms = 50 }, "
        "got an integer 2000"
    ]
    assert _problems({}) == [
        "report.slo: an empty table sets no bound: name at least one, as in "
        "{ ttft_p99_ms = 2000, tpot_p99_ms = 50 }"
    ]


def test_fail_on_at_the_slo_needs_an_slo_in_the_spec() -> None:
    policy = {"fail_on": ["regression", "goodput-regression", "slo-load-regression"]}
    with pytest.raises(SpecError) as info:
        parse_spec(_raw(policy))
    assert info.value.problems == [
        f"report.fail_on[{i}]: {name!r} judges cells at the SLO, and [report] sets none: add "
        f"slo = {{ ttft_p99_ms = 2000, tpot_p99_ms = 50 }} or leave {name!r} out"
        for i, name in ((1, "goodput-regression"), (2, "slo-load-regression"))
    ]
    spec = parse_spec(_raw({**policy, "slo": {"ttft_p99_ms": 2000}}))
    assert spec.report.fail_on == tuple(policy["fail_on"])


def test_a_misspelt_report_key_suggests_slo() -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(_raw({"sol": {"ttft_p99_ms": 1}}))
    assert info.value.problems == ["report.sol: unknown key 'sol'; did you mean 'slo'?"]


def test_the_slo_changes_no_cell_s_content_hash_nor_its_bench_inputs() -> None:
    """It is report-only: adding or changing it re-measures nothing."""
    plain = parse_spec(_raw())
    judged = parse_spec(_raw({"slo": {"ttft_p99_ms": 100, "tpot_p99_ms": 10}}))
    assert [c.content_hash for c in make_plan(plain)] == [c.content_hash for c in make_plan(judged)]
    assert plain.bench is not None and judged.bench is not None
    for cid in ("a", "b"):
        assert phase.inputs_hash(plain, plain.bench, cid, ENV, "w") == phase.inputs_hash(
            judged, judged.bench, cid, ENV, "w"
        )


def test_report_slo_arguments_are_checked_as_the_spec_s() -> None:
    assert parse_slo_args(["ttft_p99_ms=2000,tpot_p99_ms=50", "itl_p90_ms = 12"]) == (
        SloBound(kind="ttft", percentile=99, ms=2000.0),
        SloBound(kind="tpot", percentile=99, ms=50.0),
        SloBound(kind="itl", percentile=90, ms=12.0),
    )
    with pytest.raises(UsageError) as info:
        parse_slo_args(["ttft_p99=2000", "tpot_p99_ms=fast"])
    message = info.value.message
    assert "--slo.ttft_p99: unknown key 'ttft_p99'; did you mean 'ttft_p99_ms'?" in message
    assert "--slo.tpot_p99_ms: expected a number of milliseconds, got a string 'fast'" in message


def _run_json(tmp_path: Path, report: dict[str, Any]) -> RunDir:
    run = RunDir(tmp_path)
    record = RunRecord(spec_name="m", baseline="a", cells=("a",), created="2026-01-01T00:00:00Z")
    data = record.to_dict()
    data["report"] = report
    (tmp_path / "run.json").write_text(json.dumps({"schema_version": 1, **data}))
    return run


def test_run_json_keeps_the_slo_and_refuses_one_no_spec_could_have(tmp_path: Path) -> None:
    run = _run_json(tmp_path, {"headline": "output_throughput", "slo": {"ttft_p99_ms": 150}})
    assert RunRecord.read(run).report.slo == {"ttft_p99_ms": 150}
    back = RunRecord.from_dict(RunRecord.read(run).to_dict())
    assert back.report.slo == {"ttft_p99_ms": 150}
    assert "slo" not in dataclasses.replace(back.report, slo=None).to_dict()
    bad = _run_json(tmp_path, {"slo": {"ttft_p99_ms": -5}})
    with pytest.raises(Unreadable) as info:
        read_run_json(bad)
    assert "report.slo.ttft_p99_ms: -5 ms is no bound" in info.value.message
