"""What `merge` copies of a piece's cell: never through a link (`_nofollow`), bounded on
disk, and a server log redacted.

A piece is a CI artifact: its files may be sparse (holes and zero padding that a plain
copy writes out in full), gzip bombs, or logs of a server killed before its own log was
rewritten redacted (SIGKILL mid-bench). So:

- `server-L*.log`: at most its last LOG_COPY_LIMIT bytes, after a line saying so, each
  line through the redaction of every log (`_secrets.redact_text`);
- `server-L*.log.gz`: the same of its decompressed content (decompressed up to
  GZIP_EXPAND_LIMIT), compressed again;
- any other `.gz` (request records, phase results): its decompressed content up to
  what its readers read (`_nofollow.DEFAULT_LIMIT`), compressed again, so zero padding
  and holes are not copied (one over GZIP_EXPAND_LIMIT on disk is not copied);
- any other file: at most its first DEFAULT_LIMIT bytes (more is read by no reader).

A `.gz` that is not whole gzip is copied as it is when at most DEFAULT_LIMIT bytes (its
readers say what is wrong with it), else not at all: its readers refuse it too.
"""

from __future__ import annotations

import fnmatch
import gzip
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from stackmatrix import _nofollow, layout
from stackmatrix._secrets import redact_text
from stackmatrix.errors import Unreadable

log = logging.getLogger(__name__)
LOG_COPY_LIMIT = 64 << 20  # the end of a server log is what tells why it stopped
_LINE = 1 << 20  # redacted a line, or this many bytes of one, at a time


def copy(src: Path, dst: Path, relative: Path) -> bool:
    """Copy `src` (at `relative` in its cell) to a new `dst`; whether it was cut."""
    name = relative.name
    if fnmatch.fnmatch(name, layout.SERVER_LOG_GLOB):
        return _copy_log(src, dst)
    if fnmatch.fnmatch(name, layout.compressed(layout.SERVER_LOG_GLOB)):
        return _copy_gz(src, dst, log_tail=True)
    if name.endswith(layout.COMPRESSED_SUFFIX):
        return _copy_gz(src, dst, log_tail=False)
    return _nofollow.copy_file(src, dst, head=_nofollow.DEFAULT_LIMIT)


def _copy_log(src: Path, dst: Path) -> bool:
    with os.fdopen(_nofollow.open_regular(src), "rb") as fin:
        st = os.fstat(fin.fileno())
        cut = st.st_size > LOG_COPY_LIMIT
        with _nofollow.create_new(dst, st) as fout:
            if cut:
                fout.write(_cut_line(src, st.st_size))
                fin.seek(st.st_size - LOG_COPY_LIMIT)
            for line in _lines(fin, LOG_COPY_LIMIT):
                fout.write(_redacted(line))
    _nofollow.keep_times(dst, st)
    return cut


def _lines(fh: BinaryIO, left: int) -> Iterator[bytes]:
    while left > 0 and (line := fh.readline(min(_LINE, left))):
        left -= len(line)
        yield line


def _redacted(line: bytes) -> bytes:
    text = line.decode("utf-8", "surrogateescape")
    hidden = redact_text(text)
    return line if hidden == text else hidden.encode("utf-8", "surrogateescape")


def _cut_line(src: Path, size: int) -> bytes:
    return (
        f"[stackmatrix: {src.name} was {size} bytes; only its last "
        f"{LOG_COPY_LIMIT >> 20} MiB were copied]\n"
    ).encode()


def _copy_gz(src: Path, dst: Path, *, log_tail: bool) -> bool:
    """Decompressed, bounded (and for a log, redacted), compressed again; one that
    cannot be decompressed is copied as it is, at most DEFAULT_LIMIT bytes of it."""
    st = os.lstat(src)
    try:
        with (
            _nofollow.create_new(dst, st) as fout,
            gzip.GzipFile(fileobj=fout, mode="wb", mtime=int(st.st_mtime)) as packed,
        ):
            cut = _write_log_tail(src, packed) if log_tail else _write_head(src, packed)
    except Unreadable as exc:
        dst.unlink(missing_ok=True)
        if st.st_size > _nofollow.DEFAULT_LIMIT:  # its readers refuse it as too large
            log.warning("%s; not copied", exc.message)
            return True
        log.warning("%s; copied as it is", exc.message)
        return _nofollow.copy_file(src, dst)
    _nofollow.keep_times(dst, st)
    return cut


def _write_head(src: Path, packed: gzip.GzipFile) -> bool:
    left = _nofollow.DEFAULT_LIMIT
    for chunk in _nofollow.gunzip_file(src, limit=_nofollow.GZIP_EXPAND_LIMIT):
        packed.write(chunk[:left])
        left -= len(chunk)
        if left < 0:
            return True
    return False


def _write_log_tail(src: Path, packed: gzip.GzipFile) -> bool:
    tail, size = bytearray(), 0
    for chunk in _nofollow.gunzip_file(src, limit=_nofollow.GZIP_EXPAND_LIMIT):
        size += len(chunk)
        if size > _nofollow.GZIP_EXPAND_LIMIT:
            raise Unreadable(f"{src} expands to more than a server log can be")
        tail += chunk
        if len(tail) > 2 * LOG_COPY_LIMIT:  # trimmed now and then, not at every chunk
            del tail[: len(tail) - LOG_COPY_LIMIT]
    cut = size > LOG_COPY_LIMIT
    if cut:
        packed.write(_cut_line(src, size))
        del tail[: len(tail) - LOG_COPY_LIMIT]
    with memoryview(tail) as view:
        start = 0
        while start < len(view):
            end = tail.find(b"\n", start, start + _LINE) + 1 or min(len(view), start + _LINE)
            packed.write(_redacted(bytes(view[start:end])))
            start = end
    return cut
