"""The blocking probes' HTTP (bench/_http.py) against servers that misbehave: redirects,
answers dripped a byte at a time, bodies too large to hold, and bytes that are not HTTP.
Every case is a status (0: no usable answer), within the call's time bound."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stackmatrix.bench import _http
from stackmatrix.bench.engines import post_until_ok

Answer = Callable[[socket.socket], None]  # writes a response on an accepted connection


class RawServer:
    """A 127.0.0.1 listener that reads each request's head and answers with `answer`,
    counting what it sent, so a test can send bytes no HTTP server would."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[bytes] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            with conn:
                self._one(conn)

    def _one(self, conn: socket.socket) -> None:
        conn.settimeout(5.0)
        head = b""
        try:
            while b"\r\n\r\n" not in head and (data := conn.recv(4096)):
                head += data
            self.requests.append(head)
            self.answer(conn)
        except OSError:
            pass  # the client hung up, which is what several tests want of it

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5.0)
        self._listener.close()


StartRaw = Callable[[Answer], RawServer]
StartRedirect = Callable[[int], tuple[str, RawServer, list[str]]]


@pytest.fixture
def raw_server() -> Iterator[StartRaw]:
    started: list[RawServer] = []

    def start(answer: Answer) -> RawServer:
        started.append(RawServer(answer))
        return started[-1]

    yield start
    for server in started:
        server.close()


def sends(data: bytes) -> Answer:
    return lambda conn: conn.sendall(data)


# --- redirects ---------------------------------------------------------------------


class _Redirect(BaseHTTPRequestHandler):
    status = 302
    location = ""
    seen: list[str]

    def do_GET(self) -> None:
        self.seen.append(f"{self.command} {self.path}")
        self.send_response(self.status)
        self.send_header("Location", self.location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def redirect_to(raw_server: StartRaw) -> Iterator[StartRedirect]:
    """A server that answers every request with `status` to a second, counting server."""
    servers: list[ThreadingHTTPServer] = []

    def start(status: int) -> tuple[str, RawServer, list[str]]:
        other = raw_server(sends(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        seen: list[str] = []
        fields = {"status": status, "seen": seen, "location": other.url + "/elsewhere"}
        handler = type("Handler", (_Redirect,), fields)
        srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}", other, seen

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize(
    ("method", "status"), [("GET", 302), ("POST", 302), ("GET", 301), ("GET", 307), ("GET", 308)]
)
def test_a_redirect_is_the_answer_never_followed(
    redirect_to: StartRedirect, method: str, status: int
) -> None:
    url, other, seen = redirect_to(status)
    assert _http.call(url + "/flush_cache", method, timeout_s=5.0)[0] == status
    assert seen == [f"{method} /flush_cache"]
    assert other.requests == []


def test_a_redirected_flush_is_not_flushed(redirect_to: StartRedirect) -> None:
    url, other, _ = redirect_to(302)
    assert post_until_ok(url + "/flush_cache", pause_s=0.01) == "POST /flush_cache: HTTP 302"
    assert other.requests == []
    assert _http.get_json(url + "/server_info") is None and other.requests == []


# --- the call's time bound -----------------------------------------------------------


def drips(head: bytes, body: bytes, every_s: float = 0.1, for_s: float = 6.0) -> Answer:
    """`head` at once, then `body` a byte every `every_s`: each read returns in time,
    the whole answer does not. It gives up after `for_s`, so that a call bounded only
    per read fails its test instead of hanging the suite."""

    def answer(conn: socket.socket) -> None:
        conn.sendall(head)
        end = time.monotonic() + for_s
        for byte in body:
            if time.monotonic() > end:
                return
            conn.sendall(bytes([byte]))
            time.sleep(every_s)

    return answer


@pytest.mark.parametrize(
    ("head", "body"),
    [
        (b"", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" + b"x" * 100),
        (b"HTTP/1.1 200 OK\r\n", b"X-Drip: " + b"y" * 200 + b"\r\n\r\n"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n", b"z" * 200),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"1\r\nz\r\n" * 100),
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", b"z" * 200),
    ],
    ids=["status-line", "headers", "length-body", "chunked-body", "close-body"],
)
def test_a_dripping_server_is_cut_off_at_the_calls_timeout(
    raw_server: StartRaw, head: bytes, body: bytes
) -> None:
    server = raw_server(drips(head, body))
    t0 = time.monotonic()
    status, got = _http.get(server.url + "/server_info", timeout_s=1.0)
    assert time.monotonic() - t0 < 1.5
    assert (status, got) == (0, b"")


def test_a_flush_is_bounded_by_its_timeout_too(
    raw_server: StartRaw, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = raw_server(drips(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", b"." * 100))
    real = _http.call

    def call(url: str, method: str, *, timeout_s: float) -> tuple[int, bytes]:
        assert timeout_s == 60.0  # the flush's own bound, shortened here to keep the test short
        return real(url, method, timeout_s=1.0)

    monkeypatch.setattr(_http, "call", call)
    t0 = time.monotonic()
    assert post_until_ok(server.url + "/flush_cache") == "POST /flush_cache: no answer"
    assert time.monotonic() - t0 < 1.5


# --- the body's size bound -------------------------------------------------------------


def streams(head: bytes, up_to: int, counter: list[int]) -> Answer:
    """`head`, then zeros until the client hangs up or `up_to` bytes went out."""

    def answer(conn: socket.socket) -> None:
        conn.sendall(head)
        block = bytes(1 << 20)
        while counter[0] < up_to:
            conn.sendall(block)
            counter[0] += len(block)

    return answer


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 8589934592\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 8589934592\r\nContent-Length: 8589934592\r\n\r\n",
    ],
    ids=["8GiB-length", "until-close", "length-twice"],
)
def test_a_body_over_the_bound_is_refused_unread(raw_server: StartRaw, head: bytes) -> None:
    sent = [0]
    server = raw_server(streams(head, 256 << 20, sent))
    assert _http.get(server.url + "/server_info", timeout_s=10.0) == (0, b"")
    assert _http.get_json(server.url + "/server_info", timeout_s=10.0) is None
    assert sent[0] < 64 << 20  # the client hung up long before the server was done


def test_a_chunked_body_over_the_bound_is_refused(raw_server: StartRaw) -> None:
    chunk = b"100000\r\n" + bytes(1 << 20) + b"\r\n"
    server = raw_server(
        sends(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk * 3 + b"0\r\n\r\n")
    )
    assert _http.get(server.url + "/", max_bytes=2 << 20) == (0, b"")
    assert _http.get(server.url + "/", max_bytes=3 << 20) == (200, bytes(3 << 20))


def test_a_body_at_the_bound_is_read(raw_server: StartRaw) -> None:
    server = raw_server(sends(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"))
    assert _http.get(server.url + "/", max_bytes=5) == (200, b"hello")
    assert _http.get(server.url + "/", max_bytes=4) == (0, b"")


# --- answers that are not HTTP ---------------------------------------------------------


NOT_HTTP = {
    "garbage": b"\x00\xffnot http at all\r\n\r\n",
    "bad-status": b"HTTP/1.1 abc OK\r\n\r\n",
    "status-out-of-range": b"HTTP/1.1 99999 OK\r\nContent-Length: 0\r\n\r\n",
    "long-status-line": b"HTTP/1.1 200 " + b"O" * 70_000 + b"\r\n\r\n",
    "long-header-line": b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70_000 + b"\r\n\r\n",
    "too-many-headers": b"HTTP/1.1 200 OK\r\n" + b"X: 1\r\n" * 101 + b"\r\n",
    "truncated-body": b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort",
    "bad-chunk-size": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n",
    "truncated-chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nab",
    "long-chunk-line": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * 70_000,
    "closed-at-once": b"",
}


@pytest.mark.parametrize("answer", NOT_HTTP.values(), ids=NOT_HTTP.keys())
def test_an_answer_that_is_not_http_is_no_answer(raw_server: StartRaw, answer: bytes) -> None:
    server = raw_server(sends(answer))
    assert _http.call(server.url + "/flush_cache", "POST", timeout_s=5.0) == (0, b"")
    assert _http.get_json(server.url + "/server_info", timeout_s=5.0) is None


GOOD = (
    b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"v": "1"}\n'
)


@pytest.fixture(scope="module")
def one_server() -> Iterator[RawServer]:
    server = RawServer(sends(b""))
    yield server
    server.close()


@settings(max_examples=100, deadline=None)
@given(at=st.integers(0, len(GOOD)), cut=st.booleans(), junk=st.binary(max_size=40))
def test_any_mangled_answer_is_a_status(
    one_server: RawServer, at: int, cut: bool, junk: bytes
) -> None:
    one_server.answer = sends(GOOD[:at] + junk + (b"" if cut else GOOD[at:]))
    status, body = _http.get(one_server.url + "/version", timeout_s=5.0)
    assert isinstance(status, int) and isinstance(body, bytes)
    assert status != 0 or body == b""


def test_a_good_answer_is_still_read(raw_server: StartRaw) -> None:
    server = raw_server(sends(GOOD))
    assert _http.get(server.url + "/version?x=1") == (200, b'{"v": "1"}\n')
    assert _http.get_json(server.url + "/version") == {"v": "1"}
    assert server.requests[0].startswith(b"GET /version?x=1 HTTP/1.1\r\n")


def test_nothing_listening_is_no_answer() -> None:
    assert _http.get("http://127.0.0.1:1/health", timeout_s=1.0) == (0, b"")
    assert _http.get("not a url", timeout_s=1.0) == (0, b"")
    assert _http.get("http://[::1/health", timeout_s=1.0) == (0, b"")
    assert _http.get("http://127.0.0.1:99999/health", timeout_s=1.0) == (0, b"")
