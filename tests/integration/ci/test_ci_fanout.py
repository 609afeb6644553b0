"""CI fan-out simulated end to end with the real CLI, real uv and real PyPI.

`plan --github-matrix`, then one process per matrix entry with its own results and
work directories and the run id the workflow gives every job (as separate runners),
one cell failing on purpose (a pin that does not exist), one artifact dropped (its
job never uploaded), then `merge`: the report must say exactly that. Pieces of
another spec or another run are refused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
RUN_ID = "github:example/repo:4242"
DEFAULT_RUNNER = "ubuntu-24.04"
GPU_LABELS = ["self-hosted", "gpu-sm120-x8"]

SPEC = """\
name = "fanout"
baseline = "base"

[defaults]
python = "3.11"
backend = "venv"

[[cell]]
id = "base"
pins = ["six==1.16.0"]

[[cell]]
id = "newer"
pins = ["six==1.17.0"]

[[cell]]
id = "gpu"
pins = ["six==1.17.0", "packaging==24.1"]
gpus = 8
runs_on = ["self-hosted", "gpu-sm120-x8"]

[[cell]]
id = "broken"
pins = ["packaging==0.0.1"]

[report]
fail_on = ["failed"]
"""


@dataclass(frozen=True)
class FanOut:
    tmp: Path
    spec: Path
    matrix: dict[str, Any]
    pieces: Path


def stackmatrix(
    *args: str | Path, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stackmatrix", *map(str, args)],
        cwd=cwd,
        env=_clean_env(env or {}),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _clean_env(extra: dict[str, str]) -> dict[str, str]:
    """No GITHUB_* or STACKMATRIX_RUN_ID from the machine that runs the tests: this
    test decides what identity each simulated job has."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GITHUB_") and k != "STACKMATRIX_RUN_ID"
    }
    return {**env, "UV_PYTHON_DOWNLOADS": "never", "CI": "true", **extra}


def run_cell(
    fo: FanOut, cell: str, out: Path, *, run_id: str = RUN_ID, spec: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """One CI job: its own process, results directory and work directory."""
    env = {"STACKMATRIX_RUN_ID": run_id, "STACKMATRIX_WORK_DIR": str(fo.tmp / "work" / cell)}
    return stackmatrix("run", spec or fo.spec, "--cell", cell, "--output", out, cwd=fo.tmp, env=env)


def assert_ran(proc: subprocess.CompletedProcess[str], expected_rc: int = 0) -> None:
    assert proc.returncode == expected_rc, proc.stdout + proc.stderr
    out = Path(proc.args[proc.args.index("--output") + 1])
    assert (out / "run.json").is_file(), proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def fanout(tmp_path_factory: pytest.TempPathFactory) -> FanOut:
    tmp = tmp_path_factory.mktemp("fanout")
    spec = tmp / "fanout.toml"
    spec.write_text(SPEC, encoding="utf-8")
    planned = stackmatrix(
        "plan", spec, "--github-matrix", "--default-runner", DEFAULT_RUNNER, cwd=tmp
    )
    assert planned.returncode == 0, planned.stderr
    fo = FanOut(tmp=tmp, spec=spec, matrix=json.loads(planned.stdout), pieces=tmp / "pieces")
    for entry in fo.matrix["include"]:
        proc = run_cell(fo, entry["cell"], fo.pieces / entry["cell"])
        # the spec's fail_on = ["failed"] turns the broken cell's job red (exit 5) after
        # its results are written; the workflow uploads them either way
        assert_ran(proc, 5 if entry["cell"] == "broken" else 0)
    # the gpu job's artifact never arrived
    shutil.rmtree(fo.pieces / "gpu")
    return fo


@pytest.fixture(scope="module")
def merged(fanout: FanOut) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = fanout.tmp / "merged"
    pieces = sorted(fanout.pieces.iterdir())
    history = fanout.tmp / "history" / "history.sqlite"
    proc = stackmatrix("merge", *pieces, "--output", out, "--history", history, cwd=fanout.tmp)
    return proc, out


def test_plan_gives_each_cell_its_runner_labels(fanout: FanOut) -> None:
    entries = {e["cell"]: e for e in fanout.matrix["include"]}
    assert list(entries) == ["base", "newer", "gpu", "broken"]
    assert entries["gpu"]["runs-on"] == GPU_LABELS
    assert entries["gpu"]["gpus"] == 8
    for cell in ("base", "newer", "broken"):
        assert entries[cell]["runs-on"] == [DEFAULT_RUNNER]
        assert entries[cell]["gpus"] == 0
    assert [c for c, e in entries.items() if e["baseline"]] == ["base"]
    hashes = {e["content-hash"] for e in entries.values()}
    assert len(hashes) == 4 and all(len(h) == 12 for h in hashes)


def test_each_job_recorded_the_shared_run_id(fanout: FanOut) -> None:
    for piece in fanout.pieces.iterdir():
        run = json.loads((piece / "run.json").read_text())
        assert run["run_id"] == RUN_ID
        assert [p.name for p in (piece / "cells").iterdir()] == [piece.name]


def test_merge_fails_per_the_spec_policy_after_writing_the_report(
    merged: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    proc, out = merged
    # [report] fail_on = ["failed"] in the spec, no --fail-on given: exit code 5
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "--fail-on matched" in proc.stderr
    assert "gpu: build failed (artifact_missing)" in proc.stderr
    assert "broken: build failed (resolution_failed)" in proc.stderr
    assert "base" not in proc.stderr.split("--fail-on matched", 1)[1]
    for name in ("matrix.md", "matrix.html", "matrix.json", "junit.xml", "run.json"):
        assert (out / name).is_file(), name


def test_matrix_json_says_which_cell_failed_and_which_never_arrived(
    merged: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, out = merged
    report = json.loads((out / "matrix.json").read_text())
    assert report["schema_version"] == 1
    cells = {c["id"]: c for c in report["cells"]}
    assert list(cells) == ["base", "newer", "gpu", "broken"]
    build = {
        cid: (c["phases"]["build"]["status"], c["phases"]["build"]["code"])
        for cid, c in cells.items()
    }
    assert build == {
        "base": ("ok", None),
        "newer": ("ok", None),
        "gpu": ("failed", "artifact_missing"),
        "broken": ("failed", "resolution_failed"),
    }
    assert cells["base"]["compat"] == "compatible"
    assert cells["newer"]["compat"] == "compatible"
    assert cells["gpu"]["compat"] != "compatible"
    assert cells["broken"]["compat"] != "compatible"
    assert "no results arrived" in cells["gpu"]["phases"]["build"]["message"]
    assert "packaging==0.0.1" in cells["broken"]["phases"]["build"]["message"]
    # the gpu cell's definition comes from the plan even though its job sent nothing
    assert cells["gpu"]["definition"]["runs_on"] == GPU_LABELS


def test_matrix_md_says_the_same(merged: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, out = merged
    md = (out / "matrix.md").read_text()
    rows = _table_rows(md, "### Compatibility")
    assert set(rows) == {"base", "newer", "gpu", "broken"}
    assert rows["base"][0] == "ok" and rows["newer"][0] == "ok"
    assert rows["gpu"][0] == "failed" and rows["broken"][0] == "failed"
    sections = _details(md)
    assert "artifact_missing" in sections["gpu"]
    assert "resolution_failed" in sections["broken"]
    for cell in ("base", "newer"):
        assert "failed" not in sections[cell], sections[cell]


def test_junit_fails_exactly_the_two_cells(
    merged: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, out = merged
    root = ET.parse(out / "junit.xml").getroot()  # noqa: S314 (our own file, just written)
    failed = {
        (case.get("classname"), case.get("name"))
        for case in root.iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    }
    assert failed == {("gpu", "build"), ("broken", "build")}


def test_explicit_fail_on_overrides_the_spec_policy(fanout: FanOut) -> None:
    pieces = sorted(fanout.pieces.iterdir())
    out = fanout.tmp / "merged-incompatible-only"
    proc = stackmatrix(
        "merge", *pieces, "--output", out, "--fail-on", "incompatible", cwd=fanout.tmp
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (out / "matrix.md").is_file()


def test_pieces_of_another_run_are_refused(fanout: FanOut) -> None:
    other = fanout.tmp / "other-run" / "gpu"
    assert_ran(run_cell(fanout, "gpu", other, run_id="github:example/repo:9999"))
    proc = stackmatrix(
        "merge", fanout.pieces / "base", other, "--output", fanout.tmp / "x", cwd=fanout.tmp
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "refusing to merge" in proc.stderr
    assert RUN_ID in proc.stderr and "github:example/repo:9999" in proc.stderr
    assert not (fanout.tmp / "x" / "matrix.md").exists()


def test_pieces_of_another_spec_are_refused(fanout: FanOut) -> None:
    changed = fanout.tmp / "changed.toml"
    changed.write_text(SPEC.replace('"six==1.17.0"]', '"six==1.16.0"]', 1), encoding="utf-8")
    assert changed.read_text() != SPEC
    other = fanout.tmp / "other-spec" / "newer"
    assert_ran(run_cell(fanout, "newer", other, spec=changed))
    proc = stackmatrix(
        "merge", fanout.pieces / "base", other, "--output", fanout.tmp / "y", cwd=fanout.tmp
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "refusing to merge" in proc.stderr
    assert "spec_hash" in proc.stderr
    assert not (fanout.tmp / "y" / "matrix.md").exists()


def test_the_workflow_command_runs_one_cell_through_nox(fanout: FanOut) -> None:
    """The cell job's exact command, `nox -s cell -- CELL SPEC --output DIR`."""
    nox = shutil.which("nox")
    assert nox is not None, "nox is not on PATH (pip install nox)"
    out = fanout.tmp / "nox-results" / "newer"
    env = _clean_env(
        {"STACKMATRIX_RUN_ID": RUN_ID, "STACKMATRIX_WORK_DIR": str(fanout.tmp / "work" / "nox")}
    )
    argv = [nox, "-f", str(ROOT / "noxfile.py"), "--envdir", str(fanout.tmp / ".nox")]
    argv += ["-s", "cell", "--", "newer", str(fanout.spec), "--output", str(out)]
    proc = subprocess.run(
        argv,
        cwd=fanout.tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    run = json.loads((out / "run.json").read_text())
    assert run["run_id"] == RUN_ID
    build = json.loads((out / "cells" / "newer" / "build.json").read_text())
    assert build["status"] == "ok"
    # and its piece merges with the others of the same run
    pieces = (fanout.pieces / "base", out)
    merged = stackmatrix(
        "merge", *pieces, "--output", fanout.tmp / "z", "--fail-on", "incompatible", cwd=fanout.tmp
    )
    assert merged.returncode == 0, merged.stdout + merged.stderr


def _table_rows(md: str, heading: str) -> dict[str, list[str]]:
    """The first table under `heading`: first column (minus "(baseline)") -> the rest."""
    section = md.split(heading, 1)[1]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines()[1:]:
        if line.startswith("#"):
            break
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        cols = [c.strip() for c in line.strip("|").split("|")]
        if cols[0] == "cell":
            continue
        rows[cols[0].replace("(baseline)", "").strip()] = cols[1:]
    return rows


def _details(md: str) -> dict[str, str]:
    """Each cell's <details> block, by cell id."""
    out: dict[str, str] = {}
    for block in md.split("<details><summary>")[1:]:
        cell = block.split(":", 1)[0].strip()
        out[cell] = block.split("</details>", 1)[0]
    return out
