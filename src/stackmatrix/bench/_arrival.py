"""When the bytes of a response arrived: the clocks `_sse` stamps each line with.

Best first (see `_sse`): the kernel's receive timestamp of the packet (SO_TIMESTAMPNS,
read with recvmsg on a socket of our own: `post_stamped`), the moment the selector of
a `stamping_loop()` returned, else perf_counter when the bytes were handed over.
"""

from __future__ import annotations

import asyncio
import contextlib
import platform
import selectors
import socket
import struct
import sys
import time
import weakref
from collections.abc import Callable
from typing import Protocol


class StampedResponse(Protocol):
    """What `post_stamped` feeds: the response decoder of `_sse`."""

    @property
    def done(self) -> asyncio.Future[None]: ...

    def clock(self) -> float: ...

    def feed(self, data: bytes, now: float) -> None: ...

    def connection_lost(self, exc: Exception | None) -> None: ...


class _StampingSelector(selectors.DefaultSelector):
    """Remembers when its latest `select` returned: the arrival time of what it found."""

    returned = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(timeout)
        self.returned = time.perf_counter()
        return ready

    def clock(self) -> float:
        return self.returned


_CLOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Callable[[], float]] = (
    weakref.WeakKeyDictionary()
)


def stamping_loop() -> asyncio.AbstractEventLoop:
    """An event loop whose connections read their arrival time from its selector."""
    selector = _StampingSelector()
    loop = asyncio.SelectorEventLoop(selector)
    _CLOCKS[loop] = selector.clock
    return loop


def clock_of(loop: asyncio.AbstractEventLoop) -> Callable[[], float]:
    """The arrival clock of `loop`'s connections: its selector's, else perf_counter."""
    return _CLOCKS.get(loop, time.perf_counter)


# SO_TIMESTAMPNS (= SCM_TIMESTAMPNS) on Linux x86-64 and arm64; Python does not
# export the name. The control message is a struct timespec: two 64-bit fields.
_SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("@qq")
KERNEL_STAMPS = sys.platform == "linux" and platform.machine() in ("x86_64", "aarch64")
_READ_SIZE = 256 * 1024
_CMSG_SIZE = socket.CMSG_SPACE(_TIMESPEC.size) if KERNEL_STAMPS else 0


def _kernel_time(ancdata: list[tuple[int, int, bytes]]) -> float | None:
    """The packet's receive time from recvmsg's control data, on perf_counter's clock."""
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = _TIMESPEC.unpack_from(data)
            # CLOCK_REALTIME -> perf_counter (CLOCK_MONOTONIC): NTP slews both alike, so
            # their offset, read now, holds for a packet that came a moment ago.
            offset = time.clock_gettime(time.CLOCK_REALTIME) - time.perf_counter()
            return float(sec + nsec * 1e-9 - offset)
    return None


async def post_stamped(
    loop: asyncio.AbstractEventLoop, host: str, port: int, request: bytes, response: StampedResponse
) -> None:
    """Send `request` on our own socket and feed `response` from recvmsg with the
    kernel's receive timestamps (no asyncio transport: it reads with recv, which has
    no control data)."""
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    sock: socket.socket | None = None
    error: OSError | None = None
    for family, kind, proto, _, address in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with contextlib.suppress(OSError):  # without it: the selector's time
                sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            await loop.sock_connect(sock, address)
            break
        except OSError as exc:
            error = exc
            sock.close()
            sock = None
    if sock is None:
        raise error or OSError(f"cannot resolve {host!r}")
    fd = sock.fileno()
    try:
        await loop.sock_sendall(sock, request)
        loop.add_reader(fd, _read_stamped, sock, response)
        await response.done
    finally:
        loop.remove_reader(fd)
        sock.close()


def _read_stamped(sock: socket.socket, response: StampedResponse) -> None:
    """One read per readiness (level-triggered: the loop calls again if more is left)."""
    try:
        data, ancdata, _, _ = sock.recvmsg(_READ_SIZE, _CMSG_SIZE)
    except (BlockingIOError, InterruptedError):
        return
    except OSError as exc:
        response.connection_lost(exc)
        return
    now = response.clock()
    if not data:
        response.connection_lost(None)
        return
    stamp = _kernel_time(ancdata)
    # The stamp may be after `now` (the selector's return) when more packets came
    # before this read, never after this moment; one later than that, or from long
    # ago, means the wall clock stepped: the selector's time then.
    if stamp is None or not now - 1.0 < stamp <= time.perf_counter():
        stamp = now
    response.feed(data, stamp)
