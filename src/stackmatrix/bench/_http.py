"""Small blocking HTTP requests for readiness, configuration and cache probes (not the
load).

Each call is one request on a connection of its own, bounded three ways: `timeout_s`
is the wall time of the whole call (connecting, the headers and the body together, not
each read), `max_bytes` bounds the body, and nothing is followed: a 3xx is the answer,
its Location is never asked. Anything that goes wrong below HTTP or in it (refused,
reset, too slow, too large, not HTTP) is status 0, "nothing usable answered".
"""

from __future__ import annotations

import http.client
import io
import json
import logging
import socket
import ssl
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from stackmatrix.jsontypes import JSONObject

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

logger = logging.getLogger(__name__)

# An engine's /server_info is tens of KB; the bound is only against a server that claims
# or sends gigabytes, which read whole ended in MemoryError.
MAX_BYTES = 8 * 1024 * 1024
_READ = 64 * 1024


class BodyTooLarge(http.client.HTTPException):
    """The body is over the call's `max_bytes`, by its Content-Length or by reading."""


def get(url: str, *, timeout_s: float = 5.0, max_bytes: int = MAX_BYTES) -> tuple[int, bytes]:
    """(status, body); status 0 when nothing usable answered (see `call`)."""
    return call(url, "GET", timeout_s=timeout_s, max_bytes=max_bytes)


def call(
    url: str, method: str, *, timeout_s: float = 5.0, max_bytes: int = MAX_BYTES
) -> tuple[int, bytes]:
    """`method` without a body: (status, body). Status 0 when nothing usable answered:
    refused, reset, no whole answer within `timeout_s`, a body over `max_bytes`, or an
    answer that is not HTTP. A redirect is returned as its 3xx status, never followed."""
    deadline = time.monotonic() + timeout_s
    try:
        return _exchange(url, method, deadline, max_bytes)
    except OSError as exc:  # refused or reset (a server still starting), or too slow
        logger.debug("%s %s: no answer: %r", method, url, exc)
    except http.client.HTTPException as exc:  # the server is up but its answer is unusable
        logger.warning("%s %s: taken as no answer: %s", method, url, _why(exc))
    return 0, b""


def get_json(url: str, *, timeout_s: float = 5.0) -> JSONObject | None:
    """The JSON object at `url`, or None when it does not answer 200 with an object."""
    status, body = get(url, timeout_s=timeout_s)
    if status != 200:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _exchange(url: str, method: str, deadline: float, max_bytes: int) -> tuple[int, bytes]:
    conn, target = _connection(url, deadline - time.monotonic())
    try:
        conn.request(method, target, headers={"User-Agent": "stackmatrix", "Connection": "close"})
        # Built here rather than by conn.getresponse(), whose reads wait per read.
        answer = _Answer(conn.sock, method, deadline)
        try:
            answer.begin()
            return answer.status, _body(answer, max_bytes)
        finally:
            answer.close()
    finally:
        conn.close()


def _connection(url: str, timeout_s: float) -> tuple[http.client.HTTPConnection, str]:
    """A connection (not yet open) to `url`'s host, and the request target."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an unclosed [IPv6 literal
        raise http.client.InvalidURL(f"not an http(s) URL: {url!r}") from exc
    host = parts.netloc.rpartition("@")[2]  # credentials in the URL are never sent
    if not host or parts.scheme not in ("http", "https"):
        raise http.client.InvalidURL(f"not an http(s) URL: {url!r}")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    timeout = max(timeout_s, 0.001)
    if parts.scheme == "http":
        return http.client.HTTPConnection(host, timeout=timeout), target
    tls = ssl.create_default_context()
    return http.client.HTTPSConnection(host, timeout=timeout, context=tls), target


def _body(answer: http.client.HTTPResponse, max_bytes: int) -> bytes:
    if answer.length is not None and answer.length > max_bytes:
        raise BodyTooLarge(f"Content-Length {answer.length} is over {max_bytes} bytes")
    parts: list[bytes] = []
    size = 0
    while chunk := answer.read(_READ):
        size += len(chunk)
        if size > max_bytes:
            raise BodyTooLarge(f"the body is over {max_bytes} bytes")
        parts.append(chunk)
    if answer.length:  # read(amt) ends quietly at EOF with bytes still owed
        raise http.client.IncompleteRead(b"".join(parts), answer.length)
    return b"".join(parts)


def _why(exc: http.client.HTTPException) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:200]}"


class _Answer(http.client.HTTPResponse):
    """An HTTPResponse whose every read of the socket ends by the call's deadline."""

    def __init__(self, sock: socket.socket, method: str, deadline: float) -> None:
        super().__init__(sock, method=method)
        self.fp.close()  # the plain file's reads each wait the socket's full timeout
        self.fp = io.BufferedReader(_UntilDeadline(sock, deadline))


class _UntilDeadline(io.RawIOBase):
    """Reads from `sock`, each waiting only for what is left until `deadline`: a server
    that drips a byte a second cannot stretch a call past its timeout."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer, /) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no whole answer within the call's timeout")
        self._sock.settimeout(left)
        return self._sock.recv_into(buffer)
