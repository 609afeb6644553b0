"""Compressed files of a kept example read as the files they replace: bounded, never
through a link (stackmatrix._nofollow)."""

from __future__ import annotations

import gzip
import os
import time
import zlib
from pathlib import Path

import pytest

from stackmatrix import _nofollow
from stackmatrix.errors import Unreadable
from stackmatrix.report.load import CellResults

LOG = b"".join(b"line %d: max_total_num_tokens=%d\n" % (i, i) for i in range(5000))


def _gz(path: Path, data: bytes) -> Path:
    path.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    return path


@pytest.mark.parametrize("limit", [0, 1000, 40_000, len(LOG), len(LOG) + 1, 1 << 20])
def test_the_ends_of_a_compressed_log_are_the_ends_of_the_log(tmp_path: Path, limit: int) -> None:
    plain = tmp_path / "server-L1.log"
    plain.write_bytes(LOG)
    packed = _gz(tmp_path / "server-L2.log.gz", LOG)
    assert _nofollow.read_ends(packed, limit=limit) == _nofollow.read_ends(plain, limit=limit)


def test_a_compressed_log_that_expands_without_end_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_nofollow, "GZIP_EXPAND_LIMIT", 1 << 20)
    stream = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = tmp_path / "server-L1.log.gz"
    bomb.write_bytes(b"".join(stream.compress(b"x" * (1 << 20)) for _ in range(8)) + stream.flush())
    with pytest.raises(Unreadable, match="expands to more than 1 MiB"):
        _nofollow.read_ends(bomb, limit=1000)


def test_a_compressed_file_larger_than_its_limit_is_not_decompressed(tmp_path: Path) -> None:
    # gzip skips zero padding after a member byte by byte: a sparse file would never end
    packed = _gz(tmp_path / "check.json.gz", b"{}")
    with packed.open("ab") as fh:
        fh.truncate(1 << 30)
    with pytest.raises(Unreadable, match="is too large: over 1 MiB"):
        _nofollow.read_json(packed, limit=1 << 20)


def test_zero_padding_after_a_member_is_skipped_fast(tmp_path: Path) -> None:
    """Python's gzip skips it a byte at a time (200 MiB of it: about 20 s); it is read a
    chunk at a time, and a second member after it is still read."""
    packed = _gz(tmp_path / "server-L1.log.gz", b"first\n")
    with packed.open("ab") as fh:
        fh.truncate(200 << 20)  # sparse: 200 MiB of zeros on 4 kB of disk
        fh.seek(0, os.SEEK_END)
        fh.write(gzip.compress(b"second\n"))
    started = time.monotonic()
    assert _nofollow.read_ends(packed, limit=1 << 20) == b"first\nsecond\n"
    assert time.monotonic() - started < 8.0


def test_read_json_reads_a_gz_decompressed_and_a_plain_file_as_it_is(tmp_path: Path) -> None:
    assert _nofollow.read_json(_gz(tmp_path / "a.json.gz", b'{"a": 1}')) == {"a": 1}
    (tmp_path / "b.json").write_bytes(b'{"b": 2}')
    assert _nofollow.read_json(tmp_path / "b.json") == {"b": 2}
    link = tmp_path / "c.json.gz"
    link.symlink_to(tmp_path / "a.json.gz")
    with pytest.raises(Unreadable, match="symbolic link"):
        _nofollow.read_json(link)


def test_a_cell_s_server_logs_are_each_read_once_written_or_compressed(tmp_path: Path) -> None:
    (tmp_path / "server-L1.log").write_bytes(b"plain")
    _gz(tmp_path / "server-L1.log.gz", b"stale copy")  # the log as written wins
    _gz(tmp_path / "server-L2.log.gz", b"compressed")
    (tmp_path / "server-L3.log.gz").symlink_to(tmp_path / "server-L2.log.gz")
    os.mkfifo(tmp_path / "server-L4.log.gz")
    cell = CellResults(id="a", path=tmp_path)
    assert [p.name for p in cell.server_logs()] == ["server-L1.log", "server-L2.log.gz"]
