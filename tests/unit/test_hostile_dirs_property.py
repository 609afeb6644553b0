"""Hostile results directories: any file or directory of a results tree truncated,
overwritten with random bytes, swapped for a directory (or a directory for a file),
replaced by a link to /dev/zero, to a file or a directory outside the tree, or by a
FIFO. `report`, `merge`, `run --resume` and `explain --plan` answer with a result or a
documented exit code (docs/robustness.md, README "Exit codes"): never a traceback,
never a hang, and nothing outside the results directory written.

Each test builds its base results once (a module fixture) and copies it per example
into a fresh temporary directory."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import resource
import shutil
import signal
import stat
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.synthetic import SyntheticCell, story_cells, write_run

from stackmatrix.cli import main

HANG_S = 60  # a command that has not answered by then is hung
OUTSIDE_TEXT = b"outside the results: never to be written or read into them\n"
MUTATIONS = (
    "truncate",
    "random_bytes",
    "directory",
    "file",
    "link_dev_zero",
    "link_outside_file",
    "link_outside_dir",
    "fifo",
)
SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class Hung(Exception):
    pass


@contextmanager
def guarded(limit: int = 1 << 24) -> Iterator[None]:
    """A command that blocks (on a FIFO, say) fails after HANG_S instead of hanging the
    suite, and one that copies /dev/zero fails (EFBIG) instead of filling the disk."""

    def _alarm(signum: int, frame: FrameType | None) -> None:
        raise Hung(f"no answer after {HANG_S} s")

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous_xfsz = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    previous_alarm = signal.signal(signal.SIGALRM, _alarm)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    signal.alarm(HANG_S)
    try:
        yield
    finally:
        signal.alarm(0)
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGALRM, previous_alarm)
        signal.signal(signal.SIGXFSZ, previous_xfsz)


def tree(root: Path) -> list[str]:
    """Every path of a results tree, relative to it ("." for the root itself)."""
    return [".", *sorted(str(p.relative_to(root)) for p in root.rglob("*"))]


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


@dataclasses.dataclass(frozen=True)
class Mutation:
    target: str  # relative to the results directory
    kind: str
    length: int
    payload: bytes

    def apply(self, root: Path, outside_file: Path, outside_dir: Path) -> None:
        path = root / self.target
        if self.kind == "truncate" and path.is_file() and not path.is_symlink():
            os.truncate(path, self.length % (path.stat().st_size + 1))
            return
        _remove(path)
        if self.kind in ("truncate", "file"):  # a directory becomes a file
            path.write_bytes(self.payload[: self.length % 8])
        elif self.kind == "random_bytes":
            path.write_bytes(self.payload)
        elif self.kind == "directory":
            path.mkdir()
        elif self.kind == "link_dev_zero":
            path.symlink_to("/dev/zero")
        elif self.kind == "link_outside_file":
            path.symlink_to(outside_file)
        elif self.kind == "link_outside_dir":
            path.symlink_to(outside_dir, target_is_directory=True)
        elif self.kind == "fifo":
            os.mkfifo(path)
        else:  # pragma: no cover - MUTATIONS lists every kind
            raise AssertionError(self.kind)


def mutations(paths: Sequence[str]) -> st.SearchStrategy[Mutation]:
    return st.builds(
        Mutation,
        target=st.sampled_from(paths),
        kind=st.sampled_from(MUTATIONS),
        length=st.integers(min_value=0, max_value=1 << 16),
        payload=st.binary(max_size=256),
    )


def snapshot(root: Path, *, skip: Sequence[Path] = ()) -> dict[str, tuple[str, str]]:
    """What lies under root, outside `skip`: each path's type and content (a regular
    file's digest, a link's target), read without following a link or opening a FIFO."""
    seen: dict[str, tuple[str, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if here / d not in skip]
        for name in dirnames + filenames:
            path = here / name
            if path in skip:
                continue
            st_ = path.lstat()
            if stat.S_ISLNK(st_.st_mode):
                seen[str(path)] = ("link", str(path.readlink()))
            elif stat.S_ISREG(st_.st_mode):
                seen[str(path)] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
            else:
                seen[str(path)] = (stat.filemode(st_.st_mode)[0], "")
    return seen


@dataclasses.dataclass
class Sandbox:
    """A fresh directory per example: a copy of the base results, an outside file and an
    outside directory that a mutation may link to."""

    root: Path
    outside_file: Path
    outside_dir: Path

    def copy(self, base: Path, name: str) -> Path:
        return Path(shutil.copytree(base, self.root / name, symlinks=True))

    def check_outside(self) -> None:
        assert self.outside_file.read_bytes() == OUTSIDE_TEXT
        assert sorted(p.name for p in self.outside_dir.iterdir()) == ["kept.txt"]
        assert (self.outside_dir / "kept.txt").read_bytes() == OUTSIDE_TEXT


@contextmanager
def sandbox() -> Iterator[Sandbox]:
    root = Path(tempfile.mkdtemp(prefix="sm-hostile-"))
    outside_file = root / "outside.txt"
    outside_file.write_bytes(OUTSIDE_TEXT)
    outside_dir = root / "outside-dir"
    outside_dir.mkdir()
    (outside_dir / "kept.txt").write_bytes(OUTSIDE_TEXT)
    try:
        yield Sandbox(root, outside_file, outside_dir)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def answer(
    argv: list[str], capsys: pytest.CaptureFixture[str], allowed: set[int]
) -> tuple[int, str]:
    capsys.readouterr()
    with guarded():
        rc = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    assert rc in allowed, (rc, err[-2000:])
    return rc, err


def _cells(n: int) -> list[SyntheticCell]:
    story = story_cells(launches=2, rounds=2)
    out = []
    for i in range(n):
        cell = story[i % 2]
        pins = [*cell.definition["pins"], f"extra=={i}"]
        out.append(
            dataclasses.replace(cell, id=f"c{i}", definition={**cell.definition, "pins": pins})
        )
    return out


# ---------------------------------------------------------------------------------------
# 1. report


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = write_run(
        tmp_path_factory.mktemp("base") / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(launches=2, rounds=2),
        targets=["sm_120"],
        seed=7,
    )
    with guarded():
        assert main(["report", str(run)]) == 0  # the matrix files are targets too
    return run


@settings(SETTINGS, max_examples=50)
@given(data=st.data())
def test_a_hostile_run_is_a_report_or_exit_3(
    synthetic_run: Path, capsys: pytest.CaptureFixture[str], data: st.DataObject
) -> None:
    mutation = data.draw(mutations(tree(synthetic_run)), label="mutation")
    with sandbox() as box:
        run = box.copy(synthetic_run, "run")
        mutation.apply(run, box.outside_file, box.outside_dir)
        before = snapshot(box.root, skip=[run])
        answer(["report", str(run)], capsys, {0, 3})
        box.check_outside()
        assert snapshot(box.root, skip=[run]) == before


@pytest.fixture(scope="module")
def compacted_run(synthetic_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same run as a kept example holds it: check.json, server logs and request
    records compressed (scripts/compact-example.py)."""
    run = Path(shutil.copytree(synthetic_run, tmp_path_factory.mktemp("compacted") / "run"))
    path = Path(__file__).resolve().parents[2] / "scripts" / "compact-example.py"
    spec = importlib.util.spec_from_file_location("compact_example", path)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.compact(run)[0] > 0
    return run


@settings(SETTINGS, max_examples=40)
@given(data=st.data())
def test_a_hostile_compacted_run_is_a_report_or_exit_3(
    compacted_run: Path, capsys: pytest.CaptureFixture[str], data: st.DataObject
) -> None:
    targets = [p for p in tree(compacted_run) if p.endswith(".gz")]
    mutation = data.draw(mutations(targets), label="mutation")
    with sandbox() as box:
        run = box.copy(compacted_run, "run")
        mutation.apply(run, box.outside_file, box.outside_dir)
        before = snapshot(box.root, skip=[run])
        answer(["report", str(run)], capsys, {0, 3})
        box.check_outside()
        assert snapshot(box.root, skip=[run]) == before


# ---------------------------------------------------------------------------------------
# 2. merge


@pytest.fixture(scope="module")
def merge_pieces(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two CI pieces of one spec of four cells, two cells each."""
    root = tmp_path_factory.mktemp("pieces")
    full = write_run(root / "full", spec_name="m", baseline="c0", cells=_cells(4), seed=1)
    pieces = []
    for name, keep in (("p0", {"c0", "c1"}), ("p1", {"c2", "c3"})):
        piece = Path(shutil.copytree(full, root / name))
        for cell in (piece / "cells").iterdir():
            if cell.name not in keep:
                shutil.rmtree(cell)
        pieces.append(piece)
    with guarded():
        assert main(["merge", *map(str, pieces), "--output", str(root / "merged")]) == 0
    return pieces[0], pieces[1]


@settings(SETTINGS, max_examples=50)
@given(data=st.data())
def test_a_hostile_piece_is_a_merge_or_exit_3(
    merge_pieces: tuple[Path, Path], capsys: pytest.CaptureFixture[str], data: st.DataObject
) -> None:
    which = data.draw(st.integers(min_value=0, max_value=1), label="piece")
    mutation = data.draw(mutations(tree(merge_pieces[which])), label="mutation")
    with sandbox() as box:
        pieces = [box.copy(p, p.name) for p in merge_pieces]
        mutation.apply(pieces[which], box.outside_file, box.outside_dir)
        out = box.root / "merged"
        before = snapshot(box.root, skip=[out])  # the pieces included: they are only read
        # a piece that is no longer a directory is a usage error (2), as on the command line
        allowed = {0, 2, 3} if mutation.target == "." else {0, 3}
        rc, _ = answer(["merge", *map(str, pieces), "--output", str(out)], capsys, allowed)
        box.check_outside()
        assert snapshot(box.root, skip=[out]) == before
        assert rc == 0 or not os.path.lexists(out)


# ---------------------------------------------------------------------------------------
# 3. run --resume


CURRENT_SPEC = 'name = "hostile"\n\n[[cell]]\nid = "a"\nbackend = "current"\n'


@pytest.fixture(scope="module")
def current_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A run of one `backend = "current"` cell and no [bench]: builds and checks the
    interpreter running the tests, measures nothing, needs no network. The work dir is
    shared by the examples: its scan cache keeps a re-check short."""
    root = tmp_path_factory.mktemp("current")
    spec = root / "hostile.toml"
    spec.write_text(CURRENT_SPEC)
    run, work = root / "run", root / "work"
    with guarded():
        rc = main(
            [
                "run",
                str(spec),
                "--output",
                str(run),
                "--work-dir",
                str(work),
                "--reports-dir",
                str(root / "reports"),
            ]
        )
    assert rc == 0
    return spec, run, work


@settings(SETTINGS, max_examples=6)
@given(data=st.data())
def test_resuming_a_hostile_run_is_a_run_or_exit_3(
    current_run: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str], data: st.DataObject
) -> None:
    spec, base, work = current_run
    mutation = data.draw(mutations(tree(base)), label="mutation")
    with sandbox() as box:
        run = box.copy(base, "run")
        mutation.apply(run, box.outside_file, box.outside_dir)
        reports = box.root / "reports"
        before = snapshot(box.root, skip=[run])
        argv = [
            "run",
            str(spec),
            "--output",
            str(run),
            "--resume",
            "--work-dir",
            str(work),
            "--reports-dir",
            str(reports),
        ]
        answer(argv, capsys, {0, 3})
        box.check_outside()
        assert snapshot(box.root, skip=[run]) == before  # no history beside it either


# ---------------------------------------------------------------------------------------
# 4. explain --plan


@settings(SETTINGS, max_examples=40)
@given(data=st.data())
def test_planning_an_explanation_of_a_hostile_run_answers(
    synthetic_run: Path, capsys: pytest.CaptureFixture[str], data: st.DataObject
) -> None:
    mutation = data.draw(mutations(tree(synthetic_run)), label="mutation")
    with sandbox() as box:
        run = box.copy(synthetic_run, "run")
        mutation.apply(run, box.outside_file, box.outside_dir)
        before = snapshot(box.root, skip=[run])
        answer(["explain", str(run), "--cell", "cu130", "--plan"], capsys, {0, 2, 3})
        box.check_outside()
        assert snapshot(box.root, skip=[run]) == before


def test_the_mutations_reach_every_kind_of_path(synthetic_run: Path) -> None:
    """The base trees hold run files, cell directories and cell files alike."""
    paths = tree(synthetic_run)
    assert "." in paths and "cells" in paths and "run.json" in paths
    assert "cells/cu130" in paths and "cells/cu130/bench.json" in paths
    assert any(p.endswith(".log") for p in paths) and "matrix.json" in paths


def test_a_results_directory_that_is_a_link_or_someone_elses_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`run --resume --output RUN` with RUN a link to a directory outside (with files of
    its own and no run.json) adopted that directory and wrote a whole run into it."""
    spec = tmp_path / "s.toml"
    spec.write_text('name = "s"\n[[cell]]\nid = "a"\nbackend = "current"\n')
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept.txt").write_text("mine")
    (tmp_path / "run").symlink_to(outside)
    work = ["--work-dir", str(tmp_path / "w"), "--reports-dir", str(tmp_path / "r")]
    for output in (tmp_path / "run", outside):
        code = main(["run", str(spec), "--output", str(output), "--resume", *work])
        assert code == 3
        assert sorted(p.name for p in outside.iterdir()) == ["kept.txt"]
    assert "symbolic link" in capsys.readouterr().err


RECORDED_IDS = st.one_of(
    st.sampled_from(
        [
            "../../outside-dir",
            "..",
            ".",
            "/etc",
            "cu128/../cu130",
            "a\x1b[31mb",
            "x\n::error::y",
            "\u202eevil",
            "",
            " cu128",
        ]
    ),
    st.text(max_size=40),
)


@settings(SETTINGS, max_examples=40)
@given(cell_id=RECORDED_IDS, where=st.sampled_from(["run.json", "plan.json", "baseline"]))
def test_a_recorded_cell_id_is_a_report_or_exit_3(
    synthetic_run: Path, capsys: pytest.CaptureFixture[str], cell_id: str, where: str
) -> None:
    """Any id recorded in run.json's cells, plan.json's cells or run.json's baseline is
    held to the spec's id rule: a report or exit 3, nothing outside read or written, and
    no escape or workflow command of the id on the console."""
    import json

    with sandbox() as box:
        run = box.copy(synthetic_run, "run")
        doc = json.loads((run / "run.json").read_text())
        plan = json.loads((run / "plan.json").read_text())
        if where == "run.json":
            doc["cells"] = [*doc["cells"], cell_id]
        elif where == "plan.json":
            plan["cells"][0]["id"] = cell_id
        else:
            doc["baseline"] = cell_id
        (run / "run.json").write_text(json.dumps(doc))
        (run / "plan.json").write_text(json.dumps(plan))
        before = snapshot(box.root, skip=[run])
        _, err = answer(["report", str(run)], capsys, {0, 3})
        assert "\x1b" not in err and "\n::error::" not in err and "\u202e" not in err
        box.check_outside()
        assert snapshot(box.root, skip=[run]) == before
