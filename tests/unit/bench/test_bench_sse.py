"""The client's own HTTP/1.1 + SSE reader: bytes split anywhere, every body framing,
and the error cases, fed straight into the protocol object."""

from __future__ import annotations

import asyncio
import itertools
import random

import pytest

from stackmatrix.bench._sse import ResponseError, StatusError, _Response


def events(n: int) -> bytes:
    return b"".join(b'data: {"choices":[{"text":"x%d"}]}\n\n' % i for i in range(n))


def chunked(body: bytes, rng: random.Random) -> bytes:
    out, pos = b"", 0
    while pos < len(body):
        piece = body[pos : pos + rng.randint(1, 90)]
        pos += len(piece)
        ext = b";ext=1" if rng.random() < 0.1 else b""
        out += b"%x%s\r\n" % (len(piece), ext) + piece + b"\r\n"
    return out + b"0\r\n\r\n"


def feed(raw: bytes, splits: list[int]) -> tuple[list[bytes], BaseException | None]:
    async def go() -> tuple[list[bytes], BaseException | None]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        lines: list[bytes] = []
        counter = iter(range(10**9)).__next__

        def on_line(line: bytes, _t: float) -> bool:
            lines.append(line)
            return False

        proto = _Response(b"", on_line, fut, counter)
        pos = 0
        for cut in [*splits, len(raw)]:
            proto.data_received(raw[pos:cut])
            pos = cut
        if not fut.done():
            proto.connection_lost(None)
        try:
            fut.result()
        except Exception as exc:
            return lines, exc
        return lines, None

    return asyncio.run(go())


@pytest.mark.parametrize("framing", ["chunked", "length", "close"])
def test_lines_survive_any_split(framing: str) -> None:
    rng = random.Random(framing)
    body = events(30)
    want = body.split(b"\n")[:-1]
    for _ in range(300):
        if framing == "chunked":
            head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            raw = head + chunked(body, rng)
        elif framing == "length":
            raw = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        else:
            raw = b"HTTP/1.1 200 OK\r\n\r\n" + body
        splits = sorted(rng.sample(range(1, len(raw)), rng.randint(0, 40)))
        got, err = feed(raw, splits)
        assert err is None and got == want


def test_http_error_status_keeps_the_body() -> None:
    _, err = feed(b"HTTP/1.1 500 X\r\nContent-Length: 5\r\n\r\nboom!", [3, 20])
    assert isinstance(err, StatusError) and err.text == "boom!"


def test_dropped_connection_and_bad_chunk_are_errors() -> None:
    rng = random.Random(2)
    raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(events(30), rng)
    _, err = feed(raw[: len(raw) // 2], [50])
    assert isinstance(err, ResponseError) and "dropped" in str(err)
    bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc"
    _, err = feed(bad, [])
    assert isinstance(err, ResponseError) and "bad chunk size" in str(err)


_LINE_SERVER = r"""
import json, socket, sys, time
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
conn, _ = listener.accept()
conn.recv(65536)
conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
sent = []
for i in range(5):
    time.sleep(0.03)
    conn.sendall(b"data: %d\n" % i)
    sent.append(time.perf_counter())
conn.close()
print(json.dumps(sent), flush=True)
"""


def _stamps_while_busy(loop_factory: object) -> tuple[list[float], list[float]]:
    """A server in its own process sends a line every 30 ms; the client's loop is kept
    busy (a blocking callback) for 55 ms after the first line, so the second arrives
    while it is busy. Returns (send times, arrival times the client recorded), both on
    perf_counter's clock (CLOCK_MONOTONIC, shared by processes on Linux)."""
    import json
    import subprocess
    import sys
    import time

    from stackmatrix.bench._sse import post_lines

    proc = subprocess.Popen([sys.executable, "-c", _LINE_SERVER], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    got: list[float] = []

    async def go() -> None:
        loop = asyncio.get_running_loop()

        def on_line(_line: bytes, t: float) -> bool:
            got.append(t)
            if len(got) == 1:  # the loop is busy elsewhere while line 2 arrives
                loop.call_soon(time.sleep, 0.055)
            return False

        await post_lines(f"http://127.0.0.1:{port}/v1/completions", b"{}", on_line)

    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:  # type: ignore[arg-type]
            runner.run(go())
        sent = json.loads(proc.stdout.readline())
    finally:
        proc.kill()
        proc.communicate()  # reaps it and closes the pipe
    return sent, got


def test_arrival_time_is_the_kernels_not_the_busy_loops() -> None:
    """With kernel receive timestamps, a line that arrived while the loop was blocked
    keeps its own arrival time, not the moment the loop got to it (25 ms later).
    (Lines of one connection that pile up in the socket are read together and get
    the last one's time: that needs a loop behind by a whole gap.)"""
    from stackmatrix.bench._sse import _KERNEL_STAMPS, stamping_loop

    if not _KERNEL_STAMPS:
        pytest.fail("this test runs on Linux x86-64/arm64, where kernel stamps exist")
    sent, got = _stamps_while_busy(stamping_loop)
    assert len(got) == 5
    gaps = [b - a for a, b in itertools.pairwise(got)]
    true_gaps = [b - a for a, b in itertools.pairwise(sent)]
    # stamped when the loop got to it, line 2 would be 25 ms late: gaps of 55 and 5 ms.
    # With kernel stamps the error is microseconds; 10 ms leaves room for a busy CI
    # host descheduling the server between its send and reading its clock.
    for measured, true in zip(gaps, true_gaps, strict=True):
        assert abs(measured - true) < 0.010, (gaps, true_gaps)
    for s, g in zip(sent, got, strict=True):
        assert -0.010 < g - s < 0.010, (sent, got)  # arrival ~ send on loopback
