from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from stackmatrix import _atomic, results
from stackmatrix.errors import ResultsError, Unreadable
from stackmatrix.findings import Finding, Severity, worst
from stackmatrix.results import PhaseResult, RunDir, Status


def test_phase_result_round_trip(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    finding = Finding(code="SM-X", severity=Severity.WARN, message="m", cell="a", subject="s")
    result = PhaseResult(
        phase="build",
        cell="a",
        status=Status.OK,
        inputs_hash="h",
        findings=[finding],
        data={"k": [1]},
        finished="t",
    )
    path = run.cell("a").write(result)
    raw = json.loads(path.read_text())
    assert raw["schema_version"] == 1 and raw["findings"][0]["severity"] == "warn"
    back = run.cell("a").read("build")
    assert back is not None and back.findings == [finding] and back.complete
    assert run.cell_ids() == ["a"]


def test_failed_and_interrupted_results_are_not_reused() -> None:
    for status in (Status.FAILED, Status.INTERRUPTED):
        assert not PhaseResult(
            phase="b", cell="a", status=status, inputs_hash="", finished="t"
        ).complete
    assert not PhaseResult(phase="b", cell="a", status=Status.OK, inputs_hash="").complete


def test_unknown_schema_version_is_refused(tmp_path: Path) -> None:
    cell = RunDir(tmp_path).cell("a")
    _atomic.write_json(cell.result_path("build"), {"schema_version": 99, "phase": "build"})
    with pytest.raises(Unreadable, match="schema_version 99"):
        cell.read("build")
    cell.result_path("check").write_text("{not json")
    with pytest.raises(Unreadable, match="cannot read"):
        cell.read("check")


def test_missing_run_json_is_explained(tmp_path: Path) -> None:
    with pytest.raises(Unreadable, match="not a stackmatrix results directory"):
        RunDir(tmp_path).read_run()


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    _atomic.write_json(target, {"a": 1})
    _atomic.write_json(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_worst_severity() -> None:
    f = [
        Finding(code="A", severity=Severity.INFO, message=""),
        Finding(code="B", severity=Severity.WARN, message=""),
    ]
    assert worst(f) is Severity.WARN and worst([]) is None


def test_an_unreadable_phase_result_names_its_file(tmp_path: Path) -> None:
    # a bench.json of another schema version, met on resume
    cell = RunDir(tmp_path).cell("a")
    path = cell.result_path("bench")
    _atomic.write_json(path, {"schema_version": 2, "phase": "bench"})
    with pytest.raises(Unreadable, match=f"^{path}: phase result has schema_version 2"):
        cell.read("bench")
    _atomic.write_json(path, {"schema_version": 1, "cell": "a", "status": "ok"})
    with pytest.raises(Unreadable, match=f"^{path}: phase result has no 'phase'"):
        cell.read("bench")


def _result(phase: str, message: str = "") -> PhaseResult:
    return PhaseResult(
        phase=phase,
        cell="a",
        status=Status.OK,
        inputs_hash="h",
        finished="t",
        message=message,
        data={"extensions": [{"path": f"lib{i}.so"} for i in range(50)]},
    )


def _compress(path: Path) -> Path:
    """`path` replaced by its compressed copy, as scripts/compact-example.py does."""
    packed = path.with_name(path.name + ".gz")
    packed.write_bytes(gzip.compress(path.read_bytes(), compresslevel=9, mtime=0))
    path.unlink()
    return packed


def test_a_compressed_result_reads_as_the_result_written(tmp_path: Path) -> None:
    cell = RunDir(tmp_path).cell("a")
    written = _result("check")
    packed = _compress(cell.write(written))
    assert cell.stored_result("check") == packed and not cell.result_path("check").exists()
    assert cell.read("check") == written
    assert cell.read_to_resume("check") == written
    assert cell.read("bench") is None and cell.stored_result("bench") is None


def test_the_result_as_written_is_read_before_a_compressed_copy(tmp_path: Path) -> None:
    cell = RunDir(tmp_path).cell("a")
    _compress(cell.write(_result("check", "old")))
    _atomic.write_json(cell.result_path("check"), _result("check", "new").to_dict())
    assert cell.stored_result("check") == cell.result_path("check")
    back = cell.read("check")
    assert back is not None and back.message == "new"


def test_writing_a_result_removes_its_stale_compressed_copy(tmp_path: Path) -> None:
    cell = RunDir(tmp_path).cell("a")
    packed = _compress(cell.write(_result("bench", "old")))
    cell.write(_result("bench", "new"))
    assert not packed.exists()
    back = cell.read("bench")
    assert back is not None and back.message == "new"
    # a stale copy that is a link: the link goes, what it points to stays
    outside = tmp_path / "outside.gz"
    outside.write_bytes(b"kept")
    packed.symlink_to(outside)
    cell.write(_result("bench", "newer"))
    assert not os.path.lexists(packed) and outside.read_bytes() == b"kept"


def test_a_gzip_bomb_is_refused_before_it_fills_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(results, "RESULT_LIMIT", 1 << 20)
    cell = RunDir(tmp_path).cell("a")
    bomb = cell.path / "check.json.gz"
    stream = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip: 64 MiB of spaces in ~64 KiB
    bomb.write_bytes(
        b"".join(stream.compress(b" " * (1 << 20)) for _ in range(64)) + stream.flush()
    )
    assert bomb.stat().st_size < 1 << 20
    with pytest.raises(Unreadable, match=f"^{bomb} expands to more than 1 MiB"):
        cell.read("check")


@pytest.mark.parametrize(
    "damage", [lambda b: b[: len(b) // 2], lambda b: b"\x1f\x8b" + b"\x00" * 30, lambda b: b"{}"]
)
def test_a_damaged_compressed_result_is_refused(
    tmp_path: Path, damage: Callable[[bytes], bytes]
) -> None:
    cell = RunDir(tmp_path).cell("a")
    packed = _compress(cell.write(_result("check")))
    packed.write_bytes(damage(packed.read_bytes()))
    with pytest.raises(Unreadable, match=f"cannot read {packed}: not a whole gzip file"):
        cell.read("check")


def test_a_compressed_result_that_is_a_link_or_a_fifo_is_refused(tmp_path: Path) -> None:
    cell = RunDir(tmp_path).cell("a")
    source = tmp_path / "outside.json"
    _atomic.write_json(source, _result("check").to_dict())
    outside = _compress(source)
    (cell.path / "check.json.gz").symlink_to(outside)
    with pytest.raises(Unreadable, match="symbolic link"):
        cell.read("check")
    with pytest.raises(ResultsError, match=re.escape("check.json.gz is not a regular file")):
        RunDir(tmp_path).check_layout(["a"], ["check"])
    os.mkfifo(cell.path / "bench.json.gz")
    with pytest.raises(Unreadable, match="not a regular file"):
        cell.read("bench")  # and does not hang on the FIFO
