"""What sets a cell apart from the baseline, said beside its verdict (report/apart.py):
the story's slower cell names its most consequential unrequested difference and sends
the reader to explain; one difference is named as the one; none is an A/A pair."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from tests.support.synthetic import story_cells, write_run

from stackmatrix.report import build_report
from stackmatrix.report.apart import set_apart
from stackmatrix.report.config_drift import Difference, Drift


def _diff(key: str, base: str, value: str, because: str | None = None) -> Difference:
    return Difference(
        key=key, baseline=base, value=value, intended=because is not None, because=because
    )


def test_one_difference_is_named_as_the_one_with_who_asked_for_it() -> None:
    drift = Drift(
        intended=(_diff("cell:server_args", "[]", '["--dtype", "float16"]', "server_args"),),
        unintended=(),
        not_compared=(),
    )
    text = set_apart(drift, "tf517")
    assert text == (
        "the one recorded setting that differs from tf517: server_args (cell) [] → "
        '["--dtype", "float16"] (asked for by the cell\'s server_args)'
    )


def test_nothing_different_is_an_aa_pair_only_when_everything_was_compared() -> None:
    assert set_apart(Drift(intended=(), unintended=(), not_compared=()), "b") == (
        "no recorded setting differs from b: an A/A pair"
    )
    partial = set_apart(Drift(intended=(), unintended=(), not_compared=("no probe of b",)), "b")
    assert partial is not None and "A/A" not in partial and "no probe of b" in partial


def test_no_facts_no_sentence() -> None:
    assert set_apart(None, "b") is None


def test_the_story_names_the_attention_backend_and_explain(tmp_path: Path) -> None:
    run = write_run(
        tmp_path / "run",
        spec_name="kimi-k25-cuda13",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    outcome = build_report(run)
    cell = outcome.report.cell("cu130")
    assert cell.set_apart is not None
    assert (
        "the most consequential of those not asked for: attention_backend flashinfer → triton"
        in (cell.set_apart)
    )
    assert "`stackmatrix explain`" in cell.set_apart
    assert outcome.report.cell("cu128").set_apart is None  # the baseline
    md = (run / "matrix.md").read_text()
    (line,) = [x for x in md.splitlines() if x.startswith("- **cu130**")]
    assert (
        line.startswith("- **cu130**: slower") and "attention_backend flashinfer → triton" in line
    )
    doc = json.loads((run / "matrix.json").read_text())
    (c,) = [c for c in doc["cells"] if c["id"] == "cu130"]
    assert c["set_apart"] == cell.set_apart
    assert "attention_backend flashinfer → triton" in (run / "matrix.html").read_text()


def test_several_differences_not_asked_for_are_counted_and_sent_to_explain() -> None:
    intended = (_diff("package:transformers", "5.17.0", "5.23.0", "pins"),)
    unintended = tuple(replace(_diff(f"server:k{i}", "a", "b"), rank=i) for i in range(2))
    text = set_apart(Drift(intended=intended, unintended=unintended, not_compared=()), "b")
    assert text == (
        "3 recorded settings differ from b (1 asked for by its definition, 2 not; the most "
        "consequential of those not asked for: k0 a → b (not asked for by its definition)); "
        "`stackmatrix explain` measures which of them moves the headline"
    )


def test_what_one_definition_field_asks_for_is_one_change_without_explain() -> None:
    intended = tuple(_diff(f"package:p{i}", "1", "2", "pins") for i in range(5))
    text = set_apart(Drift(intended=intended, unintended=(), not_compared=()), "b")
    assert text == (
        "it differs from b only in what its definition asks for (package p0 1 → 2; "
        "package p1 1 → 2; package p2 1 → 2; 2 more)"
    )
    two = (*intended[:1], _diff("cell:cuda", "12.8", "13.0", "cuda"))
    text = set_apart(Drift(intended=two, unintended=(), not_compared=()), "b")
    assert text is not None and text.endswith(
        "`stackmatrix explain` measures which of them moves the headline"
    )


def test_a_cell_never_built_here_gets_no_sentence(tmp_path: Path) -> None:
    run = write_run(
        tmp_path / "run",
        spec_name="kimi-k25-cuda13",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    for name in ("build.json", "check.json", "bench.json"):
        (run / "cells" / "cu130" / name).unlink(missing_ok=True)
    assert build_report(run).report.cell("cu130").set_apart is None


def test_no_sentence_against_a_baseline_never_built_here(tmp_path: Path) -> None:
    run = write_run(
        tmp_path / "run",
        spec_name="kimi-k25-cuda13",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    for name in ("build.json", "check.json", "bench.json"):
        (run / "cells" / "cu128" / name).unlink(missing_ok=True)
    assert build_report(run).report.cell("cu130").set_apart is None
