"""Why adaptive launches stopped, as the report says it: from its own verdicts, not only
from the run's record (a run resumed with complete candidates once recorded "decided"
of an inconclusive A/A pair: reports/examples/h200-sglang-cache)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.synthetic import story_cells, write_run

from stackmatrix.report.load import load_run
from stackmatrix.report.model import build_model
from stackmatrix.report.protocol import Protocol

PLAN = {"min": 3, "max": 4, "looks": 2, "launches": 4, "stopped": "decided"}


def _sentence(protocol: Protocol) -> str:
    return next(s for s in protocol.sentences() if s.startswith("Adaptive launches"))


def test_decided_is_said_only_when_every_verdict_is() -> None:
    args = {
        "plan": PLAN,
        "launches": {"a": 4, "b": 4},
        "minutes": 0.0,
        "gpus": True,
        "saved_minutes": None,
        "drift": None,
    }
    assert "of 3 to 4 (decided)" in _sentence(Protocol(**args, decided=True))  # type: ignore[arg-type]
    assert "of 3 to 4 (max reached)" in _sentence(Protocol(**args, decided=False))  # type: ignore[arg-type]
    reached = {**PLAN, "stopped": "max reached"}
    assert "(max reached)" in _sentence(Protocol(**{**args, "plan": reached}, decided=True))  # type: ignore[arg-type]
    running = {k: v for k, v in PLAN.items() if k != "stopped"}
    assert "(not finished)" in _sentence(Protocol(**{**args, "plan": running}, decided=True))  # type: ignore[arg-type]


def test_matrix_json_says_what_matrix_md_says() -> None:
    """One "stopped", computed once: an inconclusive pair of a run recorded "decided" is
    "max reached" in the json too, with the record kept beside it."""
    args = {
        "plan": PLAN,
        "launches": {"a": 4, "b": 4},
        "minutes": 0.0,
        "gpus": True,
        "saved_minutes": None,
        "drift": None,
    }
    doc = Protocol(**args, decided=False).to_dict()  # type: ignore[arg-type]
    assert doc["stopped"] == "max reached"
    plan = doc["plan"]
    assert isinstance(plan, dict)
    assert plan["stopped"] == "max reached" and plan["recorded_stopped"] == "decided"


def test_the_report_takes_its_own_verdicts(tmp_path: Path) -> None:
    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    path = run / "cells" / "cu128" / "bench.json"
    doc = json.loads(path.read_text())
    doc["data"]["launch_plan"] = PLAN
    path.write_text(json.dumps(doc))
    model = build_model(load_run(run))
    assert model.protocol is not None
    decided = all(c.verdict.decided for c in model.cells)
    said = _sentence(model.protocol)
    assert ("(decided)" in said) == decided and ("(max reached)" in said) != decided
