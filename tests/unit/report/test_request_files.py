"""Request records, plain or gzip-compressed: the report reads both alike, and a
compressed file cannot make it read without end."""

import gzip
import json
import time
from pathlib import Path

import pytest

from stackmatrix.report import load
from stackmatrix.report.load import load_run, read_requests

from .test_corrupt_results import results

RECORDS = [
    {"ttft_s": 0.04 + i / 1000, "itl_s": [0.02], "e2e_s": 0.5, "output_tokens": 9} for i in range(5)
]


def _write(path: Path, records: list[dict[str, object]]) -> None:
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))


def test_a_compressed_round_reads_as_the_plain_one(tmp_path: Path) -> None:
    plain = tmp_path / "requests-L1-R1.jsonl"
    _write(plain, RECORDS)
    packed = tmp_path / "requests-L1-R1.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert list(read_requests(packed)) == list(read_requests(plain)) == RECORDS


def test_the_report_finds_the_compressed_copy(tmp_path: Path) -> None:
    rd = results(tmp_path)
    plain = rd / "cells" / "a" / "requests-L0-R0.jsonl"
    before = [list(read_requests(p)) for p in _cell(rd, "a").request_files()]
    (plain.parent / f"{plain.name}.gz").write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    found = list(_cell(rd, "a").request_files())
    assert [p.name for p in found] == ["requests-L0-R0.jsonl.gz"]
    assert [list(read_requests(p)) for p in found] == before and before[0]


def test_a_file_that_expands_without_end_is_cut_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(load, "REQUESTS_LIMIT", 1 << 20)
    line = json.dumps(RECORDS[0]).encode() + b"\n"
    bomb = tmp_path / "requests-L1-R1.jsonl.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as fh:
        for _ in range(30):  # 30 times the limit
            fh.write(line * ((1 << 20) // len(line) + 1))
    assert bomb.stat().st_size < 1 << 20  # smaller than the limit, 30 times it unpacked
    assert sum(1 for _ in read_requests(bomb)) == (1 << 20) // len(line)


def test_a_damaged_compressed_file_ends_its_records(tmp_path: Path) -> None:
    data = gzip.compress(b"".join(json.dumps(r).encode() + b"\n" for r in RECORDS * 200))
    bad = tmp_path / "requests-L1-R1.jsonl.gz"
    bad.write_bytes(data[: len(data) // 2])
    got = list(read_requests(bad))
    assert 0 < len(got) < len(RECORDS) * 200


def test_a_sparse_compressed_file_is_too_large_at_once(tmp_path: Path) -> None:
    """64 GiB of zero padding after the records (72 kB on disk): the report used to read
    it to its end (gzip skips padding a byte at a time), and never ended."""
    rd = results(tmp_path)
    plain = rd / "cells" / "a" / "requests-L0-R0.jsonl"
    packed = plain.parent / f"{plain.name}.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    with packed.open("ab") as fh:
        fh.truncate(64 << 30)
    started = time.monotonic()
    cell = _cell(rd, "a")
    assert list(read_requests(packed)) == []
    assert time.monotonic() - started < 5.0
    [why] = [p for p in cell.problems if "requests-L0-R0.jsonl.gz" in p]
    assert "is too large" in why and "not read" in why


def _cell(rd: Path, cell_id: str):  # type: ignore[no-untyped-def]
    return next(c for c in load_run(rd).cells if c.id == cell_id)
