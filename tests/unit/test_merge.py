"""merge on hand-built pieces: what it copies, what it refuses, and that it never
follows a link or writes outside --output."""

import gzip
import json
import os
import resource
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stackmatrix import _piececopy
from stackmatrix.cli import main
from stackmatrix.errors import ResultsError, Unreadable
from stackmatrix.merge import merge

CELLS = ("base", "new")


def _write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)


def _phase(cell: str, phase: str) -> dict[str, object]:
    return {
        "schema_version": 1,
        "phase": phase,
        "cell": cell,
        "status": "ok",
        "code": None,
        "message": "",
        "inputs_hash": "h",
        "started": "2026-01-01T00:00:00+00:00",
        "finished": "2026-01-01T00:00:01+00:00",
        "duration_s": 1.0,
        "findings": [],
        "data": {},
    }


def piece(root: Path, cell: str, *, plan_ids: tuple[str, ...] = CELLS) -> Path:
    """One CI job's results: the run files of the whole spec, and one cell."""
    run = {"schema_version": 1, "spec_name": "m", "spec_hash": "abc", "baseline": "base"}
    _write(root / "run.json", {**run, "stackmatrix_version": "0", "run_id": "ci:1"})
    _write(root / "plan.json", {"schema_version": 1, "cells": [{"id": i} for i in plan_ids]})
    _write(root / "spec.toml", 'name = "m"\n')
    _write(root / "workload.jsonl", '{"prompt": "p"}\n')
    _write(root / "workload.json", {"schema_version": 1, "hash": "w"})
    _write(root / "workload-c32.jsonl", '{"prompt": "q"}\n')  # a load point's workload
    slots = [{"cell": cell, "launch": k} for k in (1, 2)]
    _write(root / "bench-schedule.json", {"schema_version": 1, "order": "x", "slots": slots})
    _write(root / "cells" / cell / "build.json", _phase(cell, "build"))
    _write(root / "cells" / cell / "build.log", f"built {cell}\n")
    return root


@contextmanager
def small_files(limit: int = 1 << 24) -> Iterator[None]:
    """A copy that follows a link to /dev/zero fails (EFBIG) instead of filling the disk."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


@pytest.fixture
def pieces(tmp_path: Path) -> list[Path]:
    return [piece(tmp_path / "pieces" / c, c) for c in CELLS]


def test_merged_run_keeps_the_launch_schedule_of_every_piece(pieces, tmp_path):
    out = merge(pieces, tmp_path / "merged").path
    schedule = json.loads((out / "bench-schedule.json").read_text())
    assert [(s["cell"], s["launch"]) for s in schedule["slots"]] == [
        ("base", 1),
        ("base", 2),
        ("new", 1),
        ("new", 2),
    ]
    assert (out / "workload.json").is_file() and (out / "workload.jsonl").is_file()
    assert (out / "workload-c32.jsonl").read_text() == '{"prompt": "q"}\n'
    assert (out / "cells" / "new" / "build.log").read_text() == "built new\n"


def test_links_in_a_piece_are_skipped_never_read(pieces, tmp_path):
    outside = tmp_path / "private.txt"
    outside.write_text("do not copy me")
    cell = pieces[0] / "cells" / "base"
    (cell / "server-L1.log").symlink_to("/dev/zero")
    (cell / "check.log").symlink_to(outside)
    (cell / "sub").mkdir()
    (cell / "sub" / "loop").symlink_to(cell)
    os.mkfifo(cell / "requests-L1-R1.jsonl")
    with small_files():
        out = merge(pieces, tmp_path / "merged").path
    copied = out / "cells" / "base"
    assert (copied / "build.json").is_file() and (copied / "sub").is_dir()
    for name in ("server-L1.log", "check.log", "sub/loop", "requests-L1-R1.jsonl"):
        assert not os.path.lexists(copied / name), name
    skipped = json.loads((out / "run.json").read_text())["merge_skipped"]
    assert sorted(Path(p).name for p in skipped) == [
        "check.log",
        "loop",
        "requests-L1-R1.jsonl",
        "server-L1.log",
    ]
    assert not any("do not copy me" in p.read_text() for p in out.rglob("*") if p.is_file())


def test_a_linked_cell_directory_is_reported_missing_not_followed(pieces, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    (pieces[1] / "cells" / "new").rename(elsewhere)
    (pieces[1] / "cells" / "new").symlink_to(elsewhere, target_is_directory=True)
    out = merge(pieces, tmp_path / "merged").path
    build = json.loads((out / "cells" / "new" / "build.json").read_text())
    assert build["code"] == "artifact_missing" and "symbolic link" in build["message"]
    assert not (out / "cells" / "new" / "build.log").exists()


def test_a_linked_run_file_is_refused(pieces, tmp_path):
    (pieces[0] / "spec.toml").unlink()
    (pieces[0] / "spec.toml").symlink_to("/dev/zero")
    with small_files(), pytest.raises(Unreadable, match="symbolic link"):
        merge(pieces, tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_a_cell_id_that_climbs_out_of_the_output_is_refused(tmp_path):
    evil = ("base", "../../../escaped")
    pieces = [piece(tmp_path / "p" / c, c, plan_ids=evil) for c in CELLS]
    with pytest.raises(Unreadable, match="not a plain name"):
        merge(pieces, tmp_path / "a" / "b" / "merged")
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "a").exists()


def test_merge_onto_existing_results_is_refused(pieces, tmp_path, capsys):
    existing = merge(pieces, tmp_path / "merged").path
    before = (existing / "run.json").read_text()
    rc = main(["merge", *map(str, pieces), "--output", str(existing)])
    assert rc == 3
    err = capsys.readouterr().err
    assert "refusing to merge into" in err and "a results directory" in err
    assert (existing / "run.json").read_text() == before


def test_merge_into_one_of_its_pieces_is_refused_without_a_traceback(pieces, capsys):
    rc = main(["merge", *map(str, pieces), "--output", str(pieces[1])])
    assert rc == 3
    err = capsys.readouterr().err
    assert "is the piece" in err and "Traceback" not in err
    assert sorted(p.name for p in (pieces[1] / "cells").iterdir()) == ["new"]


def test_a_refused_merge_creates_no_output(pieces, tmp_path):
    # the same cell from two jobs: found only after the pieces were read and compared
    _write(pieces[1] / "cells" / "base" / "build.json", _phase("base", "build"))
    with pytest.raises(ResultsError, match="is in both"):
        merge(pieces, tmp_path / "merged")
    assert not (tmp_path / "merged").exists()
    assert not [p for p in tmp_path.iterdir() if "merging" in p.name]


def test_an_empty_output_directory_is_accepted(pieces, tmp_path):
    (tmp_path / "merged").mkdir()
    out = merge(pieces, tmp_path / "merged").path
    assert (out / "run.json").is_file()


JSON = st.recursive(
    st.booleans() | st.integers() | st.floats() | st.text(max_size=6) | st.none(),
    lambda i: st.lists(i, max_size=3) | st.dictionaries(st.text(max_size=6), i, max_size=3),
    max_leaves=10,
)
FILES = st.sampled_from(["run.json", "plan.json", "bench-schedule.json", "cells/base/build.json"])
KEYS = st.sampled_from(["", "cells", "slots", "spec_name", "run_id", "report", "data"])


@settings(max_examples=60, deadline=None)
@given(name=FILES, key=KEYS, value=JSON)
def test_any_json_in_a_piece_is_a_merge_or_exit_3(tmp_path_factory, name, key, value):
    """Any JSON in a piece's run files, at the top or under a key merge reads: a merged
    run, or exit 3 with no output left behind (1000 examples pass; 60 run here)."""
    root = tmp_path_factory.mktemp("pieces")
    pieces = [piece(root / c, c) for c in CELLS]
    path = pieces[0] / name
    data = json.loads(path.read_text())
    if key:
        data[key] = value
    path.write_text(json.dumps(value if not key else data))
    out = root / "merged"
    rc = main(["merge", *map(str, pieces), "--output", str(out)])
    assert rc in (0, 3)
    assert rc == 0 or not out.exists()


def test_merge_reads_the_results_layout_not_the_bench() -> None:
    """File names come from layout.py: merging CI pieces loads none of bench/."""
    import subprocess
    import sys

    code = (
        "import sys, stackmatrix.merge\n"
        "print([m for m in sys.modules if m.split('.')[:2] == ['stackmatrix', 'bench']])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_huge_sparse_server_log_is_copied_as_its_end(pieces, tmp_path):
    log = pieces[0] / "cells" / "base" / "server-L1.log"
    with log.open("wb") as fh:
        fh.truncate(1 << 30)  # sparse: 1 GiB that takes no disk
        fh.seek((1 << 30) - 6)
        fh.write(b"ended\n")
    with small_files(80 << 20):  # a whole copy fails (EFBIG) instead of filling the disk
        out = merge(pieces, tmp_path / "merged").path
    copied = out / "cells" / "base" / "server-L1.log"
    with copied.open("rb") as fh:
        first = fh.readline()
    assert b"only its last 64 MiB were copied" in first
    assert copied.stat().st_size == len(first) + (64 << 20)
    assert copied.read_bytes().endswith(b"ended\n")


def test_a_plan_over_the_cell_limit_is_refused(tmp_path, capsys):
    ids = tuple(f"c{k}" for k in range(5000))
    pieces = [piece(tmp_path / "pieces" / c, c, plan_ids=ids) for c in ("c0", "c1")]
    out = tmp_path / "merged"
    assert main(["merge", *map(str, pieces), "--output", str(out)]) == 3
    assert "5000 cells, over the 1000" in capsys.readouterr().err
    assert not out.exists()


def test_pieces_with_other_plans_are_refused(pieces, tmp_path, capsys):
    piece(pieces[1], "new", plan_ids=(*CELLS, "extra"))
    out = tmp_path / "merged"
    assert main(["merge", *map(str, pieces), "--output", str(out)]) == 3
    assert "list other cells" in capsys.readouterr().err
    assert not out.exists()


def _planned(root: Path, cell: str, **entry: object) -> None:
    plan = json.loads((root / "plan.json").read_text())
    plan["cells"] = [{**c, **entry} if c["id"] == cell else c for c in plan["cells"]]
    (root / "plan.json").write_text(json.dumps(plan))


@pytest.mark.parametrize(
    ("first", "second", "said"),
    [
        (
            {"content_hash": "a" * 64},
            {"content_hash": "b" * 64},
            f"content_hash {'a' * 12} vs {'b' * 12}",
        ),
        (
            {"definition": {"pins": ["x==1"], "python": "3.11"}},
            {"definition": {"pins": ["x==2"], "python": "3.11"}},
            "definition: pins",
        ),
        ({"run_hash": "r1"}, {}, "run_hash"),
    ],
)
def test_pieces_that_plan_a_cell_otherwise_are_refused(
    pieces, tmp_path, capsys, first, second, said
):
    """The merged plan is the first piece's: it described only that piece's cells."""
    for root in pieces:
        _planned(root, "new", content_hash="c" * 64, run_hash="r0", definition={"id": "new"})
    _planned(pieces[0], "new", **first)
    _planned(pieces[1], "new", **second)
    out = tmp_path / "merged"
    assert main(["merge", *map(str, pieces), "--output", str(out)]) == 3
    err = capsys.readouterr().err
    assert "cell 'new' is planned otherwise" in err and said in err
    assert str(pieces[1] / "plan.json") in err
    assert not out.exists()


def test_a_cell_outside_the_plan_is_refused(pieces, tmp_path, capsys):
    piece(pieces[1], "stray")
    out = tmp_path / "merged"
    assert main(["merge", *map(str, pieces), "--output", str(out)]) == 3
    assert "does not list" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("name", ["run.json", "plan.json", "bench-schedule.json"])
def test_a_piece_file_nested_100000_deep_is_refused_without_a_traceback(
    pieces, tmp_path, capsys, name
):
    (pieces[1] / name).write_text("[" * 100_000 + "]" * 100_000)  # was RecursionError
    rc = main(["merge", *map(str, pieces), "--output", str(tmp_path / "merged")])
    assert rc == 3
    err = capsys.readouterr().err
    assert f"{pieces[1] / name}: arrays and objects nested more than 64 deep" in err
    assert not (tmp_path / "merged").exists()


@pytest.mark.parametrize("name", ["run.json", "plan.json"])
def test_a_piece_of_a_newer_schema_version_is_refused(pieces, tmp_path, capsys, name):
    data = json.loads((pieces[1] / name).read_text())
    (pieces[1] / name).write_text(json.dumps({**data, "schema_version": 99}))
    rc = main(["merge", *map(str, pieces), "--output", str(tmp_path / "merged")])
    assert rc == 3
    assert f"{pieces[1] / name} has schema_version 99" in capsys.readouterr().err
    assert not (tmp_path / "merged").exists()


def test_a_server_log_left_in_clear_is_copied_redacted(pieces, tmp_path):
    """A server killed with SIGKILL mid-bench leaves its log as it printed it (sglang's
    ServerArgs with api_key): the merged copy, plain or compressed, hides it."""
    cell = pieces[0] / "cells" / "base"
    printed = b"ServerArgs(model_path='m', api_key='plain-key-7781', tp_size=8)\nready\n"
    (cell / "server-L1.log").write_bytes(printed)
    (cell / "server-L2.log.gz").write_bytes(gzip.compress(printed))
    out = merge(pieces, tmp_path / "merged").path / "cells" / "base"
    shown = b"ServerArgs(model_path='m', api_key='<redacted>', tp_size=8)\nready\n"
    assert (out / "server-L1.log").read_bytes() == shown
    assert gzip.decompress((out / "server-L2.log.gz").read_bytes()) == shown


@pytest.mark.parametrize("name", ["server-L1.log.gz", "requests-L1-R1.jsonl.gz"])
def test_a_sparse_compressed_file_is_copied_without_its_padding(pieces, tmp_path, name):
    """300 MiB of zero padding (a few kB on disk) used to be written out whole."""
    content = b"".join(b'{"line": %d, "api": "x"}\n' % i for i in range(1000))
    packed = pieces[0] / "cells" / "base" / name
    packed.write_bytes(gzip.compress(content))
    with packed.open("ab") as fh:
        fh.truncate(300 << 20)
    with small_files(8 << 20):  # a whole copy fails (EFBIG) instead of filling the disk
        out = merge(pieces, tmp_path / "merged").path
    copied = out / "cells" / "base" / name
    assert copied.stat().st_size < 64 << 10
    assert gzip.decompress(copied.read_bytes()) == content


def test_a_compressed_log_over_the_copy_limit_is_copied_as_its_end(pieces, tmp_path, monkeypatch):
    monkeypatch.setattr(_piececopy, "LOG_COPY_LIMIT", 1000)
    lines = b"".join(b"line %05d\n" % i for i in range(1000))
    (pieces[0] / "cells" / "base" / "server-L1.log.gz").write_bytes(gzip.compress(lines))
    out = merge(pieces, tmp_path / "merged").path / "cells" / "base" / "server-L1.log.gz"
    first, rest = gzip.decompress(out.read_bytes()).split(b"\n", 1)
    assert b"was 11000 bytes; only its last 0 MiB were copied" in first
    assert rest == lines[-1000:]


def test_a_damaged_compressed_file_is_copied_as_it_is(pieces, tmp_path):
    damaged = gzip.compress(b"x" * 5000)[:-7]
    (pieces[0] / "cells" / "base" / "requests-L1-R1.jsonl.gz").write_bytes(damaged)
    out = merge(pieces, tmp_path / "merged").path / "cells" / "base"
    assert (out / "requests-L1-R1.jsonl.gz").read_bytes() == damaged
