"""The [bench] table of a spec: the engine, the model, launches and rounds, the
workload and its load points ([[bench.points]])."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, Literal, Required, TypedDict, cast

from stackmatrix import engine_registry
from stackmatrix._validate import Problems, join
from stackmatrix.metric_registry import DEFAULT_HEADLINE
from stackmatrix.spec_model import (
    ENGINES,
    MAX_LAUNCHES,
    METRICS,
    PROMPT_FORMS,
    Bench,
    LoadPoint,
    Workload,
)
from stackmatrix.specfile._values import (
    check_bool,
    check_int,
    check_list,
    check_url,
    get_choice,
    get_float,
    get_int,
    get_str,
    get_table,
    or_default,
)

BENCH_KEYS = tuple(f.name for f in fields(Bench))
WORKLOAD_KEYS = tuple(f.name for f in fields(Workload))

# Resource bounds: the workload is generated up front; each
# bound is far above any real matrix.
MAX_TOKENS = 1 << 20  # input_len, output_len (one request)
MAX_PROMPTS = 1_000_000  # num_prompts, warmup, max_concurrency
# num_prompts x input_len, generated before the bench: summed over the headline and
# every load point, which are all generated (16 points once took 16 times the bound).
MAX_WORKLOAD_TOKENS = 100_000_000


def parse_bench(raw: Mapping[str, Any], p: Problems) -> Bench | None:
    if "bench" not in raw:
        return None
    b = get_table(raw, "bench", "", p)
    p.unknown_keys("bench", b, BENCH_KEYS)
    engine = get_choice(b, "engine", "bench", ENGINES, p) or engine_registry.DEFAULT_ENGINE
    launches_server = engine_registry.traits(engine).launches_server
    model = get_str(b, "model", "bench", p, required=launches_server) or ""
    _check_model(b, model, p)
    url = check_url(b.get("url"), "bench.url", p)
    if not launches_server and not url:
        p.add("bench.url", f'engine = "{engine}" needs url = "http://host:port"')
    workload, points = _workload(b, p), _points(b, p)
    _check_total_tokens(workload, points, p)
    _check_prompt_form(engine, workload, points, p)
    return Bench(
        engine=engine,
        model=model,
        url=url,
        server_args=tuple(check_list(b.get("server_args", []), "bench.server_args", p)),
        **_launches(b, p),
        rounds=get_int(b, "rounds", "bench", p, 1, MAX_LAUNCHES) or 3,
        warmup_launches=get_int(b, "warmup_launches", "bench", p, 0, MAX_LAUNCHES) or 0,
        host_warmup=check_bool(b.get("host_warmup", True), "bench.host_warmup", p),
        ready_timeout_s=or_default(get_float(b, "ready_timeout_s", "bench", p, 1, 86400), 600.0),
        tokenizer=get_str(b, "tokenizer", "bench", p),
        workload=workload,
        points=points,
        client_workers=_client_workers(b, p),
        flush_cache=check_bool(b.get("flush_cache", True), "bench.flush_cache", p),
        **_steady(b, p),
    )


MAX_DURATION_S = 86400.0


class _Steady(TypedDict):
    """The steady warm-up's fields of `Bench`, as `_steady` reads them."""

    steady_warmup: bool
    warmup_max_batches: int
    steady_tolerance: float
    min_duration_s: float


class _Launches(TypedDict, total=False):
    """`Bench.launches` and, for an adaptive plan, `Bench.min_launches`."""

    launches: Required[int]
    min_launches: int


def _steady(bench: Mapping[str, Any], p: Problems) -> _Steady:
    """The steady warm-up's keys and `min_duration_s` (docs/bench.md, "Steady state")."""
    d = Bench()
    batches = get_int(bench, "warmup_max_batches", "bench", p, 1, MAX_LAUNCHES)
    duration = get_float(bench, "min_duration_s", "bench", p, 0.0, MAX_DURATION_S)
    return {
        "steady_warmup": check_bool(
            bench.get("steady_warmup", d.steady_warmup), "bench.steady_warmup", p
        ),
        "warmup_max_batches": d.warmup_max_batches if batches is None else batches,
        "steady_tolerance": or_default(_tolerance(bench, p), d.steady_tolerance),
        "min_duration_s": or_default(duration, d.min_duration_s),
    }


def _tolerance(bench: Mapping[str, Any], p: Problems) -> float | None:
    tolerance = get_float(bench, "steady_tolerance", "bench", p, 0.0, 1.0)
    if tolerance in (0.0, 1.0):  # 0 is never met by a real server, 1 by every one
        p.add(
            "bench.steady_tolerance",
            f"{bench['steady_tolerance']!r}: expected a relative "
            "change strictly between 0 and 1 (e.g. 0.05 for 5%)",
        )
        return None
    return tolerance


def _launches(bench: Mapping[str, Any], p: Problems) -> _Launches:
    """`launches = N` (fixed) or `launches = {min = 3, max = 12}` (adaptive: cycles are
    added until every cell is decided, docs/report.md)."""
    raw = bench.get("launches", 1)
    if not isinstance(raw, dict):
        return {"launches": get_int(bench, "launches", "bench", p, 1, MAX_LAUNCHES) or 1}
    p.unknown_keys("bench.launches", raw, ("min", "max"))
    low = get_int(raw, "min", "bench.launches", p, 2, MAX_LAUNCHES)
    high = get_int(raw, "max", "bench.launches", p, 2, MAX_LAUNCHES)
    if low is None or high is None:
        if "min" not in raw or "max" not in raw:
            p.add(
                "bench.launches",
                f"{raw!r}: an adaptive plan needs both min and max, e.g. {{min = 3, max = 12}}",
            )
        return {"launches": 1}
    if high < low:
        p.add("bench.launches", f"max {high} is below min {low}")
        return {"launches": 1}
    return {"launches": high, "min_launches": low}


MAX_CLIENT_WORKERS = 256


def _client_workers(bench: Mapping[str, Any], p: Problems) -> int | Literal["auto"]:
    """`bench.client_workers`: the client's worker processes, or "auto"."""
    val = bench.get("client_workers", 1)
    if val == "auto":
        return "auto"
    if isinstance(val, str):
        p.add(
            "bench.client_workers",
            f'{val!r}: expected a number of worker processes (1 to {MAX_CLIENT_WORKERS}) or "auto"',
        )
        return 1
    return check_int(val, "bench.client_workers", p, 1, MAX_CLIENT_WORKERS) or 1


# the models stackmatrix generates itself (pipeline._with_tiny_model)
GENERATED_MODELS = ("stackmatrix:tiny-llama", "stackmatrix:tiny-llama-1b")


def _check_model(bench: Mapping[str, Any], model: str, p: Problems) -> None:
    """`model = ""` or a generated model that does not exist failed only at the bench,
    after the builds."""
    if "model" in bench and isinstance(bench["model"], str) and not model.strip():
        p.add(
            "bench.model", 'empty; name a model directory or hub name, or "stackmatrix:tiny-llama"'
        )
    elif model.startswith("stackmatrix:") and model not in GENERATED_MODELS:
        p.add(
            "bench.model",
            f"{model!r} is not a model stackmatrix generates; choose one of: "
            f"{', '.join(GENERATED_MODELS)}",
        )


def _check_prompt_form(
    engine: str, workload: Workload, points: tuple[LoadPoint, ...], p: Problems
) -> None:
    """Token-id prompts only to an engine whose completions endpoint takes them."""
    if engine_registry.traits(engine).token_id_prompts:
        return
    paths = [("bench.workload", workload)]
    paths += [(join("bench.points", i), x.workload) for i, x in enumerate(points)]
    for path, wk in paths:
        if wk.prompt_form == "token_ids":
            p.add(
                join(path, "prompt_form"),
                f'"token_ids": engine "{engine}" takes a prompt as a string only; '
                'use prompt_form = "text"',
            )
            return  # said once: a point inherits the headline's


def _tokens(workload: Workload) -> int:
    return workload.num_prompts * workload.input_len


def _check_total_tokens(workload: Workload, points: tuple[LoadPoint, ...], p: Problems) -> None:
    """Each workload alone is judged in _workload_from; this is their sum."""
    each = [_tokens(workload), *(_tokens(x.workload) for x in points)]
    if not points or max(each) > MAX_WORKLOAD_TOKENS or sum(each) <= MAX_WORKLOAD_TOKENS:
        return
    p.add(
        "bench.points",
        f"the headline and its {len(points)} load points generate "
        f"{sum(each)} prompt tokens in all (num_prompts x input_len, summed) before the "
        f"bench; at most {MAX_WORKLOAD_TOKENS}: fewer points or smaller ones",
    )


def _workload(bench: Mapping[str, Any], p: Problems) -> Workload:
    w = get_table(bench, "workload", "bench", p)
    path = "bench.workload"
    p.unknown_keys(path, w, WORKLOAD_KEYS)
    return _workload_from(w, path, p)


POINT_KEYS = ("name", "metric", *WORKLOAD_KEYS)
MAX_POINTS = 16
_POINT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,31}")


def _points(bench: Mapping[str, Any], p: Problems) -> tuple[LoadPoint, ...]:
    """`[[bench.points]]`: the headline workload's keys, some overridden, and a name."""
    raw = bench.get("points", [])
    if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
        p.add("bench.points", f"expected an array of tables ([[bench.points]]), got {raw!r}")
        return ()
    if len(raw) > MAX_POINTS:
        p.add("bench.points", f"{len(raw)} load points; at most {MAX_POINTS}")
        return ()
    base = get_table(bench, "workload", "bench", p)
    out: list[LoadPoint] = []
    for i, point in enumerate(raw):
        path = join("bench.points", i)
        p.unknown_keys(path, point, POINT_KEYS)
        name = get_str(point, "name", path, p, required=True) or f"point{i + 1}"
        if not _POINT_NAME.fullmatch(name):
            p.add(
                join(path, "name"),
                f"{name!r}: letters, digits, '.', '_' or '-', at most "
                "32, starting with a letter or digit (it names files)",
            )
        elif name in {x.name for x in out}:
            p.add(join(path, "name"), f"{name!r} names two load points")
        metric = get_choice(point, "metric", path, METRICS, p) or DEFAULT_HEADLINE
        overrides = {k: v for k, v in point.items() if k not in ("name", "metric")}
        workload = _point_workload(base, overrides, path, p)
        out.append(LoadPoint(name=name, workload=workload, metric=metric))
    return tuple(out)


def _point_workload(
    base: Mapping[str, Any], overrides: Mapping[str, Any], path: str, p: Problems
) -> Workload:
    """The headline's keys with the point's overrides. A problem of a headline key is
    said once, under bench.workload, not again for every point: only the point's own
    keys and the workload as a whole are judged here."""
    mine = Problems()
    workload = _workload_from({**base, **overrides}, path, mine)
    own = tuple(join(path, key) + ":" for key in overrides)
    if "kind" in overrides:  # `kind = "file"` here: the missing path is this point's
        own += (join(path, "path") + ":",)
    for item in mine.items:
        if item.startswith(own) or item.startswith(path + ":"):
            p.items.append(item)
    return workload


def _workload_from(w: Mapping[str, Any], path: str, p: Problems) -> Workload:
    d = Workload()
    kind = get_choice(w, "kind", path, ("random", "file"), p) or d.kind
    form = get_choice(w, "prompt_form", path, PROMPT_FORMS, p) or d.prompt_form
    file = get_str(w, "path", path, p)
    if kind == "file" and not file:
        p.add(join(path, "path"), 'kind = "file" needs path = "prompts.jsonl"')
    ignore_eos = w.get("ignore_eos", d.ignore_eos)
    if not isinstance(ignore_eos, bool):
        p.add(join(path, "ignore_eos"), f"expected true or false, got {ignore_eos!r}")
        ignore_eos = d.ignore_eos
    rate = get_float(w, "request_rate", path, p, 0.0001, math.inf)

    def num(key: str, default: int, minimum: int = 1, maximum: int | None = None) -> int:
        value = get_int(w, key, path, p, minimum, maximum)
        return default if value is None else value

    workload = Workload(
        kind=cast(Any, kind),
        input_len=num("input_len", d.input_len, maximum=MAX_TOKENS),
        output_len=num("output_len", d.output_len, maximum=MAX_TOKENS),
        range_ratio=or_default(get_float(w, "range_ratio", path, p, 0.0, 1.0), d.range_ratio),
        num_prompts=num("num_prompts", d.num_prompts, maximum=MAX_PROMPTS),
        max_concurrency=num("max_concurrency", d.max_concurrency, maximum=MAX_PROMPTS),
        request_rate=rate if rate is not None else d.request_rate,
        seed=num("seed", d.seed, minimum=0),
        ignore_eos=ignore_eos,
        path=file,
        warmup=num("warmup", d.warmup, minimum=0, maximum=MAX_PROMPTS),
        request_timeout_s=or_default(
            get_float(w, "request_timeout_s", path, p, 0.1, 86400), d.request_timeout_s
        ),
        prompt_form=cast(Any, form),
    )
    tokens = _tokens(workload)
    if tokens > MAX_WORKLOAD_TOKENS:
        p.add(
            path,
            f"num_prompts x input_len = {tokens} prompt tokens, generated before "
            f"the bench; at most {MAX_WORKLOAD_TOKENS}",
        )
    return workload
