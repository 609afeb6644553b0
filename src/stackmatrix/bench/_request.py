"""One request of the client: the options a round runs with, what happened to each
request (`RequestRecord`), and `send_one`, which streams one completion and times its
chunks. Shared by the in-process round (`client`) and the worker processes (`_workers`).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from stackmatrix.bench._sse import ResponseError, StatusError, post_lines
from stackmatrix.bench.workload import BenchRequest
from stackmatrix.jsontypes import JSONObject

ERROR_TEXT_LIMIT = 300
_JSON = json.JSONDecoder()


@dataclass(frozen=True, kw_only=True)
class ClientOptions:
    base_url: str
    model: str
    max_concurrency: int = 1
    request_timeout_s: float = 300.0
    ignore_eos: bool = False  # only True where the engine accepts the field
    use_arrivals: bool = True  # False for warm-up: send as fast as concurrency allows
    temperature: float = 0.0
    # worker processes sharing the round; 1 runs the round in this process
    workers: int = 1


@dataclass(kw_only=True)
class RequestRecord:
    """What happened to one request; times in seconds from the round's start."""

    index: int
    scheduled_s: float = 0.0  # when its arrival time came
    start_s: float = 0.0  # when it was sent (after the client's concurrency limit)
    queue_wait_s: float = 0.0  # start_s - scheduled_s: waiting on our own limit
    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    e2e_s: float | None = None
    output_tokens: int = 0
    output_tokens_source: str = "chunks"  # "usage" when the server reported it
    prompt_tokens: int | None = None
    # of them, served from the engine's prefix cache, where it says (SGLang with
    # --enable-cache-report, vLLM): `usage.prompt_tokens_details.cached_tokens`
    cached_tokens: int | None = None
    content_chunks: int = 0
    finish_reason: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> JSONObject:
        out = self._fields()
        if self.cached_tokens is not None:  # absent where the server does not say
            out["cached_tokens"] = self.cached_tokens
        return out

    def _fields(self) -> JSONObject:
        return {
            "index": self.index,
            "ok": self.ok,
            "error": self.error,
            "scheduled_s": round(self.scheduled_s, 6),
            "start_s": round(self.start_s, 6),
            "queue_wait_s": round(self.queue_wait_s, 6),
            "ttft_s": _r(self.ttft_s),
            "e2e_s": _r(self.e2e_s),
            "output_tokens": self.output_tokens,
            "output_tokens_source": self.output_tokens_source,
            "prompt_tokens": self.prompt_tokens,
            "content_chunks": self.content_chunks,
            "finish_reason": self.finish_reason,
            "itl_s": [round(x, 7) for x in self.itl_s],
        }


def _r(value: float | None) -> float | None:
    return round(value, 7) if value is not None else None


@dataclass(frozen=True, kw_only=True)
class RoundOutcome:
    records: list[RequestRecord]
    duration_s: float  # from the round's start until its last request finished
    t0: float  # time.perf_counter() at the round's start (records are relative to it)
    cpu_s: float  # CPU time the client spent during the round (all its workers together)
    # each worker process's CPU time, in worker order; () when the round ran in-process
    worker_cpu_s: tuple[float, ...] = ()


class StreamError(Exception):
    """A protocol problem in one response (bad SSE line, missing final chunk)."""


def worker_count(options: ClientOptions, requests: int) -> int:
    """Worker processes a round really uses: no more than its concurrency (each worker
    holds at least one of its slots) or its requests."""
    return max(1, min(options.workers, options.max_concurrency, requests))


async def send_one(
    req: BenchRequest, options: ClientOptions, t0: float, scheduled: float
) -> RequestRecord:
    """Send one request now and record it (`scheduled`: when its arrival time came)."""
    rec = RequestRecord(index=req.index)
    start = time.perf_counter()
    rec.scheduled_s, rec.start_s = scheduled - t0, start - t0
    rec.queue_wait_s = start - scheduled
    try:
        async with asyncio.timeout(options.request_timeout_s):
            await _stream(_payload(req, options), options, rec, start)
    except TimeoutError:
        rec.error = f"timed out after {options.request_timeout_s:g} s"
    except StatusError as exc:
        rec.error = f"HTTP {exc.status}: {exc.text[:ERROR_TEXT_LIMIT]}"
    except (StreamError, ResponseError) as exc:
        rec.error = str(exc)[:ERROR_TEXT_LIMIT]
    except (OSError, ValueError) as exc:
        rec.error = f"{type(exc).__name__}: {exc}"[:ERROR_TEXT_LIMIT]
    rec.e2e_s = time.perf_counter() - start
    return rec


class _StreamOptions(TypedDict):
    include_usage: bool


class _Completion(TypedDict):
    """The body of a POST /v1/completions (OpenAI's completions API)."""

    model: str
    prompt: str | list[int]  # token ids: bench.workload.prompt_form = "token_ids"
    max_tokens: int
    temperature: float
    stream: bool
    stream_options: _StreamOptions
    ignore_eos: NotRequired[bool]


def _payload(req: BenchRequest, options: ClientOptions) -> _Completion:
    body: _Completion = {
        "model": options.model,
        "prompt": req.sent_prompt,
        "max_tokens": req.max_tokens,
        "temperature": options.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if options.ignore_eos:
        body["ignore_eos"] = True
    return body


async def _stream(
    body: _Completion, options: ClientOptions, rec: RequestRecord, start: float
) -> None:
    state = _StreamState(rec=rec, start=start, last=start)
    url = options.base_url + "/v1/completions"
    # Each line is accounted inside the connection's data_received, with the time its
    # bytes arrived: timing does not depend on when this task next runs.
    await post_lines(url, json.dumps(body).encode(), state.line)
    if not state.done:
        raise StreamError(
            "the stream ended before its final chunk (no finish_reason, no [DONE]): "
            "the server dropped the connection"
        )
    if rec.output_tokens_source != "usage":
        rec.output_tokens = rec.content_chunks


@dataclass(kw_only=True)
class _StreamState:
    rec: RequestRecord
    start: float
    last: float  # arrival time of the latest content chunk
    done: bool = False  # saw a finish_reason or [DONE]

    def line(self, raw: bytes, now: float) -> bool:
        """Account one SSE line that arrived at `now`; True once [DONE] is seen."""
        line = raw.strip()
        if not line or line.startswith(b":"):
            return False  # blank separators and SSE comments (keep-alives)
        if not line.startswith(b"data:"):
            raise StreamError(f"malformed SSE line: {line[:80]!r}")
        data = line[5:].strip()
        if data == b"[DONE]":
            self.done = True
            return True
        self.last = _chunk(data, self.rec, self.start, self.last, now)
        self.done = self.done or self.rec.finish_reason is not None
        return False


def _first_choice(obj: dict[str, Any], data: bytes) -> dict[str, Any]:
    """The event's first choice ({} when it has none): an event of another shape fails
    its request, never the round."""
    choices = obj.get("choices") or []
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices[:1]):
        raise StreamError(f"malformed SSE data (choices not a list of objects): {data[:80]!r}")
    return choices[0] if choices else {}


MAX_COUNT = 1 << 40  # tokens of one request: more is not a count a server sends


def _count(usage: dict[str, Any], key: str) -> int | None:
    """A token count of `usage` (None when absent); anything but a whole number from 0
    to MAX_COUNT (a list, true, -1, 1e400) fails the request."""
    value = usage.get(key)
    if value is None:
        return None
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not 0 <= value <= MAX_COUNT or value != int(value):
        raise StreamError(f"malformed SSE data: usage {key} is {str(value)[:40]}, not a count")
    return int(value)


def _chunk(data: bytes, rec: RequestRecord, start: float, last: float, now: float) -> float:
    """Account one SSE event; returns the time of the latest content chunk."""
    try:
        obj = _JSON.decode(data.decode())  # not json.loads: it sniffs the encoding each time
    except ValueError as exc:
        raise StreamError(f"malformed SSE data (not JSON): {data[:80]!r}") from exc
    if not isinstance(obj, dict):
        raise StreamError(f"malformed SSE data (not an object): {data[:80]!r}")
    if "error" in obj:
        raise StreamError(f"server error in stream: {str(obj['error'])[:ERROR_TEXT_LIMIT]}")
    choice = _first_choice(obj, data)
    if choice.get("text"):
        if rec.ttft_s is None:
            rec.ttft_s = now - start
        else:
            rec.itl_s.append(now - last)
        rec.content_chunks += 1
        last = now
    if choice.get("finish_reason"):
        rec.finish_reason = str(choice["finish_reason"])
    usage = obj.get("usage")
    if isinstance(usage, dict) and (tokens := _count(usage, "completion_tokens")) is not None:
        rec.output_tokens = tokens
        rec.output_tokens_source = "usage"
        if (prompt := _count(usage, "prompt_tokens")) is not None:
            rec.prompt_tokens = prompt
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
            rec.cached_tokens = _count(details, "cached_tokens")
    return last
