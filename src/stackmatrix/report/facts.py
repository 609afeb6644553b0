"""Everything recorded about one cell, flattened to `source:name -> value` facts.

Sources: the resolved lock (build), the runtime probe and driver (check), the effective
server configuration and engine version (bench), environment variables, and facts
read from server logs. The drift module compares these between a cell and the baseline.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from packaging.utils import canonicalize_name

from stackmatrix._secrets import is_secret_name, is_secret_value
from stackmatrix.jsontypes import JSONObject
from stackmatrix.report.load import CellResults
from stackmatrix.report.logfacts import LogPattern, read_facts

_CUDA_SUFFIX = re.compile(r"-cu\d+$")
_MAX_DEPTH = 3


@dataclass(frozen=True, kw_only=True)
class Fact:
    key: str
    value: str
    source: str  # the record it comes from: "lock", "probe", "server", "env" or "log"
    detail: str | None = None  # compared too (a package's source index), shown beside
    evidence: str | None = None  # the log line behind a log fact


def text(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def redact(name: str, value: str) -> str:
    """Secrets never reach a report: keep a short hash so a change still shows."""
    if not (is_secret_name(name) or is_secret_value(value)):
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:8]
    return f"<redacted sha256:{digest}>"


def package_key(name: str) -> str:
    """nvidia-nccl-cu12 and nvidia-nccl-cu13 are the same library for a comparison."""
    return "package:" + _CUDA_SUFFIX.sub("", canonicalize_name(name))


@dataclass(frozen=True, kw_only=True)
class CellFacts:
    facts: dict[str, Fact]
    sources: frozenset[str]  # the sources this cell recorded at all
    # keys whose value differs between this cell's own launches: drawn per launch
    # (a seed, a port), so never a difference between cells
    varying: frozenset[str] = frozenset()


def collect(cell: CellResults, patterns: Sequence[LogPattern]) -> CellFacts:
    facts: dict[str, Fact] = {}
    sources: set[str] = set()
    for found in (
        _lock_facts(cell),
        _probe_facts(cell),
        _server_facts(cell),
        _env_facts(cell),
        _log_facts(cell, patterns),
    ):
        for fact in found:
            sources.add(fact.source)
            facts.setdefault(fact.key, fact)
    return CellFacts(facts=facts, sources=frozenset(sources), varying=_varying_keys(cell))


def _varying_keys(cell: CellResults) -> frozenset[str]:
    """Server settings two launches of the cell report with different values.

    A launch that lacks a setting (its /server_info failed and the launch arguments stood
    in) says nothing about that setting, so only launches that report it are compared.
    """
    seen: dict[str, set[str]] = {}
    for launch in (*cell.bench.warmup_launches, *cell.bench.launches):
        for key, value in (launch.effective_config or {}).items():
            seen.setdefault(key, set()).add(text(value))
    return frozenset(f"server:{k}" for k, values in seen.items() if len(values) > 1)


def _lock_facts(cell: CellResults) -> list[Fact]:
    build = cell.build
    out = [
        Fact(
            key=package_key(str(p["name"])),
            value=_package_value(p),
            source="lock",
            detail=str(p.get("source") or "") or None,
        )
        for p in build.lock or ()
        if p.get("name")
    ]
    if build.python_version:
        out.append(Fact(key="python", value=build.python_version, source="lock"))
    return out


def _package_value(p: JSONObject) -> str:
    name, version = str(p["name"]), str(p.get("version", "?"))
    # Keep a cuda-suffixed name visible when two spellings share one key.
    return f"{version} ({name})" if _CUDA_SUFFIX.search(canonicalize_name(name)) else version


def _probe_facts(cell: CellResults) -> list[Fact]:
    check = cell.check
    out: list[Fact] = []
    probe = check.probe
    if probe is not None:
        out += [
            Fact(key=f"probe:{k}", value=v, source="probe")
            for k, v in _flatten(probe, skip=("env",))
        ]
        out += _env_from(probe.get("env"))
    driver = check.driver
    if driver is not None:
        out += [Fact(key=f"driver:{k}", value=v, source="probe") for k, v in _flatten(driver)]
    return out


def _flatten(
    data: JSONObject, prefix: str = "", depth: int = 0, skip: tuple[str, ...] = ()
) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key, value in data.items():
        if key in skip:
            continue
        name = f"{prefix}{key}"
        if isinstance(value, dict) and depth < _MAX_DEPTH:
            out += _flatten(value, f"{name}.", depth + 1)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            items = [v for v in value if isinstance(v, dict)]  # all of them
            for i, item in enumerate(items):
                out += _flatten(item, f"{name}[{i}].", depth + 1)
        else:
            out.append((name, text(value)))
    return out


def _server_facts(cell: CellResults) -> list[Fact]:
    bench = cell.bench
    config = bench.effective_config
    out: list[Fact] = []
    if config is not None:
        # the engine's version is one row, "engine version", not also "engine_version"
        # from the effective config
        folded = ("engine_version",) if bench.engine_version else ()
        out += [
            Fact(key=f"server:{k}", value=redact(k, text(v)), source="server")
            for k, v in config.items()
            if k not in folded
        ]
    if bench.engine_version:
        engine = f"{'engine' if bench.engine is None else bench.engine} {bench.engine_version}"
        out.append(Fact(key="engine:version", value=engine, source="server"))
    return out


def _env_facts(cell: CellResults) -> list[Fact]:
    environment = cell.build.environment or {}
    return _env_from(environment.get("env")) + _env_from(cell.definition.get("env"))


def _env_from(env: object) -> list[Fact]:
    pairs: list[tuple[str, object]]
    if isinstance(env, dict):
        pairs = list(env.items())
    elif isinstance(env, list):
        pairs = [(str(p[0]), p[1]) for p in env if isinstance(p, list | tuple) and len(p) == 2]
    else:
        return []
    return [
        Fact(key=f"env:{name}", value=redact(name, text(value)), source="env")
        for name, value in pairs
    ]


def _log_facts(cell: CellResults, patterns: Sequence[LogPattern]) -> list[Fact]:
    found = read_facts(cell.measured_server_logs(), patterns, engine=log_engine(cell))
    return [
        Fact(key=_log_key(f.fact), value=f.value, source="log", evidence=f.evidence)
        for f in sorted(found.values(), key=lambda f: f.fact)
    ]


def log_engine(cell: CellResults) -> str | None:
    return cell.bench.engine or None


def _log_key(fact: str) -> str:
    # "server.X" facts stand in for a resolved server argument the engine did not
    # report; collect() keeps the engine's own value when it has one.
    if fact.startswith("server."):
        return "server:" + fact.removeprefix("server.")
    return f"log:{fact}"
