"""The check phase across cells: in parallel like builds, bounded by --jobs,
with the same results as one cell after the other, and Ctrl-C still stops it at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from tests.support.ctrl_c import as_in_a_terminal

from stackmatrix.cli import main
from stackmatrix.jsontypes import JSONObject

CELLS = ("a", "b", "c")


def write_spec(tmp_path: Path, env: str = "") -> Path:
    cells = "".join(f'\n[[cell]]\nid = "{c}"\nbackend = "current"\n{env}' for c in CELLS)
    spec = tmp_path / "par.toml"
    spec.write_text(f'name = "par"\nbaseline = "a"\ntargets = ["sm_90"]\n{cells}')
    return spec


def untimed(value: Any) -> Any:
    """check.json without what only says how long things took."""
    timing = {"started", "finished", "duration_s", "timing", "seconds"}
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k not in timing}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def checked(tmp_path: Path, spec: Path, name: str, jobs: int) -> dict[str, JSONObject]:
    out, work = tmp_path / name, tmp_path / f"work-{name}"
    argv = ["--output", str(out), "--work-dir", str(work)]
    assert main(["build", str(spec), *argv]) == 0
    assert main(["check", str(spec), *argv, "--jobs", str(jobs)]) == 0
    return {c: json.loads((out / "cells" / c / "check.json").read_text()) for c in CELLS}


def test_parallel_checks_write_what_sequential_checks_write(tmp_path, capsys):
    spec = write_spec(tmp_path)
    sequential = checked(tmp_path, spec, "one", jobs=1)
    capsys.readouterr()
    parallel = checked(tmp_path, spec, "three", jobs=3)
    progress = capsys.readouterr().err
    for cell in CELLS:
        assert parallel[cell]["status"] == "ok"
        assert untimed(parallel[cell]) == untimed(sequential[cell])
        assert f"check  {cell:<20} checking" in progress
        assert f"check  {cell:<20} ok: verdict:" in progress


def test_an_unchanged_cell_reuses_its_static_scan_in_a_new_run(tmp_path, capsys):
    spec = write_spec(tmp_path)
    work = ["--work-dir", str(tmp_path / "work")]
    for run in ("first", "second"):
        out = ["--output", str(tmp_path / run)]
        assert main(["build", str(spec), *out, *work]) == 0
        assert main(["check", str(spec), *out, *work, "--jobs", "3"]) == 0
    progress = capsys.readouterr().err
    assert progress.count("(static scan cached)") == len(CELLS)
    for cell in CELLS:
        first = json.loads((tmp_path / "first" / "cells" / cell / "check.json").read_text())
        second = json.loads((tmp_path / "second" / "cells" / cell / "check.json").read_text())
        assert first["data"]["timing"]["static_scan"] == "miss"
        assert second["data"]["timing"]["static_scan"] == "hit"
        assert untimed(second) == untimed(first)


# Every interpreter the cells start (reading sys.path, the probe) hangs once `hang` exists,
# after saying so: Ctrl-C must stop them all, the running checks and the queued one.
HANG = textwrap.dedent(
    """
    import os, pathlib, time
    here = pathlib.Path(__file__).parent
    if (here / "hang").exists():
        (here / f"started-{os.getpid()}").write_text("")
        time.sleep(120)
    """
)


def test_ctrl_c_stops_parallel_checks_at_once(tmp_path):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HANG)
    spec = write_spec(tmp_path, env=f'env = {{ PYTHONPATH = "{hook}" }}\n')
    argv = ["--output", str(tmp_path / "run"), "--work-dir", str(tmp_path / "work")]
    assert main(["build", str(spec), *argv]) == 0
    (hook / "hang").write_text("")
    cmd = [sys.executable, "-m", "stackmatrix", "check", str(spec), *argv, "--jobs", "2"]
    proc = subprocess.Popen(
        as_in_a_terminal(cmd),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while len(list(hook.glob("started-*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(list(hook.glob("started-*"))) == 2  # two cells at once, not three
        t0 = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        stopped_in = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, out.decode()
    assert stopped_in < 15
    statuses = {}
    for cell in CELLS:
        path = tmp_path / "run" / "cells" / cell / "check.json"
        statuses[cell] = json.loads(path.read_text())["status"] if path.exists() else None
    # the two running checks are marked interrupted; the queued one never started
    assert sorted(map(str, statuses.values())) == ["None", "interrupted", "interrupted"]
    assert not list((tmp_path / "work").glob("scan-cache/*.json"))  # nothing half-scanned kept
    for started in hook.glob("started-*"):
        pid = int(started.name.removeprefix("started-"))
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid)


def _zombie(pid: int) -> bool:
    return " Z " in Path(f"/proc/{pid}/stat").read_text()
