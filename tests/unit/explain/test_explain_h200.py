"""The explanation round measured on an H200 host (reports/examples/h200-sglang-explain):
judged again here without a GPU, and protected from being measured over."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from tests.support.synthetic import story_cells, write_run

from stackmatrix.cli import main
from stackmatrix.explain.context import prepare
from stackmatrix.explain.roundspec import derived_spec
from stackmatrix.explain.runner import _cold_starts, explain_cell
from stackmatrix.report.load import load_run
from stackmatrix.report.model import build_model
from stackmatrix.results import CellDir
from stackmatrix.spec_model import Bench, Spec

EXAMPLE = Path(__file__).resolve().parents[3] / "reports" / "examples" / "h200-sglang-explain"
ROUND = Path("explain") / "triton-capped" / "round-1"


@pytest.fixture
def kept(tmp_path: Path) -> Path:
    run = tmp_path / "h200-sglang-explain"
    shutil.copytree(EXAMPLE, run)
    return run


def _bench_file(run: Path, cell: str) -> Path:
    """The cell's bench.json as kept: written or compressed (bench.json.gz)."""
    path = CellDir(run / "cells" / cell, cell).stored_result("bench")
    assert path is not None
    return path


def _no_gpu_here(spec: Spec, output: Path) -> None:
    raise AssertionError(f"a kept round must not be measured again ({output})")


def test_the_h200_round_s_first_launches_were_cold_starts() -> None:
    # 0 warm-up launches: the first launch of three of the four configurations compiled
    # its kernels in the measured round (flashinfer 4349 tok/s, then 7112 and 7024)
    model = build_model(load_run(EXAMPLE / ROUND))
    cold = {c.cell: c for c in _cold_starts(model, "output_throughput")}
    assert set(cold) == {"flashinfer", "triton-capped", "triton-capped~max-running-requests=64"}
    assert cold["flashinfer"].first < 0.7 * cold["flashinfer"].median
    assert all(c.warmup_launches == 0 and c.label == "L1" for c in cold.values())


def test_rejudging_the_kept_round_says_where_its_noise_came_from(kept: Path) -> None:
    bench = _bench_file(kept / ROUND, "flashinfer")
    before = bench.read_bytes()
    path = explain_cell(kept, "triton-capped", run_round=_no_gpu_here, rejudge=True)
    ex = json.loads(path.read_text())
    # the revert recovers 68% of the gap, and equivalence to the baseline is not shown
    assert ex["status"] == "partly explained"
    assert len(ex["rounds"][0]["cold_starts"]) == 3
    cold = [s for s in ex["sentences"] if "cold start" in s]
    assert cold and "3 of 4 cells" in cold[0] and "--warmup-launches 1" in cold[0]
    assert bench.read_bytes() == before  # judged, not touched


def test_a_kept_round_is_not_measured_over_by_another_machine(
    kept: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # here the derived round spec has this machine's paths: resuming would rebuild the
    # cells and replace the H200's launches with whatever happens on this machine
    cells = kept / ROUND / "cells"
    before = {p: p.read_bytes() for p in sorted(cells.rglob("*.json"))}
    explanation = kept / "explain" / "triton-capped" / "explanation.json"
    before[explanation] = explanation.read_bytes()  # the kept explanation stands too
    code = main(
        [
            "explain",
            str(kept),
            "--cell",
            "triton-capped",
            "--warmup",
            "16",
            "--warmup-launches",
            "0",
            "--work-dir",
            str(kept.parent / "w"),
        ]
    )
    assert code == 2
    assert "measured with another round spec" in capsys.readouterr().err
    after = {p: p.read_bytes() for p in sorted(cells.rglob("*.json"))}
    assert {**after, explanation: explanation.read_bytes()} == before


def test_rejudge_refuses_a_round_that_was_never_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    assert main(["explain", str(run), "--cell", "cu130", "--rejudge"]) == 2
    assert "was not measured (no run.json)" in capsys.readouterr().err


def test_revert_rounds_warm_up_each_cell_at_least_once(tmp_path: Path) -> None:
    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    ctx, derived = prepare(run, "cu130", 3)
    groups = [(derived.changes[0],)]

    def warmups(warmup_launches: int | None = None) -> int:
        asked = dataclasses.replace(ctx, warmup_launches=warmup_launches)
        spec = derived_spec(asked, 1, groups, ["cu130~x"], tmp_path / "round-1.toml")
        assert spec.bench is not None
        return spec.bench.warmup_launches

    assert ctx.spec.bench is None  # the synthetic run has no [bench]: none warmed up
    assert warmups() == 1  # the run had none: revert cells are new configurations
    assert warmups(warmup_launches=0) == 0  # asked for
    bench = dataclasses.replace(Bench(), warmup_launches=2)
    ctx = dataclasses.replace(ctx, spec=dataclasses.replace(ctx.spec, bench=bench))
    assert warmups() == 2  # the run's own, when it had more


@pytest.mark.parametrize("flag", ["--warmup-launches", "--warmup", "--rounds", "--launches"])
def test_explain_refuses_negative_counts(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", str(tmp_path), "--cell", "b", flag, "-1"]) == 2
    assert f"explain {flag} must be at least" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--launches", "--warmup-launches"])
def test_explain_refuses_more_launches_than_a_spec_allows(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The limit was said of explain/round-1.toml, after the round directory existed."""
    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    assert main(["explain", str(run), "--cell", "cu130", flag, "1001"]) == 2
    assert f"explain {flag} 1001: at most 1000" in capsys.readouterr().err
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before


def test_the_plan_says_what_a_round_costs_in_time(kept: Path) -> None:
    from stackmatrix.explain.plan import plan_lines

    lines = plan_lines(kept, "triton-capped", 2)
    assert lines[-2].endswith("= 8 launches, after 1 warm-up launch(es) each (4 more)")
    # at the kept round's own launch times: (175 + 84 + 2 x 132) s x 3 launches per cell
    assert lines[-1] == (
        "  about 26 min at the launch times of its round-1 (flashinfer 175 s, triton-capped "
        "84 s, a revert cell 132 s per launch)"
    )
    shutil.rmtree(kept / "explain")  # no round yet: the run's, a revert at the slower
    assert plan_lines(kept, "triton-capped", 2)[-1] == (
        "  about 23 min at the launch times of this run (flashinfer 112 s, triton-capped "
        "117 s, a revert cell 117 s per launch)"
    )


WARM = EXAMPLE.with_name("h200-sglang-explain-warm")


@pytest.fixture
def kept_warm(tmp_path: Path) -> Path:
    run = tmp_path / "h200-sglang-explain-warm"
    shutil.copytree(WARM, run)
    return run


def test_the_warm_round_had_no_cold_start() -> None:
    # one discarded warm-up launch per cell: the first measured launches are warm
    assert _cold_starts(build_model(load_run(WARM / ROUND)), "output_throughput") == ()


def test_a_round_cut_short_says_what_it_lacks_not_noise(kept_warm: Path) -> None:
    # the round was stopped 6 of 8 launches in (the H200 host's GPU time ran out)
    bench = _bench_file(kept_warm / ROUND, "flashinfer")
    before = bench.read_bytes()
    path = explain_cell(kept_warm, "triton-capped", run_round=_no_gpu_here, rejudge=True)
    ex = json.loads(path.read_text())
    assert ex["status"] == (
        "not explained: round 1 is unfinished (triton-capped~attention-backend=flashinfer "
        "1 of 2 launches, triton-capped~max-running-requests=64 1 of 2 launches); "
        "`stackmatrix explain` again finishes it"
    )
    assert [u["cell"] for u in ex["rounds"][0]["unfinished"]] == [
        "triton-capped~attention-backend=flashinfer",
        "triton-capped~max-running-requests=64",
    ]  # the baseline and the candidate have their 2 launches, though marked interrupted
    text = " ".join(ex["sentences"])
    assert "medians only: 0.946x the baseline's" in text  # the cap, reverted
    assert "medians only: 0.295x the baseline's" in text  # the attention backend, reverted
    assert "Round 1 stopped before its end" in text and "too noisy" not in text
    assert bench.read_bytes() == before


@pytest.mark.parametrize("how", ["missing", "a link"])
def test_without_its_spec_a_cut_round_still_counts_its_launches(kept_warm: Path, how: str) -> None:
    spec = kept_warm / ROUND / "spec.toml"
    if how == "a link":  # never read through a link, even one to a plausible spec
        elsewhere = kept_warm.parent / "elsewhere.toml"
        elsewhere.write_bytes(spec.read_bytes())
        spec.unlink()
        spec.symlink_to(elsewhere)
    else:
        spec.unlink()
    path = explain_cell(kept_warm, "triton-capped", run_round=_no_gpu_here, rejudge=True)
    unfinished = json.loads(path.read_text())["rounds"][0]["unfinished"]
    # every cell's bench was interrupted; with no plan to compare with, all are listed
    assert [(u["launches"], u["planned"]) for u in unfinished] == [
        (2, None),
        (2, None),
        (1, None),
        (1, None),
    ]


def test_the_launches_planned_are_the_round_spec_s(kept_warm: Path) -> None:
    # as if the round had asked for 3: then no cell of it finished
    spec = kept_warm / ROUND / "spec.toml"
    spec.write_text(spec.read_text().replace("\nlaunches = 2\n", "\nlaunches = 3\n"))
    path = explain_cell(kept_warm, "triton-capped", run_round=_no_gpu_here, rejudge=True)
    unfinished = json.loads(path.read_text())["rounds"][0]["unfinished"]
    assert [(u["launches"], u["planned"]) for u in unfinished] == [(2, 3), (2, 3), (1, 3), (1, 3)]


def test_a_finished_round_is_not_called_unfinished(kept: Path) -> None:
    path = explain_cell(kept, "triton-capped", run_round=_no_gpu_here, rejudge=True)
    ex = json.loads(path.read_text())
    assert ex["rounds"][0]["unfinished"] == []
    assert any("undecided, too noisy (+1.9%" in s for s in ex["sentences"])


DECIDED = EXAMPLE.parent / "h200-sglang-explain-decided"


@pytest.fixture
def decided(tmp_path: Path) -> Path:
    run = tmp_path / "h200-sglang-explain-decided"
    shutil.copytree(DECIDED, run)
    return run


def test_the_warmed_up_h200_round_decides_which_flag_costs_the_throughput(
    decided: Path,
) -> None:
    # 1 warm-up launch and 3 measured launches per cell, interleaved, on the H200
    bench = _bench_file(decided / ROUND, "triton-capped")
    before = bench.read_bytes()
    ex = json.loads(
        explain_cell(decided, "triton-capped", run_round=_no_gpu_here, rejudge=True).read_text()
    )
    # the revert recovers the whole gap, but 3 launches cannot show it equivalent to
    # the baseline within 1% (+2.4% [-10.4%, +16.9%]): "partly", not "explained"
    assert ex["status"] == "partly explained"
    assert [c["key"] for c in ex["cause"]["group"]] == ["arg:max-running-requests"]
    assert ex["cause"]["vs_baseline"]["verdict"] == "inconclusive"
    assert any(
        "whether triton-capped then matches flashinfer is not shown" in s for s in ex["sentences"]
    )
    assert ex["gap"]["ci_high"] < 0.4  # the candidate's -69%
    (effect,) = [e for e in ex["rounds"][0]["effects"] if e is not None and e != ex["cause"]]
    # +4.3% [+0.5%, +8.2%]: no longer "no effect" merely because 3 launches are noisy
    assert effect["outcome"] == "partial"
    assert bench.read_bytes() == before


def test_a_difference_that_follows_the_cause_is_said_to_follow_it(decided: Path) -> None:
    # sglang captures decode CUDA graphs up to --max-running-requests: the revert cell
    # with 64 captured [1, 2, 4, 8, 12, 16] again, as the baseline did
    ex = json.loads(
        explain_cell(decided, "triton-capped", run_round=_no_gpu_here, rejudge=True).read_text()
    )
    (entry,) = ex["cannot_isolate"]
    assert entry["key"] == "log:cuda_graph_bs"
    assert entry["follows"] == ["--max-running-requests 4 -> 64"]
    said = [s for s in ex["sentences"] if s.startswith("log:cuda_graph_bs")]
    assert said and "[1, 2, 4, 8, 12, 16], as in flashinfer" in said[0]
    assert main(["report", str(decided)]) == 0
    follows = "it follows --max-running-requests 4 -> 64 (see above)"
    assert (
        "cannot be isolated: no switch known for log:cuda_graph_bs"
        in (decided / "matrix.md").read_text()
    )
    assert follows in (decided / "matrix.md").read_text()
    assert follows.replace(">", "&gt;") in (decided / "matrix.html").read_text()


def test_a_revert_cell_without_its_server_log_proves_no_following(decided: Path) -> None:
    # the log is where cuda_graph_bs is read: without it the value is unknown, not equal
    revert = decided / ROUND / "cells" / "triton-capped~max-running-requests=64"
    for log in revert.glob("server-*.log*"):  # as written or compressed (.gz)
        log.unlink()
    ex = json.loads(
        explain_cell(decided, "triton-capped", run_round=_no_gpu_here, rejudge=True).read_text()
    )
    assert ex["cannot_isolate"][0]["follows"] == []
    assert not any(s.startswith("log:cuda_graph_bs") for s in ex["sentences"])


def test_where_the_run_judges_an_slo_explain_says_its_rounds_do_not(
    kept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the results' copy of the spec (the spec as run is not here) with an SLO
    with (kept / "spec.toml").open("a") as f:
        f.write("slo = { ttft_p99_ms = 2000, tpot_p99_ms = 50 }\n")
    record = json.loads((kept / "run.json").read_text())
    record["spec_path"] = str(kept / "elsewhere.toml")
    record["report"]["slo"] = {"ttft_p99_ms": 2000, "tpot_p99_ms": 50}
    (kept / "run.json").write_text(json.dumps(record))
    assert main(["explain", str(kept), "--cell", "triton-capped", "--rejudge"]) == 0
    said = (
        "The run's SLO (ttft_p99_ms = 2000, tpot_p99_ms = 50) is not judged in these rounds: "
        "each is judged on output tok/s at the headline load only, with no load points and "
        "no goodput, so this explains the headline's verdict, not the SLO's."
    )
    assert said in capsys.readouterr().out.splitlines()
    assert said in (kept / "matrix.md").read_text()
    # without an SLO, nothing of it
    plain = shutil.copytree(EXAMPLE, tmp_path / "plain")
    path = explain_cell(plain, "triton-capped", run_round=_no_gpu_here, rejudge=True)
    assert not any("SLO" in s for s in json.loads(path.read_text())["sentences"])
