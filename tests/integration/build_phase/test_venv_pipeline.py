"""Real uv + real PyPI: cells built, locked, drift found, reused, failures recorded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.support.ctrl_c import as_in_a_terminal

pytestmark = pytest.mark.integration

SPEC = """
name = "venvs"
baseline = "nvml"

[[cell]]
id = "nvml"
pins = ["pynvml==12.0.0"]

[[cell]]
id = "plain"
pins = ["six==1.16.0", "packaging==24.1"]

[[cell]]
id = "plain-run"   # the same environment, run differently
pins = ["packaging==24.1", "six==1.16.0"]
env = { PLAIN_RUN = "1" }
server_args = ["--flag"]

[[cell]]
id = "offline"
pins = ["six==1.16.0"]
extra_index_urls = ["https://download.pytorch.org/whl/cu128"]

[[cell]]
id = "nosuch"
pins = ["packaging==0.0.1"]
"""


def stackmatrix(
    *args: str, cwd: Path, work: Path, check: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STACKMATRIX_WORK_DIR": str(work), "CI": "true"}
    proc = subprocess.run(
        [sys.executable, "-m", "stackmatrix", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("venvs")
    (root / "spec.toml").write_text(SPEC)
    work = root / "work"
    stackmatrix("build", "spec.toml", "--output", "run1", "--jobs", "2", cwd=root, work=work)
    return root, work, root / "run1"


def test_cells_are_built_with_a_lock(first_run: tuple[Path, Path, Path]) -> None:
    _, _, run = first_run
    plain = read(run / "cells/plain/build.json")
    assert plain["schema_version"] == 1 and plain["status"] == "ok"
    lock = {e["name"]: e for e in plain["data"]["lock"]}
    assert lock["six"]["version"] == "1.16.0" and lock["six"]["requested"] is True
    assert lock["packaging"]["source"] == "registry:https://pypi.org/simple"
    env = plain["data"]["environment"]
    assert Path(env["python"][0]).is_file()
    out = subprocess.run(
        [*env["python"], "-c", "import six; print(six.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "1.16.0"
    assert "uv" in (run / "cells/plain/build.log").read_text()
    assert plain["data"]["timings"]["resolve"] >= 0


def test_cells_of_one_environment_share_its_venv(first_run: tuple[Path, Path, Path]) -> None:
    """Cells that differ only in how the server runs (variables, arguments) install the
    same thing: one venv, built once (the other cell waits on its lock and reuses it),
    so its JIT caches are compiled once too."""
    _, work, run = first_run
    plain, other = (read(run / f"cells/{c}/build.json") for c in ("plain", "plain-run"))
    assert plain["status"] == other["status"] == "ok"
    envs = [r["data"]["environment"] for r in (plain, other)]
    assert envs[0]["prefix"] == envs[1]["prefix"] and envs[0]["python"] == envs[1]["python"]
    assert Path(envs[0]["prefix"]).parent == work / "envs"
    assert sorted([plain["data"]["reused"], other["data"]["reused"]]) == [False, True]
    assert envs[1]["env"] == {"PLAIN_RUN": "1"} and envs[0]["env"] == {}


def test_resolver_drift_is_a_finding(first_run: tuple[Path, Path, Path]) -> None:
    _, _, run = first_run
    nvml = read(run / "cells/nvml/build.json")
    codes = {(f["code"], f["subject"]) for f in nvml["findings"]}
    assert ("SM-DRIFT-UNPINNED-HEAVY", "nvidia-ml-py") in codes
    plain = read(run / "cells/plain/build.json")
    assert not [f for f in plain["findings"] if f["code"].startswith("SM-DRIFT-UNPINNED")]


def test_unreachable_index_is_a_clear_finding(first_run: tuple[Path, Path, Path]) -> None:
    _, _, run = first_run
    off = read(run / "cells/offline/build.json")
    assert off["status"] == "failed" and off["code"] == "index_unreachable"
    finding = off["findings"][0]
    assert finding["code"] == "SM-INDEX-UNREACHABLE"
    assert finding["subject"] == "https://download.pytorch.org/whl/cu128"
    assert "cannot be reached" in finding["message"]


def test_resolution_failure_is_recorded(first_run: tuple[Path, Path, Path]) -> None:
    _, _, run = first_run
    bad = read(run / "cells/nosuch/build.json")
    assert bad["status"] == "failed" and bad["code"] == "resolution_failed"
    assert "packaging==0.0.1" in bad["findings"][0]["subject"]


def test_second_run_rebuilds_nothing(first_run: tuple[Path, Path, Path]) -> None:
    root, work, _ = first_run
    proc = stackmatrix(
        "build",
        "spec.toml",
        "--output",
        "run2",
        "--cell",
        "nvml",
        "--cell",
        "plain",
        cwd=root,
        work=work,
    )
    assert "reused existing environment" in proc.stderr
    for cell in ("nvml", "plain"):
        result = read(root / f"run2/cells/{cell}/build.json")
        assert result["data"]["reused"] is True
        assert result["data"]["timings"] == {}


def test_broken_environment_is_rebuilt(first_run: tuple[Path, Path, Path]) -> None:
    root, work, run = first_run
    env = read(run / "cells/plain/build.json")["data"]["environment"]
    site = Path(env["site_packages"][0])
    for dist in site.glob("six-*.dist-info"):
        import shutil

        shutil.rmtree(dist)
    stackmatrix("build", "spec.toml", "--output", "run3", "--cell", "plain", cwd=root, work=work)
    result = read(root / "run3/cells/plain/build.json")
    assert result["status"] == "ok" and result["data"]["reused"] is False


def test_plan_and_validate_cli(first_run: tuple[Path, Path, Path]) -> None:
    root, work, _ = first_run
    table = stackmatrix("plan", "spec.toml", cwd=root, work=work).stdout
    assert "nvml" in table and "(baseline)" in table and "pins +six==1.16.0" in table
    data = json.loads(stackmatrix("plan", "spec.toml", "--json", cwd=root, work=work).stdout)
    assert [c["id"] for c in data["cells"]] == ["nvml", "plain", "plain-run", "offline", "nosuch"]
    (root / "bad.toml").write_text('name = "x"\n[[cell]]\nid = "a"\npins = ["six=="]\nbogus = 1\n')
    bad = stackmatrix("validate", "bad.toml", cwd=root, work=work, check=False)
    assert bad.returncode == 2
    assert "cell[0].pins[0]" in bad.stderr and "bogus" in bad.stderr


HANGING_SPEC = """
name = "hang"
baseline = "plain"

[[cell]]
id = "plain"
pins = ["six==1.16.0", "packaging==24.1"]

[[cell]]
id = "hangs"
pins = ["six==1.16.0"]
extra_index_urls = ["http://127.0.0.1:{port}/simple"]
"""


def test_interrupt_keeps_completed_work_and_resume_finishes(tmp_path: Path) -> None:
    import socket

    # an index that accepts connections and never answers: that cell's build hangs
    # until Ctrl-C, whatever the machine's load, while "plain" completes
    blackhole = socket.socket()
    blackhole.bind(("127.0.0.1", 0))
    blackhole.listen(16)
    port = blackhole.getsockname()[1]
    (tmp_path / "spec.toml").write_text(HANGING_SPEC.format(port=port))
    env = {
        **os.environ,
        "STACKMATRIX_WORK_DIR": str(tmp_path / "work"),
        "CI": "true",
        "UV_HTTP_TIMEOUT": "300",
    }
    argv = [
        sys.executable,
        "-m",
        "stackmatrix",
        "build",
        "spec.toml",
        "--output",
        "run",
        "--jobs",
        "2",
    ]
    proc = subprocess.Popen(
        as_in_a_terminal(argv),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    plain = tmp_path / "run/cells/plain/build.json"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if plain.exists() and read(plain)["status"] == "ok":
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:  # never leave our child behind, even when failing
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
        blackhole.close()
    assert proc.returncode == 130, out
    assert "--resume" in out
    assert read(plain)["status"] == "ok"
    assert read(tmp_path / "run/cells/hangs/build.json")["status"] == "interrupted"
    # the resumed run keeps the completed cell; the other is redone (now refused fast)
    again = stackmatrix(
        "build", "spec.toml", "--output", "run", cwd=tmp_path, work=tmp_path / "work"
    )
    assert "already built in this run" in again.stderr
    assert read(tmp_path / "run/cells/hangs/build.json")["status"] == "failed"
