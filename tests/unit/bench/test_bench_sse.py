"""The client's own HTTP/1.1 + SSE reader: bytes split anywhere, every body framing,
and the error cases, fed straight into the protocol object."""

from __future__ import annotations

import asyncio
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
