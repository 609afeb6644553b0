"""Log patterns and redaction against real SGLang output captured on the H200."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stackmatrix._secrets import REDACTED, redact
from stackmatrix.bench.engines import flatten
from stackmatrix.report.logfacts import NOT_READ, load_patterns, read_facts, unread
from stackmatrix.results import CellDir

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _fixture_dir(cover: str) -> Path:
    engine, version = cover.split()
    return FIXTURES / f"{engine}-{version}"


def test_every_covered_version_has_a_real_line_for_its_pattern() -> None:
    patterns = load_patterns()
    covered = [(p, c) for p in patterns for c in p.covers]
    assert covered, "no pattern claims a captured version"
    for pattern, cover in covered:
        logs = sorted(_fixture_dir(cover).glob("server-*.log"))
        assert logs, f"{pattern.fact}: no captured log for {cover!r} under {FIXTURES}"
        lines = [ln for log in logs for ln in log.read_text(encoding="utf-8").splitlines()]
        assert any(pattern.regex.search(ln) for ln in lines), (
            f"pattern for {pattern.fact!r} claims {cover!r} but matches no line of {logs}"
        )


def test_sglang_0_5_14_log_facts() -> None:
    logs = FIXTURES / "sglang-0.5.14"
    patterns = load_patterns()
    fi = read_facts([logs / "server-flashinfer.log"], patterns, engine="sglang")
    tr = read_facts([logs / "server-triton.log"], patterns, engine="sglang")
    assert fi["cuda_graph_bs"].value == "[1, 2, 4, 8]"
    assert fi["cuda_graph_decode"].value == "full"
    assert fi["cuda_graph_prefill"].value == "disabled"
    assert fi["kv_cache_dtype"].value == "torch.bfloat16"
    assert fi["moe_kernel_config"].value == "default (untuned)"
    assert fi["fa3"].value == "unavailable"
    assert fi["server.attention_backend"].value == "flashinfer"
    assert tr["server.attention_backend"].value == "triton"
    assert unread(fi) == [] and unread(tr) == []


def test_sglang_0_5_12_log_facts() -> None:
    log = FIXTURES / "sglang-0.5.12" / "server-flashinfer.log"
    facts = read_facts([log], load_patterns(), engine="sglang")
    assert facts["kv_cache_dtype"].value == "torch.bfloat16"
    assert facts["cuda_graph_bs"].value == "[1, 2, 4, 8, 12, 16, 24, 32]"
    assert facts["cuda_graph_decode"].value == "on"
    assert facts["max_total_num_tokens"].value == "25425743"
    assert facts["server.attention_backend"].value == "flashinfer"
    assert unread(facts) == []


def test_a_log_in_a_new_format_says_what_it_could_not_read(tmp_path: Path) -> None:
    log = tmp_path / "server-L1.log"
    log.write_text("[t] The server is fired up and ready to roll!\n", encoding="utf-8")
    facts = read_facts([log], load_patterns(), engine="sglang")
    assert facts["cuda_graph_bs"].value == NOT_READ
    assert {"cuda_graph_bs", "kv_cache_dtype", "max_total_num_tokens"} <= set(unread(facts))
    # another engine's log is not held to sglang's lines
    assert unread(read_facts([log], load_patterns(), engine="transformers")) == []


@pytest.mark.parametrize("cell", ["flashinfer", "triton"])
def test_real_server_info_keeps_tokenizer_settings(cell: str) -> None:
    raw = json.loads((FIXTURES / "sglang-0.5.14" / f"server_info-{cell}.json").read_text())
    flat = redact(flatten(raw))
    assert len(raw) > 300
    for key in (
        "tokenizer_path",
        "tokenizer_mode",
        "tokenizer_worker_num",
        "skip_tokenizer_init",
        "max_total_tokens",
        "tbo_token_distribution_threshold",
        "enable_forward_pass_metrics",
        "bucket_time_to_first_token",
    ):
        assert key in flat and flat[key] != REDACTED, key
    assert flat["attention_backend"] == cell and flat["random_seed"] == 1
    hidden = redact({**raw, "api_key": "s3cr3t", "hf_token": "x"})
    assert hidden["api_key"] == REDACTED and hidden["hf_token"] == REDACTED


def test_an_interrupted_real_run_reports_the_launches_it_completed() -> None:
    # The first H200 run of matrix/h200-sglang.toml was stopped by a time limit after
    # 4 of 5 launches per cell: its figures must still reach the report.
    from stackmatrix.report.load import load_run
    from stackmatrix.report.model import build_model

    run = Path(__file__).resolve().parents[3] / "reports" / "examples" / "h200-sglang-interrupted"
    model = build_model(load_run(run))
    cells = {c.id: c for c in model.cells}
    assert cells["triton"].comparison is not None
    assert cells["triton"].verdict.value != "not measured"
    for cell in model.cells:
        assert len(load_run(run).cell(cell.id).launches("output_throughput")) == 4  # type: ignore[union-attr]
    assert not any("not read from its server logs" in n for n in model.notes)


def test_the_complete_h200_attention_run_reports_what_the_engine_changed() -> None:
    """matrix/h200-sglang.toml on the H200 (reports/examples/h200-sglang/): 5 measured
    launches per cell after a warm-up, the c32 point compared too, and the setting that
    flashmla changes besides the backend (its KV cache page size) shown as unintended."""
    from stackmatrix.report import render_md
    from stackmatrix.report.load import load_run
    from stackmatrix.report.model import build_model

    run = Path(__file__).resolve().parents[3] / "reports" / "examples" / "h200-sglang"
    results = load_run(run)
    model = build_model(results)
    assert {c.id for c in model.cells} == {"flashinfer", "triton", "flashmla"}
    for cell in model.cells:
        assert len(results.cell(cell.id).launches("output_throughput")) == 5  # type: ignore[union-attr]
    text = render_md.render(model)
    assert "#### c32: concurrency 32, 64 prompts" in text
    flashmla = text[text.index("<summary>flashmla") : text.index("<summary>triton")]
    row = "| `page_size` | 1 | 64 | scheduling and memory | resolved server arguments |"
    assert row in flashmla
    # the per-venv JIT cache: a measured launch starts far faster than the warm-up,
    # which compiled flashinfer's kernels (205 s per start when two venvs shared one)
    bench = CellDir(run / "cells" / "flashinfer", "flashinfer").read("bench")  # or .json.gz
    assert bench is not None
    measured = [ln["ready_s"] for ln in bench.data["launches"]]
    (warm,) = [ln["ready_s"] for ln in bench.data["warmup_launches"]]
    assert len(measured) == 5 and max(measured) < 60 and warm > 3 * max(measured)
