"""The report's note on requests the server counted with another prompt length, and
the round's check it reads (bench/metrics.py prompt_check)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.support.synthetic import story_cells, write_run

from stackmatrix.bench import metrics
from stackmatrix.bench.client import RequestRecord
from stackmatrix.bench.workload import BenchRequest
from stackmatrix.report.load import load_run
from stackmatrix.report.model import build_model


def _req(i: int, n: int) -> BenchRequest:
    return BenchRequest(index=i, prompt="x", input_len=n, max_tokens=4, arrival_s=0.0)


def test_a_round_counts_the_requests_of_another_length() -> None:
    reqs = [_req(0, 10), _req(1, 12), _req(2, 9), _req(3, 9)]
    recs = [
        RequestRecord(index=0, prompt_tokens=10),
        RequestRecord(index=1, prompt_tokens=13),
        RequestRecord(index=2, prompt_tokens=None),  # the server did not say
        RequestRecord(index=3, prompt_tokens=1, error="HTTP 500: x"),  # not completed
    ]
    assert metrics.prompt_check(recs, reqs) == {
        "checked": 2,
        "mismatched": 1,
        "first": {"index": 1, "input_len": 12, "prompt_tokens": 13},
    }
    assert metrics.prompt_check(recs[:1], reqs) == {"checked": 1, "mismatched": 0}


def _run(tmp_path: Path, cell: str, checks: Sequence[Mapping[str, object]]) -> Path:
    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    path = run / "cells" / cell / "bench.json"
    doc = json.loads(path.read_text())
    rounds = [rnd for launch in doc["data"]["launches"] for rnd in launch["rounds"]]
    for rnd, check in zip(rounds, list(checks) * len(rounds), strict=False):
        rnd["prompt_lengths"] = check
    path.write_text(json.dumps(doc))
    return run


def _notes(run: Path) -> list[str]:
    return [n for n in build_model(load_run(run)).notes if "prompt length" in n]


def test_mismatched_requests_are_a_note(tmp_path: Path) -> None:
    bad = {
        "checked": 8,
        "mismatched": 3,
        "first": {"index": 5, "input_len": 1000, "prompt_tokens": 1086},
    }
    good = {"checked": 8, "mismatched": 0}
    run = _run(tmp_path, "cu130", [bad, good, good])
    doc = json.loads((run / "cells/cu130/bench.json").read_text())
    rounds = sum(len(x["rounds"]) for x in doc["data"]["launches"])
    with_bad = len(range(0, rounds, 3))
    assert _notes(run) == [
        f"cu130: {3 * with_bad} of {8 * rounds} measured requests, in {with_bad} of {rounds} "
        "rounds, reached the server with another prompt length than their input_len "
        "(usage.prompt_tokens; request 5: input_len 1000, the server counted 1086): its "
        "tokenizer is not the client's (bench.tokenizer names the client's), or it adds "
        "tokens of its own"
    ]


def test_no_mismatch_and_no_check_are_no_note(tmp_path: Path) -> None:
    assert _notes(_run(tmp_path / "a", "cu130", [{"checked": 8, "mismatched": 0}])) == []
    assert _notes(_run(tmp_path / "b", "cu130", [])) == []


def _form_notes(run: Path) -> list[str]:
    return [n for n in build_model(load_run(run)).notes if "token ids" in n]


def test_prompts_sent_as_token_ids_are_said_with_the_servers_counts(tmp_path: Path) -> None:
    run = _run(tmp_path, "cu130", [{"checked": 4, "mismatched": 1}])
    assert _form_notes(run) == []  # no workload.json: nothing said of the form
    made = {"by": "tokenizer", "tokenizer": "t.json", "sha256": "0" * 64}
    (run / "workload.json").write_text(json.dumps({"prompt_lengths": made}))
    assert _form_notes(run) == []  # text: the form every report assumed
    (run / "workload.json").write_text(
        json.dumps({"prompt_lengths": {**made, "sent_as": "token_ids"}})
    )
    doc = json.loads((run / "cells/cu130/bench.json").read_text())
    rounds = sum(len(launch["rounds"]) for launch in doc["data"]["launches"])
    (note,) = _form_notes(run)
    assert note.startswith("The prompts were sent as the client tokenizer's token ids")
    assert f"exactly input_len tokens for {3 * rounds:,} of {4 * rounds:,} measured" in note
    (run / "workload.json").write_text("{not json")
    assert _form_notes(run) == []  # unreadable: the report goes on without it
