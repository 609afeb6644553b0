"""Exact prompt lengths at a REAL `transformers serve` on CPU: the tiny model served
with a tokenizer under which the workload's words are several tokens each and a BOS
is added, so prompts by words would be far off; and a local server that counts
otherwise, whose requests are recorded as of another length."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.support.tokenizer_json import write_tokenizer

from stackmatrix.bench import tokenizer, workload
from stackmatrix.bench.phase import run_bench_phase
from stackmatrix.built_environment import Environment
from stackmatrix.errors import SpecError
from stackmatrix.results import PhaseResult, RunDir, Status
from stackmatrix.spec_model import Bench, Cell, Spec, Workload

pytestmark = pytest.mark.integration

FAKE = Path(__file__).with_name("fake_engine.py")
WORKLOAD = Workload(
    input_len=40, output_len=4, num_prompts=6, range_ratio=0.5, max_concurrency=2, warmup=1
)


def _spec(tmp: Path, model: Path) -> Spec:
    return Spec(
        name="lengths",
        path=str(tmp / "spec.toml"),
        baseline="base",
        cells=(Cell(id="base"),),
        bench=Bench(
            engine="transformers",
            model=str(model),
            server_args=("--device", "cpu"),
            launches=1,
            rounds=1,
            ready_timeout_s=180.0,
            steady_warmup=False,
            workload=WORKLOAD,
        ),
    )


def _bench(tmp: Path, model: Path, env: Environment) -> tuple[Path, PhaseResult]:
    rd = RunDir(tmp / "run")
    results = run_bench_phase(
        _spec(tmp, model), rd, ["base"], environments={"base": env}, order="interleaved"
    )
    assert results["base"].status is Status.OK, results["base"].message
    return rd.path, results["base"]


def _rows(run: Path, result: PhaseResult) -> list[dict[str, Any]]:
    rnd = result.data["launches"][0]["rounds"][0]
    text = (run / "cells" / "base" / rnd["requests_file"]).read_text()
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture(scope="module")
def split_words_model(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Path:
    """The tiny model with a 300-token vocabulary of the same special ids and a BOS."""
    dest = tmp_path_factory.mktemp("model") / "tiny-split"
    shutil.copytree(tiny_model, dest)
    return write_tokenizer(dest, vocab=300, bos=True)


def test_prompts_reach_a_real_server_with_exactly_input_len_tokens(
    tmp_path: Path, cpu_python: Path, split_words_model: Path
) -> None:
    tok, _ = tokenizer.find(None, str(split_words_model), None)
    assert tok is not None
    by_words = workload.generate(WORKLOAD)
    assert all(tok.count(r.prompt) > r.input_len + 10 for r in by_words.measured)  # far off
    env = Environment(backend="venv", python=(str(cpu_python),), env={"HF_HUB_OFFLINE": "1"})
    run, result = _bench(tmp_path, split_words_model, env)
    made = json.loads((run / "workload.json").read_text())["prompt_lengths"]
    assert made["by"] == "tokenizer"
    assert made["tokenizer"] == str(split_words_model / "tokenizer.json")
    reqs = workload.read(run).measured
    assert len({r.input_len for r in reqs}) > 1
    rows = _rows(run, result)
    assert len(rows) == WORKLOAD.num_prompts
    for row in rows:
        assert row["ok"], row["error"]
        assert row["prompt_tokens"] == row["input_len"] == reqs[row["index"]].input_len
        assert "prompt_len_mismatch" not in row
    rnd = result.data["launches"][0]["rounds"][0]
    assert rnd["prompt_lengths"] == {"checked": WORKLOAD.num_prompts, "mismatched": 0}


def test_a_server_that_counts_otherwise_is_recorded(tmp_path: Path) -> None:
    """The local server says 4 prompt tokens of every request: each is a mismatch."""
    model = write_tokenizer(tmp_path / "model", vocab=300, bos=True)
    env = Environment(backend="venv", python=(sys.executable, str(FAKE)), env={"FAKE_MODE": "ok"})
    run, result = _bench(tmp_path, model, env)
    rows = _rows(run, result)
    assert rows and all(r["prompt_len_mismatch"] is True and r["prompt_tokens"] == 4 for r in rows)
    first = min(rows, key=lambda r: int(str(r["index"])))
    rnd = result.data["launches"][0]["rounds"][0]
    check = rnd["prompt_lengths"]
    assert (check["checked"], check["mismatched"]) == (len(rows), len(rows))
    assert check["first"]["prompt_tokens"] == 4
    assert (
        check["first"]["input_len"]
        == workload.read(run).measured[check["first"]["index"]].input_len
    )
    assert first["input_len"] == workload.read(run).measured[0].input_len


def test_a_model_without_a_tokenizer_json_is_by_words(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    env = Environment(backend="venv", python=(sys.executable, str(FAKE)), env={"FAKE_MODE": "ok"})
    run, result = _bench(tmp_path, tmp_path / "model", env)
    made = json.loads((run / "workload.json").read_text())["prompt_lengths"]
    assert made == {"by": "words", "why": f"no tokenizer.json at {str(tmp_path / 'model')!r}"}
    rows = _rows(run, result)
    assert all("input_len" not in r and "prompt_len_mismatch" not in r for r in rows)
    assert "prompt_lengths" not in result.data["launches"][0]["rounds"][0]


def test_token_ids_without_a_tokenizer_stop_before_any_launch(tmp_path: Path) -> None:
    """prompt_form = "token_ids" and a model directory without a tokenizer.json: a spec
    error naming why, before a server is started (no cell has a bench.json)."""
    (tmp_path / "model").mkdir()
    spec = _spec(tmp_path, tmp_path / "model")
    assert spec.bench is not None
    wl = dataclasses.replace(spec.bench.workload, prompt_form="token_ids")
    spec = dataclasses.replace(spec, bench=dataclasses.replace(spec.bench, workload=wl))
    env = Environment(backend="venv", python=(sys.executable, str(FAKE)), env={"FAKE_MODE": "ok"})
    rd = RunDir(tmp_path / "run")
    with pytest.raises(SpecError, match=r"token_ids.*no tokenizer\.json at"):
        run_bench_phase(spec, rd, ["base"], environments={"base": env}, order="interleaved")
    assert not (tmp_path / "run" / "cells" / "base" / "bench.json").exists()


def test_token_ids_reach_the_server_as_the_prompt(tmp_path: Path) -> None:
    """A local server that counts a list prompt's ids as its prompt tokens (as SGLang
    and vLLM do): every request as ids, exactly input_len of them, no mismatch, and
    workload.json says how they were sent."""
    model = write_tokenizer(tmp_path / "model", vocab=300, bos=True)
    spec = _spec(tmp_path, model)
    assert spec.bench is not None
    wl = dataclasses.replace(spec.bench.workload, prompt_form="token_ids")
    spec = dataclasses.replace(spec, bench=dataclasses.replace(spec.bench, workload=wl))
    env = Environment(
        backend="venv", python=(sys.executable, str(FAKE)), env={"FAKE_MODE": "count_ids"}
    )
    rd = RunDir(tmp_path / "run")
    results = run_bench_phase(spec, rd, ["base"], environments={"base": env}, order="interleaved")
    assert results["base"].status is Status.OK, results["base"].message
    made = json.loads((rd.path / "workload.json").read_text())["prompt_lengths"]
    assert made["by"] == "tokenizer" and made["sent_as"] == "token_ids"
    reqs = workload.read(rd.path).measured
    assert all(r.prompt_ids is not None and len(r.prompt_ids) == r.input_len for r in reqs)
    rows = _rows(rd.path, results["base"])
    assert len(rows) == WORKLOAD.num_prompts
    for row in rows:
        assert row["ok"], row["error"]
        assert row["prompt_tokens"] == row["input_len"] == reqs[row["index"]].input_len
        assert "prompt_len_mismatch" not in row
