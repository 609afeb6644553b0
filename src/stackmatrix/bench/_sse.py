"""A small HTTP/1.1 client for one streaming POST, timestamping every line on arrival.

Why our own: a general client (aiohttp) hands the body to the request's task, which
runs one event-loop pass after the bytes arrived; at tens of thousands of chunks a
second that pass is busy with other streams, and a timestamp taken there was off by
0.1-0.2 ms. Here the protocol's `data_received` reads the
clock first, then decodes the response (status line, headers, chunked or
length-delimited or close-delimited body) and hands each complete line, with the time
its last byte arrived, to a callback, in the same call. No task wakes up per chunk.

Which clock says when bytes arrived, best first:
- on Linux, for plain http, the kernel's receive timestamp of the packet
  (SO_TIMESTAMPNS, read with recvmsg): when it reached our socket, however late
  the event loop got to it. A read that returns several packets carries the last
  one's time (the time the last byte arrived);
- on a loop made by `stamping_loop()`, when the selector returned, the same for
  every connection that became readable together: otherwise a connection served
  last in a busy pass would be stamped after all the others were decoded;
- else the clock when `data_received` ran.
(Those clocks, and the socket read with kernel timestamps, live in `_arrival`.)

One connection per request (`Connection: close`), as `sglang.bench_serving` opens a
session per request; no redirects, no proxies, no compression, no keep-alive.
"""

from __future__ import annotations

import asyncio
import enum
import ssl
from collections.abc import Callable
from urllib.parse import urlsplit

from stackmatrix.bench._arrival import KERNEL_STAMPS, clock_of, post_stamped
from stackmatrix.bench._arrival import stamping_loop as stamping_loop

_KERNEL_STAMPS = KERNEL_STAMPS  # the name tests/unit/bench/test_bench_sse.py reads

# (line without its newline, perf_counter() when its last byte arrived) -> stop now?
LineSink = Callable[[bytes, float], bool]

HEAD_LIMIT = 64 * 1024
ERROR_BODY_LIMIT = 4096


class ResponseError(Exception):
    """The server's bytes were not a complete HTTP/1.1 response."""


class StatusError(ResponseError):
    """The server answered with a status other than 200; `text` is its body's start."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text}")
        self.status = status
        self.text = text


class _Part(enum.Enum):
    HEAD = enum.auto()
    CHUNK_SIZE = enum.auto()
    CHUNK_DATA = enum.auto()
    CHUNK_END = enum.auto()
    TRAILER = enum.auto()
    LENGTH = enum.auto()
    UNTIL_CLOSE = enum.auto()
    DONE = enum.auto()


async def post_lines(url: str, body: bytes, on_line: LineSink) -> None:
    """POST `body` (JSON) to `url` and feed the 200 response's body lines to `on_line`.

    Returns when the body ends or `on_line` returns True. Raises StatusError for
    another status, ResponseError for a broken response, OSError when it cannot
    connect, and whatever `on_line` raises.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    tls = ssl.create_default_context() if parts.scheme == "https" else None
    port = parts.port or (443 if tls else 80)
    loop = asyncio.get_running_loop()
    clock = clock_of(loop)
    done: asyncio.Future[None] = loop.create_future()
    request = _request(parts.path or "/", parts.netloc.rpartition("@")[2], body)
    if tls is None and KERNEL_STAMPS and isinstance(loop, asyncio.SelectorEventLoop):
        await post_stamped(
            loop, parts.hostname, port, request, _Response(b"", on_line, done, clock)
        )
        return
    transport, _ = await loop.create_connection(
        lambda: _Response(request, on_line, done, clock), parts.hostname, port, ssl=tls
    )
    try:
        await done
    finally:
        transport.close()


def _request(path: str, host: str, body: bytes) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: stackmatrix\r\n"
        "Accept: text/event-stream\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


class _Response(asyncio.Protocol):
    def __init__(
        self,
        request: bytes,
        on_line: LineSink,
        done: asyncio.Future[None],
        clock: Callable[[], float],
    ) -> None:
        self._request = request
        self._clock = clock
        self._on_line = on_line
        self._done = done
        self._transport: asyncio.BaseTransport | None = None
        self._buf = bytearray()
        self._part = _Part.HEAD
        self._left = 0  # bytes left in the current chunk or the whole body
        self._line = b""  # the body's unfinished last line
        self._status = 0
        self._error_body = bytearray()

    @property
    def done(self) -> asyncio.Future[None]:
        return self._done

    def clock(self) -> float:
        return self._clock()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        transport.write(self._request)

    def data_received(self, data: bytes) -> None:
        self.feed(data, self._clock())  # first: this is the arrival time of these bytes

    def feed(self, data: bytes, now: float) -> None:
        """Decode `data`, which arrived at `now`."""
        if self._done.done():
            return
        try:
            if self._part is _Part.CHUNK_SIZE and not self._buf:
                data = self._whole_chunks(data, now)
            self._buf += data
            while self._part is not _Part.DONE and self._step(now):
                pass
        except Exception as exc:  # handed to the awaiting task, not lost
            self._fail(exc)

    def eof_received(self) -> bool | None:
        return None  # close the transport; connection_lost decides what it meant

    def connection_lost(self, exc: Exception | None) -> None:
        if self._done.done():
            return
        if self._part is _Part.UNTIL_CLOSE:
            self._finish(self._clock())
            return
        where = "before answering" if self._part is _Part.HEAD else "mid-response"
        reason = f" ({type(exc).__name__}: {exc})" if exc else ""
        self._fail(ResponseError(f"the server dropped the connection {where}{reason}"))

    def _whole_chunks(self, data: bytes, now: float) -> bytes:
        """The common case, without copying: the complete chunks at the front of
        `data` (a token or a few per read); returns the rest for the general path."""
        pos = 0
        while self._part is _Part.CHUNK_SIZE:
            end = data.find(b"\r\n", pos)
            if end < 0:
                break
            try:
                stop = end + 2 + int(data[pos:end].split(b";", 1)[0], 16)
            except ValueError:
                break  # for the general path to report
            if stop == end + 2 or data[stop : stop + 2] != b"\r\n":
                break  # the last chunk, or one not complete yet
            if self._body(data[end + 2 : stop], now):
                self._line = b""
                self._finish(now)
                return b""
            pos = stop + 2
        return data[pos:]

    def _step(self, now: float) -> bool:
        """Decode what the buffer allows for the current part; False: wait for more."""
        match self._part:
            case _Part.HEAD:
                return self._head()
            case _Part.CHUNK_SIZE:
                return self._chunk_size()
            case _Part.CHUNK_DATA | _Part.LENGTH | _Part.UNTIL_CLOSE:
                return self._data(now)
            case _Part.CHUNK_END:
                return self._chunk_end()
            case _Part.TRAILER:
                return self._trailer(now)
            case _Part.DONE:
                return False

    def _head(self) -> bool:
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > HEAD_LIMIT:
                raise ResponseError(f"response head longer than {HEAD_LIMIT} bytes")
            return False
        lines = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
        del self._buf[: end + 4]
        fields = lines[0].split(" ", 2)
        if len(fields) < 2 or not fields[0].startswith("HTTP/1.") or not fields[1].isdigit():
            raise ResponseError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
        self._status = int(fields[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        self._body_kind(headers)
        return True

    def _body_kind(self, headers: dict[str, str]) -> None:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._part = _Part.CHUNK_SIZE
        elif "content-length" in headers:
            self._left = int(headers["content-length"])
            self._part = _Part.LENGTH
        else:
            self._part = _Part.UNTIL_CLOSE

    def _chunk_size(self) -> bool:
        end = self._buf.find(b"\r\n")
        if end < 0:
            return False
        size_text = bytes(self._buf[:end]).split(b";", 1)[0].strip()
        del self._buf[: end + 2]
        try:
            self._left = int(size_text, 16)
        except ValueError:
            raise ResponseError(f"bad chunk size {size_text[:20]!r}") from None
        self._part = _Part.CHUNK_DATA if self._left else _Part.TRAILER
        return True

    def _chunk_end(self) -> bool:
        if len(self._buf) < 2:
            return False
        if self._buf[:2] != b"\r\n":
            raise ResponseError("chunk not followed by CRLF")
        del self._buf[:2]
        self._part = _Part.CHUNK_SIZE
        return True

    def _trailer(self, now: float) -> bool:
        end = self._buf.find(b"\r\n")
        if end < 0:
            return False
        del self._buf[: end + 2]
        if end == 0:  # the blank line that ends the trailer section
            self._finish(now)
        return True

    def _data(self, now: float) -> bool:
        if not self._buf and self._part is not _Part.LENGTH:
            return False
        take = len(self._buf)
        if self._part is not _Part.UNTIL_CLOSE:
            take = min(self._left, take)
        piece = bytes(self._buf[:take])
        del self._buf[:take]
        self._left -= take
        if self._body(piece, now):
            self._line = b""  # the sink has all it wants; what follows is not read
            self._finish(now)
        elif self._part is _Part.LENGTH and self._left == 0:
            self._finish(now)
        elif self._part is _Part.CHUNK_DATA and self._left == 0:
            self._part = _Part.CHUNK_END
        return take > 0 and self._part is not _Part.DONE

    def _body(self, piece: bytes, now: float) -> bool:
        """Hand complete lines to the sink; True when it wants no more."""
        if self._status != 200:
            self._error_body += piece[: ERROR_BODY_LIMIT - len(self._error_body)]
            return False
        lines = (self._line + piece).split(b"\n")
        self._line = lines.pop()
        return any(self._on_line(line, now) for line in lines)

    def _finish(self, now: float) -> None:
        self._part = _Part.DONE
        if self._done.done():
            return
        try:
            if self._status != 200:
                text = self._error_body.decode("utf-8", errors="replace")
                raise StatusError(self._status, text)
            if self._line.strip():  # a last line without its newline
                self._on_line(self._line, now)
        except Exception as exc:  # handed to the awaiting task, not lost
            self._fail(exc)
            return
        self._done.set_result(None)
        if self._transport is not None:
            self._transport.close()

    def _fail(self, exc: BaseException) -> None:
        self._part = _Part.DONE
        if not self._done.done():
            self._done.set_exception(exc)
        if self._transport is not None:
            self._transport.close()
