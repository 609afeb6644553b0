"""scripts/compact-example.py: a kept results directory compressed gives the same report,
byte for byte, and nothing it needs is lost."""

from __future__ import annotations

import gzip
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from tests.support.synthetic import story_cells, write_run

from stackmatrix.cli import main

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ("matrix.md", "matrix.html", "matrix.json", "junit.xml")
ROUND = Path("explain") / "cu130" / "round-1"


def _script() -> ModuleType:
    path = ROOT / "scripts" / "compact-example.py"
    spec = importlib.util.spec_from_file_location("compact_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A results directory with server logs and request records, and an explanation
    round below it (a results directory too)."""
    cells = story_cells(launches=2, rounds=2)
    run = write_run(tmp_path / "run", spec_name="kimi", baseline="cu128", cells=cells, seed=3)
    shutil.copytree(run, tmp_path / "round")
    shutil.move(tmp_path / "round", run / ROUND)
    return run


def _report(results: Path, out: Path) -> dict[str, bytes]:
    assert main(["report", str(results), "--output", str(out)]) == 0
    return {name: (out / name).read_bytes() for name in REPORTS}


def _plain(results: Path) -> list[str]:
    patterns = ("check.json", "server-L*.log", "requests-*.jsonl")
    return sorted(p.name for pattern in patterns for p in results.glob(f"cells/*/{pattern}"))


def test_a_compacted_run_gives_the_same_report(run: Path, tmp_path: Path) -> None:
    before = _report(run, tmp_path / "before")
    round_before = _report(run / ROUND, tmp_path / "round-before")
    assert b"server log: \xe2\x80\x9c" in before["matrix.md"]  # a fact read from a log
    assert _plain(run) and _plain(run / ROUND)
    files, size_before, size_after = _script().compact(run)
    assert files > 0 and size_after < size_before
    assert _plain(run) == [] and _plain(run / ROUND) == []  # the round is compacted too
    assert list(run.glob("cells/*/check.json.gz")) and list(run.glob("cells/*/server-L*.gz"))
    assert _report(run, tmp_path / "after") == before
    assert _report(run / ROUND, tmp_path / "round-after") == round_before
    # the logs are read compressed: without them the report is another
    for log in run.glob("cells/*/server-L*.log.gz"):
        log.unlink()
    assert _report(run, tmp_path / "no-logs")["matrix.md"] != before["matrix.md"]


def test_compacting_again_changes_nothing(run: Path) -> None:
    script = _script()
    script.compact(run)
    packed = {p: p.read_bytes() for p in sorted(run.rglob("*.gz"))}
    assert script.compact(run) == (0, 0, 0)
    assert {p: p.read_bytes() for p in sorted(run.rglob("*.gz"))} == packed


def test_the_compressed_bytes_depend_on_the_content_only() -> None:
    data = b'{"schema_version": 1}\n' * 100
    packed = _script().pack(data)
    assert gzip.decompress(packed) == data
    assert packed[4:8] == b"\x00\x00\x00\x00" and packed[9] == 255  # no time, OS unknown
    assert packed[3] == 0  # no file name in the header


def test_small_build_and_bench_results_stay_as_written(
    run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _script()
    script.compact(run)
    assert list(run.glob("cells/*/bench.json")) and not list(run.glob("cells/*/bench.json.gz"))
    monkeypatch.setattr(script, "LARGE", 0)
    script.compact(run)
    assert not list(run.glob("cells/*/bench.json")) and list(run.glob("cells/*/bench.json.gz"))


def test_links_are_never_followed_nor_replaced(run: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    cell = run / "cells" / "cu128"
    (cell / "check.json").unlink()
    (cell / "check.json").symlink_to(outside)
    _script().compact(run)
    assert (cell / "check.json").is_symlink() and not (cell / "check.json.gz").exists()
    assert outside.read_text() == "{}"
    with pytest.raises(SystemExit, match="not a results directory"):
        _script().compact(tmp_path)


def test_compacted_pieces_merge_into_the_same_run(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept run split into pieces (as CI's jobs write them) merges compacted too: a
    cell whose build.json is compressed has arrived."""
    shutil.rmtree(run / "explain")
    pieces = []
    for keep in ("cu128", "cu130"):
        piece = Path(shutil.copytree(run, tmp_path / f"piece-{keep}"))
        for cell in (piece / "cells").iterdir():
            if cell.name != keep:
                shutil.rmtree(cell)
        pieces.append(piece)
    script = _script()
    monkeypatch.setattr(script, "LARGE", 0)  # build.json compressed too
    for piece in pieces:
        script.compact(piece)
    assert not list(tmp_path.glob("piece-*/cells/*/build.json"))
    merged = tmp_path / "merged"
    assert main(["merge", *map(str, pieces), "--output", str(merged)]) == 0
    assert _report(merged, tmp_path / "merged-report") == _report(run, tmp_path / "whole")


def test_a_link_where_the_temporary_file_goes_is_never_written_through(
    run: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("someone else's")
    cell = run / "cells" / "cu128"
    data = (cell / "check.json").read_bytes()
    (cell / "check.json.gz.tmp").symlink_to(outside)
    _script().compact(run)
    assert outside.read_text() == "someone else's"
    packed = cell / "check.json.gz"
    assert not packed.is_symlink() and gzip.decompress(packed.read_bytes()) == data
    assert (cell / "check.json.gz.tmp").is_symlink()  # not ours: left as it is


def test_a_target_that_is_a_link_or_a_directory_is_refused_leaving_no_tmp(
    run: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.gz"
    outside.write_bytes(b"outside")
    cell = run / "cells" / "cu128"
    (cell / "check.json.gz").symlink_to(outside)
    with pytest.raises(SystemExit, match=r"check\.json\.gz is there and is not a regular"):
        _script().compact(run)
    (cell / "check.json.gz").unlink()
    log = sorted(cell.glob("server-L*.log"))[0]
    (log.parent / f"{log.name}.gz").mkdir()
    with pytest.raises(SystemExit, match=rf"{log.name}\.gz is there and is not a regular"):
        _script().compact(run)
    assert outside.read_bytes() == b"outside" and log.is_file()
    assert not list(run.rglob("*.tmp"))


def test_a_large_sparse_log_is_compressed_without_reading_it_whole(tmp_path: Path) -> None:
    """A 512 MiB log under a 320 MiB address-space limit: read whole, it fails."""
    log = tmp_path / "server-L1.log"
    with log.open("wb") as fh:
        fh.truncate(512 << 20)
        fh.seek(0, 2)
        fh.write(b"end\n")
    script = str(ROOT / "scripts" / "compact-example.py")
    code = (
        "import resource, sys, importlib.util, pathlib\n"
        "resource.setrlimit(resource.RLIMIT_AS, (320 << 20, 320 << 20))\n"
        f"spec = importlib.util.spec_from_file_location('c', {script!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "print(m.compress(pathlib.Path(sys.argv[1])))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    packed = tmp_path / "server-L1.log.gz"
    assert not log.exists() and int(done.stdout) == packed.stat().st_size < 2 << 20
    with packed.open("rb") as fh:
        _, size = _script().unpacked(fh)
    assert size == (512 << 20) + 4
