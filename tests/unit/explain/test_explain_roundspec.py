"""A round's spec, typed: made from the run's cells, held to the loader's rules, and
handed to the pipeline as it is (its file written for the round's readers)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tomllib
from pathlib import Path

import pytest
from tests.support.synthetic import story_cells, write_run

import stackmatrix.pipeline
from stackmatrix.errors import SpecError
from stackmatrix.explain.context import ExplainContext, prepare
from stackmatrix.explain.derive import Change
from stackmatrix.explain.roundspec import check, derived_spec
from stackmatrix.pipeline import RunOptions
from stackmatrix.spec_model import Bench, Spec
from stackmatrix.specfile import load_spec, parse_spec


def load_spec_text(text: str, path: str) -> Spec:
    return parse_spec(tomllib.loads(text), path=path)


def _ctx(tmp_path: Path, bench: Bench | None = None) -> ExplainContext:
    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    ctx, _ = prepare(run, "cu130", None)
    bench = bench or Bench(engine="sglang", model="m")
    return dataclasses.replace(ctx, spec=dataclasses.replace(ctx.spec, bench=bench))


def test_a_revert_cell_is_the_candidate_with_the_group_taken_back(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    group = (
        Change(key="arg:x", label="x", args=("--x", "1")),
        Change(key="env:E", label="E", env=(("E", "0"),)),
        Change(key="package:flashinfer-python", label="fi", pins=("flashinfer-python==0.6.3",)),
    )
    spec = derived_spec(ctx, 1, [group], ["cu130~g"], tmp_path / "round-1.toml")
    cand, revert = spec.cell("cu130"), spec.cell("cu130~g")
    assert revert == dataclasses.replace(
        cand,
        id="cu130~g",
        server_args=(*cand.server_args, "--x", "1"),
        env=tuple(sorted({**dict(cand.env), "E": "0"}.items())),
        pins=(
            *(p for p in cand.pins if not p.startswith("flashinfer")),
            "flashinfer-python==0.6.3",
        ),
    )
    assert load_spec_text(check(spec), spec.path) == spec  # the loader takes it as it is


def test_a_derived_spec_is_held_to_the_loader_s_rules(tmp_path: Path) -> None:
    # a run without [bench]: loading the round's spec said so; the check says the same
    ctx = _ctx(tmp_path)
    ctx = dataclasses.replace(ctx, spec=dataclasses.replace(ctx.spec, bench=None))
    spec = derived_spec(ctx, 1, [], [], tmp_path / "round-1.toml")
    with pytest.raises(SpecError, match=r"bench\.model: missing"):
        check(spec)
    # a warm-up the loader refuses, and a cell id it refuses
    ctx = dataclasses.replace(_ctx(tmp_path / "b"), warmup=10**7)
    with pytest.raises(SpecError, match="warmup"):
        check(derived_spec(ctx, 1, [], [], tmp_path / "round-1.toml"))
    spec = derived_spec(
        _ctx(tmp_path / "c"),
        1,
        [(Change(key="k", label="k"),)],
        ["-bad"],
        tmp_path / "round-1.toml",
    )
    with pytest.raises(SpecError, match="cell id"):
        check(spec)


def test_the_round_s_run_gets_the_typed_spec_its_file_reads_back_as(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stackmatrix.explain import command
    from stackmatrix.explain.runner import explain_cell

    ctx = _ctx(tmp_path)  # its spec, with a [bench], becomes the spec as run
    original = tmp_path / "kimi.toml"
    original.write_text(check(dataclasses.replace(ctx.spec, path=str(original))))
    run = ctx.run_dir
    record = json.loads((run / "run.json").read_text())
    record.update(
        spec_path=str(original), spec_hash=hashlib.sha256(original.read_bytes()).hexdigest()
    )
    (run / "run.json").write_text(json.dumps(record))
    given: list[Spec] = []

    def pipeline(opts: RunOptions, progress: object) -> None:
        given.append(opts.spec)
        raise SpecError("stop", ["after the spec"])

    # a round runs through the local executor the registry names: the pipeline
    monkeypatch.setattr(stackmatrix.pipeline, "run_pipeline", pipeline)
    runner = command.round_runner(tmp_path / "w", 1, lambda *a: None)
    with pytest.raises(SpecError):
        explain_cell(run, "cu130", run_round=runner)
    (spec,) = given
    written = Path(spec.path)
    assert written == run / "explain" / "cu130" / "round-1.toml"
    assert load_spec(written) == spec  # the file says what was run
    assert spec.bench is not None and spec.bench.model == "m"
