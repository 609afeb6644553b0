"""Run the runtime probe with an environment's own interpreter and read its JSON."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stackmatrix import _proc, engine_registry
from stackmatrix._secrets import redact
from stackmatrix.check import relevance
from stackmatrix.findings import Finding, Severity

log = logging.getLogger(__name__)

SCRIPT = Path(__file__).with_name("_probe_script.py")
MARKER = "STACKMATRIX-PROBE-JSON: "
DEFAULT_TIMEOUT_S = 600.0
_DRIVER_MISSING = re.compile(r"libcuda\.so\.1: cannot open shared object file")


class ProbeFailed(RuntimeError):
    """The probe did not produce its JSON (interpreter missing, crash, timeout)."""


def probe_argv(
    python: Sequence[str],
    modules: Sequence[str] | None = None,
    *,
    engine: str | None = None,
    serving_modules: Sequence[str] | None = None,
) -> list[str]:
    """argv that runs the probe: its source is passed with -c so that it also works
    where the script's host path is not visible (a container's interpreter). The script
    imports nothing of ours, so what it imports comes from the engine registry here:
    `modules` (default: every engine's extension modules) and the serving path.

    With `engine` (or `serving_modules`, tried in order, replacing the engine's), it
    first imports the serving path and reports the shared objects then mapped."""
    argv = [*python, "-c", SCRIPT.read_text(encoding="utf-8"), "--"]
    argv += ["--modules", ",".join(modules or engine_registry.extension_modules())]
    if engine:
        argv += ["--engine", engine]
    entry, model_load = serving_path(engine, serving_modules)
    if entry:
        argv += ["--serving-modules", ",".join(entry)]
    if model_load:
        argv += ["--model-load-modules", ",".join(model_load)]
    return argv


def serving_path(
    engine: str | None, serving_modules: Sequence[str] | None = None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(entry modules, model-load modules) the probe imports first: `serving_modules`
    when given (for an engine the registry does not know; nothing after them), else the
    engine's own, none for an engine without a serving path of its own (external)."""
    if serving_modules:
        return tuple(serving_modules), ()
    traits = engine_registry.find(engine)
    if traits is None:
        return (), ()
    return traits.entry_modules, traits.model_load_modules


def parse_output(text: str) -> dict[str, Any]:
    for line in reversed(text.splitlines()):
        if line.startswith(MARKER):
            data: dict[str, Any] = json.loads(line[len(MARKER) :])
            return _without_secrets(data)
    raise ProbeFailed(
        "the probe printed no result; its output ends with:\n" + "\n".join(text.splitlines()[-15:])
    )


def _without_secrets(data: dict[str, Any]) -> dict[str, Any]:
    """The script hides variables by name only (it imports nothing of ours); a value with
    a credential's shape (a URL's password, an `hf_` token) is hidden here, before the
    data is recorded in check.json."""
    if isinstance(data.get("env"), dict):
        data["env"] = redact(data["env"])
    return data


def run_probe(
    python: Sequence[str],
    *,
    modules: Sequence[str] | None = None,
    log_path: Path | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    env: dict[str, str] | None = None,
    engine: str | None = None,
    serving_modules: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The probe JSON of the interpreter `python` (an argv prefix)."""
    argv = probe_argv(python, modules, engine=engine, serving_modules=serving_modules)
    # The environment's variables on top of ours, never instead of them: the docker
    # backend's `python` is the docker CLI, which needs DOCKER_HOST, DOCKER_CONFIG and
    # HOME to reach the engine that built the image (a rootless engine, a second one).
    merged = None if env is None else {**os.environ, **env}
    try:
        result = _proc.run(argv, log_path=log_path, timeout=timeout, env=merged)
    except FileNotFoundError as exc:
        raise ProbeFailed(f"cannot run {python[0]!r}: {exc}") from exc
    if result.timed_out:
        raise ProbeFailed(f"the probe ran past {timeout:.0f}s and was stopped")
    if result.returncode != 0:
        raise ProbeFailed(f"the probe exited with {result.returncode}:\n{result.tail(15)}")
    return parse_output(result.output)


def probe_check(
    python: Sequence[str],
    log_path: Path | None,
    env: dict[str, str],
    cell: str | None,
    *,
    engine: str | None = None,
    serving_modules: Sequence[str] | None = None,
) -> tuple[dict[str, Any] | None, list[Finding]]:
    """The probe's data (None when it did not run) and its findings: SM-PROBE-FAILED,
    SM-IMPORT-FAILED or SM-IMPORT-NEEDS-DRIVER, SM-NO-GPU, SM-SMOKE-FAILED,
    SM-SERVING-PATH-UNKNOWN, SM-SERVING-IMPORT-FAILED, SM-SERVING-PARTIAL,
    SM-SERVING-STUB-LIBCUDA."""
    try:
        data = run_probe(
            python,
            log_path=log_path,
            env=env or None,
            engine=engine,
            serving_modules=serving_modules,
        )
    except ProbeFailed as exc:
        return None, [
            Finding(
                code="SM-PROBE-FAILED",
                severity=Severity.WARN,
                cell=cell,
                subject="probe",
                message=f"the runtime probe did not run: {exc}",
            )
        ]
    out: list[Finding] = []
    for name, res in sorted(data.get("imports", {}).items()):
        if res.get("installed") and not res.get("ok"):
            out.append(_import_finding(name, res.get("error", {}), data, cell))
    out += _serving_findings(data.get("serving"), cell)
    out += _entry_findings(data, cell)
    out += _stub_findings(data, cell)
    if not data.get("gpu", {}).get("cuda_available"):
        out.append(
            Finding(
                code="SM-NO-GPU",
                severity=Severity.INFO,
                cell=cell,
                subject="gpu",
                message=f"no CUDA device ({data.get('gpu', {}).get('reason')}); "
                "GPU smoke ops not run",
            )
        )
    elif data.get("smoke", {}).get("ok") is False:
        out.append(
            Finding(
                code="SM-SMOKE-FAILED",
                severity=Severity.FAIL,
                cell=cell,
                subject="gpu",
                message=f"small GPU ops failed: {data['smoke']}",
                details=data["smoke"],
            )
        )
    return data, out


def _serving_findings(serving: Any, cell: str | None) -> list[Finding]:
    """SM-SERVING-PATH-UNKNOWN: no entry module of the serving path imported, so which
    libraries the server loads is unknown and every extension is judged (relevance.py)."""
    if not isinstance(serving, dict) or serving.get("imported"):
        return []
    attempts = [a for a in serving.get("modules", []) if isinstance(a, dict)]
    why = "; ".join(_attempt_text(a) for a in attempts)
    return [
        Finding(
            code="SM-SERVING-PATH-UNKNOWN",
            severity=Severity.INFO,
            cell=cell,
            subject=str(serving.get("engine") or "serving"),
            message="no serving module imported, so every extension is judged as one the "
            f"server loads ({why or serving.get('error')})",
            details={"modules": attempts},
        )
    ]


def _entry_findings(data: dict[str, Any], cell: str | None) -> list[Finding]:
    """The server's own entry module failing to import. Its later entry modules are
    fallbacks (a lighter module of the same engine) that keep the loaded set known; they
    do not make the server start. SM-SERVING-IMPORT-FAILED (fail) when the error is one
    a GPU host would raise too; SM-SERVING-PARTIAL (info) when only the driver's
    libcuda.so.1 is missing here, so the loaded set is a part of the serving path."""
    serving = data.get("serving")
    entry = _failed_entry(serving) if isinstance(serving, dict) else None
    if entry is None:
        return []
    assert isinstance(serving, dict)
    name, err = str(entry.get("module")), entry.get("error") or {}
    text = f"{err.get('type')}: {str(err.get('message')).strip()[:600]}"
    if _DRIVER_MISSING.search(str(err.get("message"))) and not _has_gpu(data):
        imported = serving.get("imported")
        code, severity = "SM-SERVING-PARTIAL", Severity.INFO
        message = (
            f"the server's entry module {name} needs the NVIDIA driver's libcuda.so.1, "
            "which this machine lacks; which libraries the server loads is judged from "
            f"{imported or 'nothing'}, a part of its serving path ({_no_stub(data)}), "
            "and is read again on a GPU host"
        )
    else:
        code, severity = "SM-SERVING-IMPORT-FAILED", Severity.FAIL
        cannot = "fails to import, so the server cannot start"
        message = f"the server's entry module {name} {cannot}: {text}"
    finding = Finding(
        code=code,
        severity=severity,
        cell=cell,
        subject=name,
        message=message,
        details={"error": err},
    )
    return [finding]


def _no_stub(data: dict[str, Any]) -> str:
    """Why the probe did not import the entry with the CUDA toolkit's stub libcuda."""
    libcuda = data.get("libcuda")
    if not isinstance(libcuda, dict):
        return "this probe does not try the toolkit's stub libcuda"
    if not libcuda.get("stub"):
        return (
            "no stub libcuda.so found: none under CUDA_HOME's or /usr/local/cuda's "
            "lib64/stubs, targets/*/lib/stubs, nor in an nvidia wheel"
        )
    return f"the stub {libcuda['stub']} was tried: {libcuda.get('stub_error')}"


def judged_on(data: dict[str, Any] | None) -> str | None:
    """Which loaded set the serving path was judged on: "entry" (the server's own entry
    module imported), "entry with stub libcuda" (it imported with the toolkit's stub in
    place of the driver's libcuda.so.1), "fallback" (a lighter entry module), or None."""
    serving = (data or {}).get("serving")
    if not isinstance(serving, dict) or not serving.get("imported"):
        return None
    attempts = [a for a in serving.get("modules", []) if isinstance(a, dict)]
    if not attempts or attempts[0].get("module") != serving["imported"]:
        return "fallback"
    libcuda = (data or {}).get("libcuda")
    stub = isinstance(libcuda, dict) and libcuda.get("source") == "stub"
    return "entry with stub libcuda" if stub else "entry"


def _stub_findings(data: dict[str, Any], cell: str | None) -> list[Finding]:
    """SM-SERVING-STUB-LIBCUDA: the server's entry imported with the toolkit's stub in
    place of the driver's libcuda.so.1, which this machine lacks; what it mapped is the
    serving path, read without a GPU."""
    if judged_on(data) != "entry with stub libcuda":
        return []
    name, stub = str(data["serving"]["imported"]), str(data["libcuda"].get("stub"))
    message = (
        f"the server's entry module {name} imported with the CUDA toolkit's stub {stub} as "
        "libcuda.so.1 (this machine has no NVIDIA driver); which libraries the server "
        f"loads is judged from {name} itself"
    )
    finding = Finding(
        code="SM-SERVING-STUB-LIBCUDA",
        severity=Severity.INFO,
        cell=cell,
        subject=name,
        message=message,
        details={"stub": stub, "judged_on": "entry with stub libcuda"},
    )
    return [finding]


def _failed_entry(serving: dict[str, Any]) -> dict[str, Any] | None:
    """The first entry module that failed for a reason other than its absence from this
    version (an older engine without it), before the one that imported."""
    imported = serving.get("imported")
    for attempt in serving.get("modules", []):
        if not isinstance(attempt, dict) or attempt.get("module") == imported:
            return None
        if not attempt.get("ok") and not relevance.absent(attempt):
            return attempt
    return None


def _attempt_text(attempt: dict[str, Any]) -> str:
    err = attempt.get("error") or {}
    return f"{attempt.get('module')}: {err.get('type')}: {str(err.get('message'))[:300]}"


def _import_finding(name: str, err: Any, data: dict[str, Any], cell: str | None) -> Finding:
    if _DRIVER_MISSING.search(str(err.get("message"))) and not _has_gpu(data):
        code, severity = "SM-IMPORT-NEEDS-DRIVER", Severity.INFO
        message = (
            f"import {name} needs the NVIDIA driver's libcuda.so.1, which "
            "this machine (no GPU, no driver) lacks; it is tried again on a GPU host"
        )
    else:
        code, severity = "SM-IMPORT-FAILED", Severity.FAIL
        message = f"import {name} fails: {err.get('type')}: {err.get('message')}"
    return Finding(
        code=code,
        severity=severity,
        cell=cell,
        subject=name,
        message=message,
        details={"error": err},
    )


def _has_gpu(probe_data: dict[str, Any]) -> bool:
    return bool(probe_data.get("gpu", {}).get("cuda_available") or probe_data.get("driver"))


def probe_main(argv: Sequence[str]) -> int:
    """`stackmatrix probe [--python PY] [--modules a,b] [--engine E] [--out FILE]`."""
    parser = argparse.ArgumentParser(prog="stackmatrix probe", description=probe_main.__doc__)
    parser.add_argument(
        "--python", default=sys.executable, help="interpreter to probe (default: this one)"
    )
    parser.add_argument("--modules", default=None, help="comma-separated modules to import")
    parser.add_argument(
        "--engine", default=None, help="import its serving path first; report what it maps"
    )
    parser.add_argument(
        "--serving-modules", default=None, help="comma-separated serving modules, in order"
    )
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON to this file")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S)
    args = parser.parse_args(list(argv))
    modules = args.modules.split(",") if args.modules else None
    try:
        data = run_probe(
            [args.python],
            modules=modules,
            timeout=args.timeout,
            engine=args.engine,
            serving_modules=args.serving_modules.split(",") if args.serving_modules else None,
        )
    except ProbeFailed as exc:
        print(f"stackmatrix probe: {exc}", file=sys.stderr)
        return 1
    if args.out is not None:
        from stackmatrix import _atomic

        _atomic.write_json(args.out, data)
    print(json.dumps(data, indent=2))
    return 0
