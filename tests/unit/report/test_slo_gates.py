"""The SLO's verdicts gate CI as the headline's does: `--fail-on goodput-regression` and
`--fail-on slo-load-regression` (the exit status, through the command line), and a
junit.xml test case per cell for each."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from tests.unit.report._slo_results import Round, launches, write_cell, write_run

from stackmatrix.cli import main
from stackmatrix.report import build_report
from stackmatrix.spec_names import FAIL_ON

SLO = {"ttft_p99_ms": 100.0, "tpot_p99_ms": 10.0}
OK_TTFTS = {"headline": [10.0] * 8, "c2": [50.0] * 16, "c4": [80.0] * 16}


def _slower_at_c4(tmp_path: Path, *, slo: dict[str, float] | None = SLO) -> Path:
    """b is 10% faster at the headline, as good in goodput there, and misses the TTFT
    bound at c4 (two of its 16 requests take 150 ms), which the baseline a meets."""
    run = write_run(tmp_path / "run", ["a", "b"], slo=slo)
    late = {**OK_TTFTS, "c4": [90.0] * 14 + [150.0] * 2}
    write_cell(run, "a", launches(3, throughput=100.0, ttfts=OK_TTFTS, step=0.05))
    write_cell(run, "b", launches(3, throughput=110.0, ttfts=late, step=0.05), first=1)
    return run


def _slower_in_goodput(tmp_path: Path) -> Path:
    """b serves a's requests in 2.5 s where a takes 2 s (the same tok/s recorded): 3.2
    against 4 requests within the SLO per second, in every launch; both meet it at c4."""
    run = write_run(tmp_path / "run", ["a", "b"], slo=SLO)
    write_cell(run, "a", launches(3, throughput=100.0, ttfts=OK_TTFTS, step=0.05))

    def rnd(k: int, ttfts: list[float]) -> Round:
        return Round(throughput=100.0 * (1 + 0.05 * k), ttfts_ms=ttfts, duration_s=2.5 + 0.01 * k)

    slow = [{load: [rnd(k, t)] * 2 for load, t in OK_TTFTS.items()} for k in range(3)]
    write_cell(run, "b", slow, first=1)
    return run


def _cases(junit: Path) -> dict[tuple[str, str], tuple[str, str]]:
    """(cell, case) -> (outcome, message)."""
    root = ET.parse(junit).getroot()  # noqa: S314 - our own file, written just now
    out = {}
    for case in root.iter("testcase"):
        child = next(iter(case), None)
        outcome = "pass" if child is None or child.tag == "system-out" else child.tag
        text = "" if child is None else (child.get("message") or child.text or "")
        out[(case.get("classname", ""), case.get("name", ""))] = (outcome, text)
    return out


def test_a_largest_load_below_the_baseline_s_fails_slo_load_regression(tmp_path: Path) -> None:
    run = _slower_at_c4(tmp_path)
    outcome = build_report(run, fail_on=["regression", "goodput-regression"])
    assert outcome.policy_failures == []  # faster at the headline, equivalent in goodput
    outcome = build_report(run, fail_on=["slo-load-regression"])
    assert outcome.policy_failures == [
        "b: below the baseline's largest load within the SLO: it meets the SLO in every "
        "launch up to c2 (concurrency 2), the baseline a in every launch up to c4 (concurrency 4)"
    ]


def test_goodput_slower_at_the_headline_load_fails_goodput_regression(tmp_path: Path) -> None:
    run = _slower_in_goodput(tmp_path)
    assert build_report(run, fail_on=["regression", "slo-load-regression"]).policy_failures == []
    (failure,) = build_report(run, fail_on=["goodput-regression"]).policy_failures
    assert failure.startswith("b: slower than a in goodput at the headline load: ")


def test_junit_has_a_case_per_cell_for_each_slo_verdict(tmp_path: Path) -> None:
    cases = _cases(build_report(_slower_at_c4(tmp_path)).junit)
    assert cases[("a", "slo[goodput]")] == ("pass", "baseline")
    assert cases[("a", "slo[largest_load]")] == (
        "pass",
        "a (baseline) meets the SLO in every launch up to c4 (concurrency 4).",
    )
    assert cases[("b", "slo[goodput]")][0] == "pass"
    assert cases[("b", "slo[largest_load]")] == (
        "failure",
        "it meets the SLO in every launch up to c2 (concurrency 2), the baseline a in every "
        "launch up to c4 (concurrency 4)",
    )
    assert cases[("b", "perf[output_throughput]")][0] == "pass"
    cases = _cases(build_report(_slower_in_goodput(tmp_path / "g")).junit)
    outcome, message = cases[("b", "slo[goodput]")]
    assert outcome == "failure" and message.startswith("slower in goodput at the headline load")
    assert cases[("b", "slo[largest_load]")][0] == "pass"


def test_without_an_slo_junit_has_no_slo_cases(tmp_path: Path) -> None:
    cases = _cases(build_report(_slower_at_c4(tmp_path, slo=None)).junit)
    assert not [name for _, name in cases if name.startswith("slo[")]


def test_the_exit_status_of_report_fail_on_at_the_slo(tmp_path: Path) -> None:
    run, out = _slower_at_c4(tmp_path), str(tmp_path / "out")
    assert main(["report", str(run), "--output", out, "--fail-on", "regression"]) == 0
    assert main(["report", str(run), "--output", out, "--fail-on", "goodput-regression"]) == 0
    assert main(["report", str(run), "--output", out, "--fail-on", "slo-load-regression"]) == 5


def test_a_gate_at_the_slo_without_an_slo_fails_rather_than_passing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, out = _slower_at_c4(tmp_path, slo=None), str(tmp_path / "out")
    assert main(["report", str(run), "--output", out, "--fail-on", "goodput-regression"]) == 5
    assert "goodput-regression: this report judges no SLO" in capsys.readouterr().err
    # report --slo gives it one
    argv = ["report", str(run), "--output", out, "--slo", "ttft_p99_ms=100,tpot_p99_ms=10"]
    assert main([*argv, "--fail-on", "goodput-regression"]) == 0


def test_help_names_every_fail_on_policy(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert all(f"{name}:" in text for name in FAIL_ON)
    assert "slo-load-regression: the largest load that meets the SLO in every launch" in text


def test_one_launch_that_misses_the_slo_is_not_judged_slower_at_it(tmp_path: Path) -> None:
    """b ran one launch (its others never came) and missed the TTFT bound at c4 in it:
    the headline calls one launch's rounds too few, so the SLO's largest load does too,
    the gate does not fail, and junit skips the case rather than passing or failing it."""
    run = write_run(tmp_path / "run", ["a", "b"], slo=SLO)
    late = {**OK_TTFTS, "c4": [90.0] * 14 + [150.0] * 2}
    write_cell(run, "a", launches(3, throughput=100.0, ttfts=OK_TTFTS, step=0.05))
    write_cell(run, "b", launches(1, throughput=80.0, ttfts=late), first=1)
    outcome = build_report(run, fail_on=["slo-load-regression"])
    assert outcome.policy_failures == []
    built = build_report(run)
    b = built.report.cell("b").frontier
    assert b is not None and b.versus == "open"
    assert b.largest is not None and b.largest.name == "c2"
    assert b.sentence.startswith("b is inconclusive at the headline load")
    assert (
        "and not judged at the SLO (1 launch against 3; a verdict needs 2 per cell, as the "
        "headline's): it meets the SLO in its one launch up to c2 (concurrency 2), the "
        "baseline a in every launch up to c4 (concurrency 4); its goodput" in b.sentence
    )
    result, message = _cases(built.junit)[("b", "slo[largest_load]")]
    assert result == "skipped" and message.startswith("not judged (1 launch against 3;")
    data = json.loads(built.json.read_text())
    (cell,) = [c for c in data["cells"] if c["id"] == "b"]
    assert cell["goodput"]["largest_load_vs_baseline"] == "open"
