"""A cell that leaves --attention-backend to sglang on an install without FA3: refused
by the check before any GPU time, with the argument, the default and why (the H200:
every launch of such a cell died with "Can not import FA3 in sgl_kernel")."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from stackmatrix.check.defaults import model_kinds, predictions
from stackmatrix.check.features import feature_findings
from stackmatrix.check.inventory import read_inventory
from stackmatrix.check.phase import _with_predictions
from stackmatrix.check.static import CheckOutcome
from stackmatrix.findings import Finding, Severity
from stackmatrix.plan import make_plan
from stackmatrix.report.failures import cause, failure_text
from stackmatrix.specfile import load_spec


def _kimi_like(path: Path, *, mla: bool = True) -> Path:
    config = {"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168}
    if mla:
        config["kv_lora_rank"] = 512  # multi-head latent attention, as Kimi K2 has
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config))
    return path


def _no_fa3(site: Path) -> list[Finding]:
    info = site / "sglang_kernel-0.4.4.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang-kernel\nVersion: 0.4.4\n")
    (site / "sgl_kernel").mkdir()
    (site / "sgl_kernel" / "__init__.py").write_text("")
    (info / "RECORD").write_text("sgl_kernel/__init__.py,,\n")
    findings, _ = feature_findings(read_inventory([site]), {}, "c")
    return findings


def _predict(
    tmp_path: Path, args: list[str], targets: list[str], mla: bool = True
) -> list[Finding]:
    model = _kimi_like(tmp_path / "model", mla=mla)
    return predictions(
        engine="sglang",
        server_args=args,
        kinds=model_kinds(str(model)),
        targets=targets,
        findings=_no_fa3(tmp_path / "site"),
        cell="c",
    )


def test_the_fa3_default_without_flash_ops_is_refused(tmp_path: Path) -> None:
    (found,) = _predict(tmp_path, ["--load-format", "dummy"], ["sm_90"])
    assert found.code == "SM-DEFAULT-UNAVAILABLE" and found.severity is Severity.FAIL
    assert "does not pass --attention-backend, so the server takes fa3" in found.message
    assert "MLA" in found.message and "sm_90" in found.message
    assert "sglang-kernel 0.4.4 lacks sgl_kernel/flash_ops.abi3.so" in found.message
    assert found.details["log"] == "Can not import FA3 in sgl_kernel"


@pytest.mark.parametrize(
    ("args", "targets", "mla"),
    [
        (["--attention-backend", "triton"], ["sm_90"], True),  # the cell chose
        (["--attention-backend=flashinfer"], ["sm_90"], True),
        ([], ["sm_120"], True),  # not Hopper: sglang does not default to fa3 there
        ([], ["sm_90"], False),  # not an MLA model
    ],
)
def test_no_prediction_where_the_default_is_not_fa3_or_not_taken(
    tmp_path: Path, args: list[str], targets: list[str], mla: bool
) -> None:
    assert _predict(tmp_path, args, targets, mla) == []


def test_a_hub_name_or_a_fifo_predicts_nothing(tmp_path: Path) -> None:
    assert model_kinds("moonshotai/Kimi-K2-Instruct") == frozenset()
    (tmp_path / "m").mkdir()
    os.mkfifo(tmp_path / "m" / "config.json")
    assert model_kinds(str(tmp_path / "m")) == frozenset()  # never blocks on a FIFO


SPEC = """
name = "fa3"
baseline = "flashinfer"
targets = ["sm_90"]
[[cell]]
id = "flashinfer"
server_args = ["--attention-backend", "flashinfer"]
[[cell]]
id = "default"
[bench]
engine = "sglang"
model = "model"
launches = 1
"""


def test_the_check_makes_the_cell_incompatible_and_leaves_its_neighbour(tmp_path: Path) -> None:
    _kimi_like(tmp_path / "model")
    (tmp_path / "spec.toml").write_text(SPEC)
    spec = load_spec(tmp_path / "spec.toml")
    findings = _no_fa3(tmp_path / "site")
    outcome = CheckOutcome(verdict="warnings", findings=findings, data={"verdict": "warnings"})
    by_id = {pc.cell.id: pc for pc in make_plan(spec)}
    default = _with_predictions(outcome, by_id["default"], spec)
    assert default.verdict == "incompatible" and default.data["verdict"] == "incompatible"
    assert default.findings[0].code == "SM-DEFAULT-UNAVAILABLE"
    assert _with_predictions(outcome, by_id["flashinfer"], spec).verdict == "warnings"


def test_the_verdict_line_names_the_exception_and_what_predicted_it(tmp_path: Path) -> None:
    (found,) = _predict(tmp_path, [], ["sm_90"])
    tail = (
        "launch 1: the server exited with code 1 before it was ready; last lines of x.log:\n"
        '  File "sgl_kernel/flash_attn.py", line 12, in <module>\n'
        "ImportError: Can not import FA3 in sgl_kernel. Please check your installation.\n"
    )
    said = "ImportError: Can not import FA3 in sgl_kernel. Please check your installation."
    assert cause(tail) == said
    text = failure_text(tail.split("\n", 1)[0], tail, [found])
    assert "(ImportError: Can not import FA3" in text
    assert text.endswith("the check predicted it: SM-DEFAULT-UNAVAILABLE")
    refused = failure_text(
        "the check phase found the cell incompatible", "", [found], code="incompatible"
    )
    assert "SM-DEFAULT-UNAVAILABLE: the cell does not pass --attention-backend" in refused
