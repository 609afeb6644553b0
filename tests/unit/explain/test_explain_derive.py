"""Which differences of the seed's story can be taken back, and how."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.synthetic import story_cells, write_run

from stackmatrix.explain.context import prepare
from stackmatrix.explain.derive import Derived, derive
from stackmatrix.report.load import load_run
from stackmatrix.report.model import build_model
from stackmatrix.spec_model import Cell, Spec


def test_the_story_s_differences_become_reverts(tmp_path: Path) -> None:
    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    cell = build_model(load_run(run)).cell("cu130")
    assert cell.drift is not None
    ctx, _ = prepare(run, "cu130", None)  # the cells, typed, as plan.json defines them
    derived = derive(
        cell.drift.intended,
        cell.drift.unintended,
        engine="sglang",
        baseline=ctx.baseline_cell,
        cell=ctx.candidate,
    )
    by_key = {c.key: c for c in derived.changes}
    # the resolved attention backend goes back through its flag
    attention = by_key["server:attention_backend"]
    assert attention.args == ("--attention-backend", "flashinfer")
    assert attention.to_value == "flashinfer"
    # DeepGEMM, a log fact, through the switch kept as data in compat/switches.toml
    assert dict(by_key["log:deepgemm"].env)["SGL_ENABLE_JIT_DEEPGEMM"] == "0"
    # an intended pin goes back to the baseline's pin
    assert by_key["package:flashinfer-python"].pins == ("flashinfer-python==0.6.3",)
    # NCCL moved with the CUDA major (cu12 -> cu13 builds): not revertible alone
    cannot = dict(derived.cannot)
    assert "follows the CUDA major" in cannot["package:nvidia-nccl"]
    assert cannot["probe:nccl"].startswith("no switch known")


def test_inseparable_pins_are_reverted_together() -> None:
    from stackmatrix.explain.derive import Change, _group_inseparable

    torch = Change(key="package:torch", label="torch 2.11 -> 2.9.1", pins=("torch==2.9.1",))
    kernel = Change(key="package:sgl-kernel", label="sgl-kernel", pins=("sgl-kernel==0.3.21",))
    other = Change(key="env:X", label="X 1 -> 0", env=(("X", "0"),))
    grouped, notes = _group_inseparable([torch, kernel, other])
    assert other in grouped and len(grouped) == 2
    group = next(c for c in grouped if c.members)
    assert set(group.members) == {"package:torch", "package:sgl-kernel"}
    assert set(group.pins) == {"torch==2.9.1", "sgl-kernel==0.3.21"}
    assert "cannot be reverted without torch" in notes[0]


def _derive_args(
    base: list[str], cell: list[str], resolved: dict[str, str] | None = None
) -> Derived:
    from stackmatrix.report.config_drift import Difference

    intended = [
        Difference(key=f"server:{k}", baseline=v, value="x", intended=True)
        for k, v in (resolved or {}).items()
    ]
    return derive(
        intended,
        [],
        engine="sglang",
        baseline=Cell(id="a", server_args=tuple(base)),
        cell=Cell(id="b", server_args=tuple(cell)),
    )


def test_each_of_the_cell_s_own_flags_goes_back_alone() -> None:
    derived = _derive_args(
        ["--attention-backend", "flashinfer", "--max-running-requests", "64", "--x=1"],
        ["--attention-backend", "triton", "--max-running-requests", "4", "--x=1", "--y", "a"],
        resolved={"y": "b"},
    )
    by_key = {c.key: c for c in derived.changes}
    assert set(by_key) == {"arg:attention-backend", "arg:max-running-requests", "arg:y"}
    assert by_key["arg:max-running-requests"].args == ("--max-running-requests", "64")
    assert by_key["arg:max-running-requests"].label == "--max-running-requests 4 -> 64"
    assert by_key["arg:max-running-requests"].slug == "max-running-requests"
    # a flag only the candidate sets goes back to the baseline's resolved value
    assert by_key["arg:y"].args == ("--y", "b")
    assert all(c.server_args is None for c in derived.changes)


def test_server_args_go_back_whole_when_a_flag_cannot_go_back_alone() -> None:
    # a candidate-only flag whose default was not read; a boolean that cannot be unset; a
    # positional argument: each keeps the one whole revert
    for cell, resolved in (
        (["--a", "1", "--gap", "9"], {}),
        (["--a", "1", "--disable-x"], {"disable_x": "false"}),
        (["model", "--a", "2"], {}),
    ):
        derived = _derive_args(["--a", "2"], cell, resolved)
        assert [c.key for c in derived.changes] == ["cell:server_args"], cell
        assert derived.changes[0].server_args == ("--a", "2")


def test_a_field_of_a_structured_setting_is_not_taken_for_a_flag() -> None:
    from stackmatrix.report.config_drift import Difference

    nested = Difference(
        key="server:cuda_graph_config.decode.max_bs", baseline="16", value="4", intended=False
    )
    derived = derive([], [nested], engine="sglang", baseline=Cell(id="a"), cell=Cell(id="b"))
    assert derived.changes == ()
    assert "structured setting" in dict(derived.cannot)[nested.key]


def test_the_plan_says_what_would_be_reverted_and_what_a_round_costs(tmp_path: Path) -> None:
    from stackmatrix.explain.plan import plan_lines

    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    lines = plan_lines(run, "cu130", 4)
    text = "\n".join(lines)
    assert lines[0] == "cu130 against cu128 (output_throughput): 3 revert(s)"
    assert "revert attention_backend triton -> flashinfer: --attention-backend flashinfer" in text
    assert "cannot be isolated: probe:nccl: no switch known" in text
    # three reverts are measured singly: 5 cells x 4 launches
    assert lines[-1] == (
        "round 1: 3 revert cell(s) + cu128 + cu130, 4 launch(es) each = 20 launches, "
        "after 1 warm-up launch(es) each (5 more)"
    )
    assert not (run / "explain").exists()  # nothing measured, nothing written


def test_rounds_take_the_launches_and_warm_up_asked_for(tmp_path: Path) -> None:
    import dataclasses

    from stackmatrix.explain.roundspec import derived_spec

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
    path = tmp_path / "round-1.toml"
    spec = derived_spec(ctx, 1, groups, ["cu130~x"], path)
    assert spec.bench is not None and spec.bench.launches == 3
    assert spec.bench.workload.warmup != 16  # the run's own
    spec = derived_spec(dataclasses.replace(ctx, warmup=16), 1, groups, ["cu130~x"], path)
    assert spec.bench is not None and spec.bench.workload.warmup == 16
    assert [c.id for c in spec.cells] == ["cu128", "cu130", "cu130~x"]
    assert spec.path == str(path) and spec.order == "interleaved"


def test_a_round_that_fails_is_said_in_the_report_and_kept(tmp_path: Path) -> None:
    from stackmatrix.errors import StackmatrixError
    from stackmatrix.explain.runner import explain_cell

    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )

    def broken(spec: Spec, output: Path) -> None:
        raise StackmatrixError("the round's engine is gone")

    with pytest.raises(StackmatrixError):
        explain_cell(run, "cu130", run_round=broken)
    ex = json.loads((run / "explain" / "cu130" / "explanation.json").read_text())
    assert ex["status"] == "failed in round 1: the round's engine is gone"
    assert "resumes them" in ex["sentences"][0] and ex["cannot_isolate"]
    assert (run / "explain" / "cu130" / "round-1.toml").is_file()  # the round's spec stays


def test_after_a_run_a_failed_explanation_does_not_end_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from stackmatrix.explain import command

    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )

    def failing_runner(
        work_dir: Path, jobs: int, progress: object, executor: str | None = None
    ) -> object:
        def run_round(spec: Spec, output: Path) -> None:
            from stackmatrix.errors import StackmatrixError

            raise StackmatrixError("no GPU left")

        return run_round

    monkeypatch.setattr(command, "round_runner", failing_runner)
    done = command.explain_after_run(
        run, work_dir=tmp_path / "w", jobs=1, rounds=2, progress=lambda *a: None, cells=["cu130"]
    )
    assert done == []
    assert "explain cu130: no GPU left" in capsys.readouterr().err
    md = (run / "matrix.md").read_text()
    assert "#### cu130: failed in round 1: no GPU left" in md


def test_revert_cells_come_from_the_spec_as_run_not_its_redacted_copy(tmp_path: Path) -> None:
    import hashlib

    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    ctx, _ = prepare(run, "cu130", None)
    assert "is not here or has changed" in ctx.note  # no original spec: the copy, said
    # the original spec, still the one run (same digest), with a credential in it
    original = tmp_path / "kimi.toml"
    secret = "https://ci:s3cr3t-token@index.example/simple"  # noqa: S105 - planted
    text = (
        (run / "spec.toml")
        .read_text()
        .replace(
            'torch_backend = "cu130"', f'torch_backend = "cu130"\nextra_index_urls = ["{secret}"]'
        )
    )
    original.write_text(text)
    record = json.loads((run / "run.json").read_text())
    record.update(
        spec_path=str(original), spec_hash=hashlib.sha256(original.read_bytes()).hexdigest()
    )
    (run / "run.json").write_text(json.dumps(record))
    ctx, _ = prepare(run, "cu130", None)
    assert ctx.note == "" and ctx.candidate.extra_index_urls == (secret,)  # builds can use it
    original.write_text(text + "\n# edited since\n")  # changed since: the copy again
    ctx, _ = prepare(run, "cu130", None)
    assert "is not here or has changed" in ctx.note


def _no_round(spec: Spec, output: Path) -> None:
    raise AssertionError(f"nothing may be measured through a link ({output})")


@pytest.mark.parametrize("name", ["round-1.toml", "round-1"])
def test_explain_never_writes_a_round_through_a_link(tmp_path: Path, name: str) -> None:
    from stackmatrix.errors import ResultsError
    from stackmatrix.explain.runner import explain_cell

    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    victim = tmp_path / "victim"
    if name.endswith(".toml"):
        victim.write_text("mine\n")
    else:
        victim.mkdir()
    (run / "explain" / "cu130").mkdir(parents=True)
    (run / "explain" / "cu130" / name).symlink_to(victim)
    with pytest.raises(ResultsError, match="symbolic link") as caught:
        explain_cell(run, "cu130", run_round=_no_round)
    assert caught.value.exit_code == 3
    assert victim.read_text() == "mine\n" if victim.is_file() else not any(victim.iterdir())


def test_explain_never_writes_a_round_outside_the_results(tmp_path: Path) -> None:
    from stackmatrix.errors import ResultsError
    from stackmatrix.explain.runner import explain_cell

    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    (run / "explain").symlink_to(outside)
    with pytest.raises(ResultsError, match="symbolic link"):
        explain_cell(run, "cu130", run_round=_no_round)
    assert list(outside.iterdir()) == []


def test_explain_waits_for_no_one_holding_the_results_lock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from stackmatrix._lock import results_dir_lock
    from stackmatrix.cli import main

    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    with results_dir_lock(run):  # a run resuming into it now
        code = main(["explain", str(run), "--cell", "cu130", "--work-dir", str(tmp_path / "w")])
    assert code == 3
    assert "in use by another stackmatrix run" in capsys.readouterr().err
    assert not (run / "explain").exists()


def test_a_round_spec_keeps_no_credential_once_the_round_is_done(tmp_path: Path) -> None:
    import hashlib

    from stackmatrix.errors import StackmatrixError
    from stackmatrix.explain.runner import explain_cell

    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    secret = "https://ci:s3cr3t-token@index.example/simple"  # noqa: S105 - planted
    original = tmp_path / "kimi.toml"
    original.write_text(
        (run / "spec.toml")
        .read_text()
        .replace(
            'torch_backend = "cu130"', f'torch_backend = "cu130"\nextra_index_urls = ["{secret}"]'
        )
    )
    record = json.loads((run / "run.json").read_text())
    record.update(
        spec_path=str(original), spec_hash=hashlib.sha256(original.read_bytes()).hexdigest()
    )
    (run / "run.json").write_text(json.dumps(record))
    seen: list[str] = []

    def measured(spec: Spec, output: Path) -> None:
        seen.append(Path(spec.path).read_text())
        raise StackmatrixError("stop after the spec")

    with pytest.raises(StackmatrixError):
        explain_cell(run, "cu130", run_round=measured)
    assert secret in seen[0]  # the round's builds could use it
    assert "s3cr3t-token" not in (run / "explain" / "cu130" / "round-1.toml").read_text()
