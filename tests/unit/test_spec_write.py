"""specfile/write.py: a typed spec written as TOML reads back as the same spec."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.synthetic import story_cells, write_run

from stackmatrix.spec_model import (
    Bench,
    Cell,
    Executor,
    LoadPoint,
    ReportPolicy,
    SloBound,
    Spec,
    Workload,
)
from stackmatrix.specfile import load_spec, parse_spec
from stackmatrix.specfile.write import dumps

MATRIX = Path(__file__).resolve().parents[2] / "matrix"


def _reloaded(spec: Spec, tmp_path: Path) -> Spec:
    path = tmp_path / "written.toml"
    path.write_text(dumps(spec), encoding="utf-8")
    return dataclasses.replace(load_spec(path), path=spec.path)


@pytest.mark.parametrize("name", sorted(p.name for p in MATRIX.glob("*.toml")))
def test_the_project_s_specs_read_back_equal(name: str, tmp_path: Path) -> None:
    spec = load_spec(MATRIX / name)
    assert _reloaded(spec, tmp_path) == spec


def test_every_field_that_differs_from_its_default_reads_back(tmp_path: Path) -> None:
    workload = Workload(
        kind="file",
        path="/p.jsonl",
        input_len=7,
        range_ratio=0.5,
        request_rate=2.5,
        ignore_eos=False,
        warmup=0,
        seed=0,
    )
    spec = Spec(
        name="all",
        path="all.toml",
        baseline="a",
        description='quotes " and \\ and é',
        targets=("sm_90", "sm_120a"),
        driver="580.1",
        order="random",
        order_seed=0,
        cells=(
            Cell(
                id="a",
                python="3.12",
                cuda="13.0",
                backend="docker",
                base_image="img:1",
                pins=("torch==2.9.1",),
                index_url="https://i.example/simple",
                extra_index_urls=("/abs/idx",),
                find_links=("/abs/wheels",),
                torch_backend="cu130",
                env=(("A", "1"), ("B", "x y")),
                server_args=("--x", "1"),
                runs_on=("gpu",),
                gpus=2,
                ca_certs=("/ca.pem",),
                description="the first",
            ),
            Cell(
                id="b~x=1",
                inherit="current",
                offline=True,
                no_deps=True,
                find_links=("/w",),
                pins=("sglang==0.5.9",),
            ),
        ),
        bench=Bench(
            engine="sglang",
            model="/m",
            server_args=("--y",),
            launches=6,
            min_launches=3,
            rounds=1,
            warmup_launches=1,
            ready_timeout_s=30.0,
            tokenizer="/t",
            workload=workload,
            client_workers="auto",
            steady_warmup=False,
            warmup_max_batches=3,
            steady_tolerance=0.1,
            min_duration_s=2.0,
            points=(
                LoadPoint(
                    name="c8",
                    workload=dataclasses.replace(workload, max_concurrency=8, kind="random"),
                    metric="ttft_median_ms",
                ),
            ),
        ),
        report=ReportPolicy(
            headline="ttft_median_ms",
            confidence=0.9,
            min_effect=0.0,
            fail_on=("regression",),
            explain=True,
            explain_rounds=2,
            slo=(
                SloBound(kind="ttft", percentile=99, ms=2000.0),
                SloBound(kind="itl", percentile=50, ms=12.5),
            ),
        ),
        executor=Executor(
            kind="slurm",
            partition="gpu",
            gpus=1,
            cpus=8,
            time_limit="30",
            container_mounts=("/a:/b:ro",),
            poll_s=1.0,
        ),
    )
    assert _reloaded(spec, tmp_path) == spec


def test_an_external_engine_and_an_infinite_rate_read_back(tmp_path: Path) -> None:
    bench = Bench(
        engine="external",
        url="http://127.0.0.1:8000",
        workload=Workload(request_rate=float("inf"), range_ratio=0.0),
    )
    spec = Spec(name="ext", path="ext.toml", baseline="a", cells=(Cell(id="a"),), bench=bench)
    assert _reloaded(spec, tmp_path) == spec


# what a spec's strings may hold: anything but control characters (the loader refuses them)
texts = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=30)


@settings(max_examples=50, deadline=None)
@given(description=texts, value=texts, arg=texts)
def test_any_text_reads_back(description: str, value: str, arg: str) -> None:
    spec = Spec(
        name="t",
        path="t.toml",
        baseline="a",
        description=description,
        cells=(Cell(id="a", env=(("K", value),), server_args=(arg,)),),
    )
    assert parse_spec(tomllib.loads(dumps(spec)), path="t.toml") == spec


def test_a_derived_round_spec_reads_back_equal(tmp_path: Path) -> None:
    from stackmatrix.explain.context import prepare
    from stackmatrix.explain.roundspec import derived_spec, group_id
    from stackmatrix.explain.search import split

    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    ctx, derived = prepare(run, "cu130", 3)
    # the run's spec had no [bench]; a round's needs a model to be a spec the loader takes
    ctx = dataclasses.replace(
        ctx,
        spec=dataclasses.replace(
            ctx.spec,
            bench=Bench(
                engine="sglang",
                model="m",
                launches=5,
                workload=Workload(max_concurrency=4),
                points=(LoadPoint(name="c1", workload=Workload()),),
            ),
        ),
    )
    groups = split(list(derived.changes))
    ids = [group_id(ctx.cell, 1, i, g) for i, g in enumerate(groups)]
    spec = derived_spec(ctx, 1, groups, ids, tmp_path / "round-1.toml")
    assert len(spec.cells) == 2 + len(groups) and spec.bench is not None
    assert spec.bench.points == () and spec.bench.launches == 3
    assert _reloaded(spec, tmp_path) == spec
