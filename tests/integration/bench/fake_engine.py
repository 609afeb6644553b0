"""A local streaming server for what a real engine won't do on request.

Started exactly as an engine is (``python fake_engine.py -m MODULE serve MODEL --host
H --port P ...``), so the whole launch path runs: its own process group, the log,
readiness, teardown. FAKE_MODE picks the misbehaviour:

ok           streams FAKE_TOKENS tokens, FAKE_GAP_S apart, with usage
exit         prints an error and exits 3 before it listens
never_ready  listens, but /health answers 503 forever
die          serves normally, then exits during the run (after FAKE_DIE_AFTER requests)
http500      every third request answers HTTP 500
drop         every second request closes the connection mid-stream
malformed    every second request sends a line that is not JSON
no_usage     never sends `usage` (the client falls back to counting chunks)
count_ids    takes only a prompt of token ids (a list of ints), counting them as its
             prompt tokens as SGLang and vLLM do; a text prompt answers HTTP 400
port_taken   exits as a server whose port was taken before it bound it, while the file
             FAKE_TAKEN_FILE holds a number above 0 (decremented at each start); then ok
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from aiohttp import web

MODE = os.environ.get("FAKE_MODE", "ok")
TOKENS = int(os.environ.get("FAKE_TOKENS", "8"))
GAP_S = float(os.environ.get("FAKE_GAP_S", "0.005"))
DIE_AFTER = int(os.environ.get("FAKE_DIE_AFTER", "3"))
COUNT = {"n": 0}


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


async def health(_: web.Request) -> web.Response:
    if MODE == "never_ready":
        return web.Response(status=503, text="loading")
    return web.json_response({"status": "ok"})


async def completions(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    COUNT["n"] += 1
    n = COUNT["n"]
    if MODE == "die" and n > DIE_AFTER:
        print(f"fake engine: dying on request {n}", flush=True)
        os._exit(7)
    if MODE == "http500" and n % 3 == 0:
        return web.Response(status=500, text="internal error (fake)")
    prompt = body.get("prompt")
    ids = isinstance(prompt, list) and all(isinstance(x, int) for x in prompt)
    if MODE == "count_ids" and not ids:
        return web.Response(status=400, text="this server takes token ids only (fake)")
    if "ignore_eos" in body and os.environ.get("FAKE_REJECT_IGNORE_EOS"):
        return web.Response(status=422, text="ignore_eos not accepted")
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    tokens = min(TOKENS, int(body.get("max_tokens", TOKENS)))
    for i in range(tokens):
        await asyncio.sleep(GAP_S)
        if MODE == "drop" and n % 2 == 0 and i == tokens // 2:
            assert request.transport is not None
            request.transport.abort()
            return resp
        if MODE == "malformed" and n % 2 == 0 and i == 1:
            await resp.write(b"data: {this is not json\n\n")
            continue
        await resp.write(_event({"choices": [{"index": 0, "text": f" w{i}"}]}))
    final: dict[str, Any] = {"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}
    if MODE != "no_usage":
        counted = len(prompt) if MODE == "count_ids" and isinstance(prompt, list) else 4
        final["usage"] = {"prompt_tokens": counted, "completion_tokens": tokens}
    await resp.write(_event(final))
    await resp.write(b"data: [DONE]\n\n")
    return resp


async def server_info(_: web.Request) -> web.Response:
    # the shape of sglang's /server_info: resolved server args plus runtime state
    return web.json_response(
        {
            "attention_backend": os.environ.get("FAKE_ATTENTION", "flashinfer"),
            "port": 1,
            "internal_states": [{"last_gen_throughput": 12.5}],
            "version": "0.5.9-fake",
        }
    )


def _taken_once() -> bool:
    """One start fewer to fail in FAKE_TAKEN_FILE; whether this one fails."""
    path = Path(os.environ["FAKE_TAKEN_FILE"])
    left = int(path.read_text().strip() or 0)
    if left <= 0:
        return False
    path.write_text(str(left - 1))
    return True


def main(argv: list[str]) -> int:
    if argv[:1] == ["-c"]:  # the version probe: `python -c "...version..."`
        print("0.0.0+fake")
        return 0
    port = int(argv[argv.index("--port") + 1])
    host = argv[argv.index("--host") + 1]
    print(f"fake engine mode={MODE} argv={argv}", flush=True)
    if "FAKE_NOTE" in os.environ:  # what the launch handed it, for the tests to read back
        print(f"fake engine note={os.environ['FAKE_NOTE']}", flush=True)
    if MODE == "port_taken" and _taken_once():
        print(
            f"ERROR:    [Errno 98] error while attempting to bind on address "
            f"('{host}', {port}): address already in use",
            flush=True,
        )
        return 1
    if MODE == "exit":
        print("fake engine: CUDA error: no kernel image is available (fake)", flush=True)
        return 3
    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/health_generate", health)
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/server_info", server_info)
    web.run_app(app, host=host, port=port, print=None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
