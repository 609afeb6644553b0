"""A local package index behind HTTP basic auth, with one wheel (credpkg 1.0): a build
that installs from it proves uv had the credentials."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import io
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

USER, PASSWORD = "builder", "s3cret-Pw-4417"
WHEEL = "credpkg-1.0-py3-none-any.whl"


def _wheel_bytes() -> bytes:
    files = {
        "credpkg/__init__.py": b"VERSION = '1.0'\n",
        "credpkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: credpkg\nVersion: 1.0\n",
        "credpkg-1.0.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = (
        "".join(
            f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
            for name, data in files.items()
        )
        + "credpkg-1.0.dist-info/RECORD,,\n"
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr("credpkg-1.0.dist-info/RECORD", record)
    return buf.getvalue()


@contextlib.contextmanager
def auth_index() -> Iterator[str]:
    """http://127.0.0.1:PORT: /simple/credpkg/ and /files/WHEEL, behind basic auth."""
    wheel = _wheel_bytes()
    expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            self._answer(body_too=False)

        def do_GET(self) -> None:
            self._answer(body_too=True)

        def _answer(self, *, body_too: bool) -> None:
            seen.append(self.path)
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="test"')
                self.end_headers()
                return
            if self.path.rstrip("/") == "/simple/credpkg":
                body = f'<a href="/files/{WHEEL}">{WHEEL}</a>'.encode()
                kind = "text/html"
            elif self.path == f"/files/{WHEEL}":
                body, kind = wheel, "application/octet-stream"
            else:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body_too:
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
    assert seen, "uv never asked the index"


def files_holding(root: Path, secret: bytes) -> list[str]:
    """The files under `root` whose bytes contain `secret` (links not followed)."""
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and secret in path.read_bytes():
            hits.append(str(path.relative_to(root)))
    return hits
