"""Small blocking HTTP requests for readiness, configuration and cache probes (not the
load)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from stackmatrix.records._read import JSONObject


def get(url: str, *, timeout_s: float = 5.0) -> tuple[int, bytes]:
    """(status, body); status 0 when nothing answered (refused, reset, timeout)."""
    return call(url, "GET", timeout_s=timeout_s)


def call(url: str, method: str, *, timeout_s: float = 5.0) -> tuple[int, bytes]:
    """`method` without a body: (status, body), status 0 when nothing answered."""
    req = urllib.request.Request(url, method=method)  # noqa: S310 - http(s) URLs we built
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read() if exc.fp else b""
    except (urllib.error.URLError, OSError, TimeoutError):
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
