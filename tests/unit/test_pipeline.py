"""Which results directory a run writes into, and that it writes there alone and only
inside it. Every refusal here comes before any build."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stackmatrix._lock import results_dir_lock
from stackmatrix.cli import main
from stackmatrix.errors import ResultsError, UsageError
from stackmatrix.pipeline import RunOptions, environments, open_run_dir
from stackmatrix.results import RunDir
from stackmatrix.specfile import load_spec

SPEC = 'name = "{name}"\n\n[[cell]]\nid = "a"\nbackend = "current"\n'


def spec_file(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(SPEC.format(name=name))
    return path


def earlier_run(reports: Path, dirname: str, spec_name: str) -> Path:
    run = reports / dirname
    (run / "cells" / "a").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"schema_version": 1, "spec_name": spec_name}))
    return run


def resume(tmp_path: Path, name: str) -> Path:
    opts = RunOptions(spec=load_spec(spec_file(tmp_path, name)), reports_dir=tmp_path / "r")
    return open_run_dir(RunOptions(**{**vars(opts), "resume": True})).path


def test_resume_never_takes_over_another_specs_run(tmp_path):
    earlier_run(tmp_path / "r", "adv-other-20260102T000000Z", "adv-other")
    with pytest.raises(UsageError, match="found no earlier run of 'adv'"):
        resume(tmp_path, "adv")
    own = earlier_run(tmp_path / "r", "adv-20260101T000000Z", "adv")
    earlier_run(tmp_path / "r", "adv-20260103T000000Z", "renamed")  # another spec's run.json
    earlier_run(tmp_path / "r", "adv-20260104T000000Z-copy", "adv")  # not our stamp
    assert resume(tmp_path, "adv") == own


def test_resume_refuses_to_write_through_a_link(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    run = earlier_run(tmp_path / "r", "adv-20260101T000000Z", "adv")
    (run / "cells" / "a" / "check.log").symlink_to(victim)
    (run / "cells" / "b").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(ResultsError, match="symbolic links") as info:
        resume(tmp_path, "adv")
    assert "check.log" in info.value.message and "cells/b" in info.value.message
    rc = main(["build", str(spec_file(tmp_path, "adv")), "--output", str(run)])
    assert rc == 3
    assert victim.read_text() == "untouched\n" and not (tmp_path / "run.json").exists()


HOLD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from stackmatrix._lock import results_dir_lock
    with results_dir_lock(Path(sys.argv[1])):
        print("locked", flush=True)
        time.sleep(60)
    """
)


def test_two_runs_with_one_output_at_once_are_refused(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    argv = [sys.executable, "-c", HOLD, str(out)]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
            rc = main(["build", str(spec_file(tmp_path, "adv")), "--output", str(out)])
            assert rc == 3
            err = capsys.readouterr().err
            assert f"is in use by another stackmatrix run (pid {holder.pid}" in err
            assert not (out / "run.json").exists()
        finally:
            holder.kill()  # SIGKILL: the kernel releases the lock all the same
    with results_dir_lock(out):
        pass


def test_resume_redoes_a_corrupt_phase_result_and_refuses_a_corrupt_run_json(tmp_path, capsys):
    spec, out = spec_file(tmp_path, "adv"), tmp_path / "out"
    argv = ["build", str(spec), "--output", str(out), "--work-dir", str(tmp_path / "work")]
    assert main(argv) == 0
    run_json = json.loads((out / "run.json").read_text())
    assert run_json["finished"] >= run_json["updated"] >= run_json["created"]
    build = out / "cells" / "a" / "build.json"
    broken = json.loads(build.read_text())
    del broken["phase"]
    build.write_text(json.dumps(broken))
    assert main(argv) == 0  # redone, not a KeyError
    assert json.loads(build.read_text())["phase"] == "build"
    (out / "run.json").write_text('{"cells": 5}')
    capsys.readouterr()
    assert main(argv) == 3
    assert f"{out / 'run.json'} is corrupt: cells is int" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text", ['{"schema_version": 1, "data": {"launches": [', '{"schema_version": 2}']
)
def test_resume_refuses_a_bench_json_it_cannot_read(tmp_path, capsys, text):
    # it may hold launches that took GPU time: never replaced by an empty record
    spec, out = spec_file(tmp_path, "adv"), tmp_path / "out"
    bench = out / "cells" / "a" / "bench.json"
    bench.parent.mkdir(parents=True)
    bench.write_text(text)
    argv = ["bench", str(spec), "--output", str(out), "--work-dir", str(tmp_path / "work")]
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert str(bench) in err and "Move it aside" in err
    assert bench.read_text() == text and not (out / "run.json").exists()


@pytest.mark.parametrize("command", ["run", "build", "calibrate", "explain"])
@pytest.mark.parametrize("jobs", ["0", "-3"])
def test_jobs_below_one_are_refused(tmp_path, capsys, command, jobs):
    target = str(tmp_path) if command == "explain" else str(spec_file(tmp_path, "adv"))
    with pytest.raises(SystemExit) as info:
        main([command, target, "--jobs", jobs])
    assert info.value.code == 2
    assert f"argument --jobs: must be at least 1, got {jobs}" in capsys.readouterr().err


@pytest.mark.parametrize("work_dir", ["/", "/.."])
def test_the_filesystem_root_is_no_work_dir(tmp_path, capsys, monkeypatch, work_dir):
    spec, out = spec_file(tmp_path, "adv"), tmp_path / "out"
    with pytest.raises(SystemExit) as info:
        main(["build", str(spec), "--output", str(out), "--work-dir", work_dir])
    assert info.value.code == 2 and "is the filesystem root" in capsys.readouterr().err
    monkeypatch.setenv("STACKMATRIX_WORK_DIR", work_dir)
    assert main(["build", str(spec), "--output", str(out)]) == 2
    assert "$STACKMATRIX_WORK_DIR: '/" in capsys.readouterr().err
    assert not out.exists()


def test_a_work_dir_it_cannot_write_is_refused(tmp_path):
    from stackmatrix._workdir import work_dir_problem

    afile, locked = tmp_path / "afile", tmp_path / "locked"
    afile.write_text("")
    locked.mkdir(mode=0o500)
    assert "is not a directory" in (work_dir_problem(afile) or "")
    assert work_dir_problem(tmp_path / "new" / "dir") is None
    if os.geteuid() != 0:  # root writes anywhere
        assert "is not writable" in (work_dir_problem(locked) or "")


SECRET = "wJalrXUtnFEMIK7MDENGbPxRfiCYzzzz"  # noqa: S105 - planted, to be kept out
SECRET_SPEC = f"""\
name = "sec"
baseline = "a"

[[cell]]
id = "a"
backend = "current"
env = {{ AWS_SECRET_ACCESS_KEY = "{SECRET}-a", OMP_NUM_THREADS = "1" }}

[[cell]]
id = "b"
backend = "current"
env = {{ AWS_SECRET_ACCESS_KEY = "{SECRET}-b", OMP_NUM_THREADS = "2" }}
server_args = ["--api-key", "{SECRET}-c"]
extra_index_urls = ["https://ci:{SECRET}-d@index.example/simple"]
"""


def test_secret_env_values_stay_out_of_results_and_reports(tmp_path, capsys):
    spec = tmp_path / "sec.toml"
    spec.write_text(SECRET_SPEC)
    out, work = tmp_path / "out", tmp_path / "work"
    argv = ["--output", str(out), "--work-dir", str(work), "--reports-dir", str(tmp_path)]
    assert main(["run", str(spec), *argv]) == 0
    assert main(["plan", str(spec)]) == 0 and main(["plan", str(spec), "--json"]) == 0
    assert SECRET not in capsys.readouterr().out
    leaked = [p.name for p in out.rglob("*") if p.is_file() and SECRET in p.read_text()]
    assert leaked == []  # the results' copy of the spec too: results travel as artifacts
    kept = (out / "spec.toml").read_text()
    assert kept.count("<redacted>") == 4 and 'OMP_NUM_THREADS = "2"' in kept
    assert "https://ci:<redacted>@index.example/simple" in kept
    # the phases after build still run the cell with the real value
    envs = environments(RunDir(out), ["a"], load_spec(spec))
    assert envs["a"].env["AWS_SECRET_ACCESS_KEY"] == f"{SECRET}-a"


def test_history_goes_where_the_results_do(tmp_path, monkeypatch, capsys):
    """A file named `reports` in the CWD stopped `run --output X` at the report step,
    after all the work; history went to $CWD/reports whatever --output said."""
    monkeypatch.chdir(tmp_path)
    Path("reports").write_text("not a directory")
    spec, work = spec_file(tmp_path, "adv"), ["--work-dir", str(tmp_path / "work")]
    assert main(["run", str(spec), "--output", "out", *work]) == 0
    assert (tmp_path / "out" / "matrix.md").is_file()
    assert sorted(p.name for p in tmp_path.rglob("history.sqlite")) == []
    # the reports directory's history, for a run inside it
    argv = ["run", str(spec), "--reports-dir", "r", *work]
    assert main(argv) == 0 and (tmp_path / "r" / "history.sqlite").is_file()
    assert main([*argv, "--output", "r/mine"]) == 0
    assert main(["run", str(spec), "--output", "o2", "--history", "h/x.sqlite", *work]) == 0
    assert (tmp_path / "h" / "x.sqlite").is_file()
    # refused before any work: a history path that cannot be one
    capsys.readouterr()
    assert main(["run", str(spec), *work]) == 2
    err = capsys.readouterr().err
    assert "reports is not a directory" in err and "Traceback" not in err
    assert main(["run", str(spec), "--output", "o3", "--history", "out", *work]) == 2
    assert "history database out is not a regular file" in capsys.readouterr().err
    assert not Path("o3").exists()


@pytest.mark.parametrize(
    ("plant", "named"),
    [
        ("cells", "cells"),  # a file where the cells directory goes
        ("cells/a", "cells/a"),  # a file where a cell's directory goes
        ("cells/a/check.json/", "cells/a/check.json"),  # a directory where a result goes
    ],
)
def test_resume_refuses_results_changed_into_other_shapes(
    tmp_path: Path, plant: str, named: str
) -> None:
    """A resume over such results crashed with a traceback (NotADirectoryError,
    IsADirectoryError); it is a results problem (exit 3) before anything is written."""
    from stackmatrix.results import RunDir

    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    target = run.path / plant.rstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    if plant.endswith("/"):
        target.mkdir()
    else:
        target.write_text("not ours")
    before = sorted(run.path.rglob("*"))
    with pytest.raises(ResultsError, match=f"{named} is not a"):
        run.check_layout(["a"], ["build", "check", "bench"])
    assert sorted(run.path.rglob("*")) == before  # nothing written, nothing removed
