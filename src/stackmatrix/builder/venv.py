"""The `venv` backend: one uv virtual environment per environment, keyed by the content
hash (what the cell installs, not its server arguments or variables): cells that differ
only in how the server runs share it, and so share its JIT caches (builder/jitcache.py: on
the H200 each of three attention cells of one environment compiled flashinfer's
kernels in its own venv's warm-up, 81-191 s, where one compile would do).

Steps: `uv venv` with the machine's interpreter, `uv pip compile` of the pins with
the cell's indexes into a lock (with index annotations: where each distribution
came from), `uv pip sync` of that lock, then the installed distributions are read
back with the environment's own interpreter. An environment whose marker says it
was completed for the same content hash, and whose installed set still matches
its lock, is reused.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from stackmatrix import _atomic, _proc
from stackmatrix._secrets import redact_files, redact_text
from stackmatrix.builder import _uv
from stackmatrix.builder.base import BuildOutcome, Environment, LockEntry
from stackmatrix.builder.lock import (
    lock_digest,
    lockscript_path,
    parse_compiled,
    parse_lockscript_output,
)
from stackmatrix.builder.resolver_drift import detect_drift
from stackmatrix.findings import Finding, Severity
from stackmatrix.results import Status
from stackmatrix.spec_model import Cell

log = logging.getLogger(__name__)
MARKER = "stackmatrix-env.json"
STEP_TIMEOUT_S = 3600.0


def env_dir_for(work_dir: Path, content_hash: str) -> Path:
    """One directory per environment; a lock beside it lets one cell build it while
    another cell of the same environment waits, then verifies and reuses it."""
    return work_dir / "envs" / f"venv-{content_hash[:12]}"


def build(
    cell: Cell, *, spec_dir: Path, work_dir: Path, log_path: Path, content_hash: str
) -> BuildOutcome:
    uv = _uv.uv_binary()
    if uv is None:
        return _failed("tool_missing", "uv is not on PATH; install it with `pip install uv`")
    env_dir = env_dir_for(work_dir, content_hash)
    with _locked(env_dir.with_suffix(".lock")):
        if env_dir.is_symlink():  # never reuse, delete or build into what it points to
            return _failed(
                "env_dir_link",
                f"the environment directory {env_dir} is a "
                "symbolic link; stackmatrix neither follows nor removes it: remove "
                "the link (its target is left alone) and run again",
            )
        reused = _try_reuse(cell, env_dir, content_hash, log_path)
        if reused is not None:
            return reused
        return _fresh_build(uv, cell, spec_dir, env_dir, log_path, content_hash)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Two runs building the same environment at once would corrupt it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _python(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


def _environment(cell: Cell, env_dir: Path) -> Environment:
    site = sorted((env_dir / "lib").glob("python3*/site-packages"))
    return Environment(
        backend="venv",
        python=(str(_python(env_dir)),),
        prefix=env_dir,
        site_packages=tuple(site),
        env=dict(cell.env),
    )


def _try_reuse(cell: Cell, env_dir: Path, content_hash: str, log_path: Path) -> BuildOutcome | None:
    marker = env_dir / MARKER
    if not marker.is_file():
        return None
    try:
        saved = json.loads(marker.read_text())
    except ValueError:
        return None
    if saved.get("content_hash") != content_hash:
        return None
    lock = _read_installed(cell, env_dir, log_path, saved.get("compiled", {}))
    if isinstance(lock, str) or lock_digest(lock) != saved.get("lock_digest"):
        log.info("%s: environment %s no longer verifies; rebuilding", cell.id, env_dir)
        return None
    _log(log_path, f"reused {env_dir}: content hash {content_hash[:12]} unchanged, lock verified")
    return BuildOutcome(
        status=Status.OK,
        environment=_environment(cell, env_dir),
        message=f"reused existing environment {env_dir} (unchanged, verified)",
        lock=tuple(lock),
        findings=tuple(detect_drift(cell, lock, preinstalled=_layered(cell))),
        reused=True,
        data={"env_dir": str(env_dir), "timings": {}},
    )


def _fresh_build(
    uv: str, cell: Cell, spec_dir: Path, env_dir: Path, log_path: Path, content_hash: str
) -> BuildOutcome:
    if env_dir.exists():
        shutil.rmtree(env_dir)  # a partial or stale environment of ours, same hash key
    env_dir.mkdir(parents=True)
    ca = _uv.combined_ca_bundle(cell, spec_dir, env_dir / "ca-bundle.pem")
    env = _uv.uv_env(ca)
    timings: dict[str, float] = {}

    def step(name: str, argv: list[str]) -> _proc.ProcResult:
        result = _proc.run(argv, log_path=log_path, timeout=STEP_TIMEOUT_S, env=env)
        timings[name] = round(timings.get(name, 0.0) + result.duration_s, 3)  # retries add up
        return result

    base = _inherited_python(cell) or _uv.find_python(cell.python)
    created = step("venv", [uv, "venv", "--python", base, str(env_dir)])
    if not created.ok:
        return _failed(
            "python_missing",
            f"uv could not create a Python {cell.python} environment:\n{created.tail(8)}",
            timings,
        )
    if cell.inherit:
        problem = _inherit(base, cell.python, env_dir, log_path)
        if problem is not None:
            return _failed("inherit_failed", problem, timings)
    compiled: dict[str, tuple[str, str]] = {}
    if cell.pins and cell.no_deps:
        # exactly the pins, on top of what the interpreter already has; the check
        # reports requirements that nothing installed satisfies
        py = ["--python", str(_python(env_dir))]
        idx = _uv.index_args(cell, spec_dir)
        installed = step("install", [uv, "pip", "install", "--no-deps", *py, *idx, *cell.pins])
        if not installed.ok:
            return _resolve_failed(cell, installed, timings, what="install")
    elif cell.pins:
        req_in = env_dir / "requirements.in"
        lock_txt = env_dir / "lock.txt"
        _write_private(req_in, "".join(f"{p}\n" for p in cell.pins))
        py = ["--python", str(_python(env_dir))]
        idx = _uv.index_args(cell, spec_dir)
        try:
            resolved = step(
                "resolve",
                [
                    uv,
                    "pip",
                    "compile",
                    str(req_in),
                    "-o",
                    str(lock_txt),
                    "--emit-index-annotation",
                    *py,
                    *idx,
                ],
            )
            if not resolved.ok:
                return _resolve_failed(cell, resolved, timings)
            compiled = _redacted_compiled(parse_compiled(lock_txt.read_text()))
            synced = _sync(step, log_path, [uv, "pip", "sync", str(lock_txt), *py, *idx])
            if not synced.ok:
                return _resolve_failed(cell, synced, timings, what="install")
        finally:
            redact_files(req_in, lock_txt)
    lock = _read_installed(cell, env_dir, log_path, compiled)
    if isinstance(lock, str):
        return _failed("inventory_failed", lock, timings)
    _atomic.write_json(
        env_dir / MARKER,
        {
            "schema_version": 1,
            "content_hash": content_hash,
            "lock_digest": lock_digest(lock),
            "compiled": compiled,
            "created": time.time(),
        },
    )
    return BuildOutcome(
        status=Status.OK,
        environment=_environment(cell, env_dir),
        message=f"built {env_dir} ({len(lock)} distributions)",
        lock=tuple(lock),
        findings=tuple(detect_drift(cell, lock, preinstalled=_layered(cell))),
        data={"env_dir": str(env_dir), "timings": timings},
    )


def _sync(
    step: Callable[[str, list[str]], _proc.ProcResult], log_path: Path, argv: list[str]
) -> _proc.ProcResult:
    """Install the lock from uv's cache alone first: the resolve just refreshed what the
    lock names, and asking the index again cost ~0.25 s of a 2 s build of the CPU stack
    (benchmarks/bench_build.py). What the cache lacks (a cold one holds metadata, not
    every wheel) fails fast offline; then the same sync runs online."""
    if "--offline" in argv:
        return step("install", argv)
    cached = step("install", [*argv, "--offline"])
    if cached.ok:
        return cached
    _log(log_path, "not everything the lock names is in uv's cache; installing online")
    return step("install", argv)


def _write_private(path: Path, text: str) -> None:
    """A file only its owner reads: it holds the pins as given, credentials included,
    until uv has read it (redact_files)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def _redacted_compiled(compiled: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    return {name: (version, redact_text(source)) for name, (version, source) in compiled.items()}


def _layered(cell: Cell) -> bool:
    """What the resolver did not choose: inherited packages, or pins installed as given."""
    return bool(cell.inherit or cell.no_deps)


def _inherited_python(cell: Cell) -> str | None:
    if cell.inherit == "current":
        return sys.executable
    return cell.inherit


_INHERIT_PTH = "_stackmatrix_inherit.pth"


def _inherit(base: str, python: str, env_dir: Path, log_path: Path) -> str | None:
    """Let the venv see `base`'s packages behind its own: a .pth naming base's site dirs.

    uv's --system-site-packages would add the packages of the *base* interpreter
    only, and an image's stack often lives in a venv of its own (an H200 host's
    torch is in /opt/torch/.venv): a .pth works for both. Directories a .pth adds
    come after the venv's site-packages, so a pin of the cell shadows the image's.
    """
    code = "import json, site, sys; print(json.dumps([site.getsitepackages(), sys.version]))"
    result = _proc.run([base, "-c", code], log_path=log_path, timeout=60)
    try:
        sites, version = json.loads(result.output.strip().splitlines()[-1])
    except (ValueError, IndexError, TypeError):
        return f"could not read the site-packages of {base}:\n{result.tail(8)}"
    if not str(version).startswith(python + "."):
        return (
            f"inherit = {base!r} is Python {str(version).split()[0]} but the cell says "
            f"python = {python!r}; make them agree"
        )
    dirs = [d for d in sites if Path(d).is_dir()]
    site = sorted((env_dir / "lib").glob("python3*/site-packages"))
    if not site:
        return f"the new environment {env_dir} has no site-packages directory"
    (site[0] / _INHERIT_PTH).write_text("".join(f"{d}\n" for d in dirs), encoding="utf-8")
    _log(log_path, f"inherits the packages of {base}: {', '.join(dirs)}")
    return None


def _read_installed(
    cell: Cell, env_dir: Path, log_path: Path, compiled: dict[str, tuple[str, str]]
) -> list[LockEntry] | str:
    py = _python(env_dir)
    if not py.exists():
        return f"{py} does not exist"
    result = _proc.run([str(py), str(lockscript_path())], timeout=120)
    if not result.ok:
        _log(log_path, result.output)
        return f"listing the installed distributions failed:\n{result.tail(8)}"
    compiled = {k: (v[0], v[1]) for k, v in compiled.items()}
    return parse_lockscript_output(result.output, cell, compiled)


def _resolve_failed(
    cell: Cell, result: _proc.ProcResult, timings: dict[str, float], what: str = "resolution"
) -> BuildOutcome:
    index = _uv.unreachable_index(result.output, cell)
    if index is not None:
        finding = Finding(
            code="SM-INDEX-UNREACHABLE",
            severity=Severity.FAIL,
            cell=cell.id,
            subject=index,
            message=f"the package index {index} cannot be reached from this machine, so "
            f"the cell cannot be built here; run it where that index is reachable, or "
            f"mirror its wheels and point find_links at the mirror",
        )
        return _failed("index_unreachable", finding.message, timings, (finding,))
    code = "resolution_failed" if what == "resolution" else "install_failed"
    finding = Finding(
        code="SM-RESOLVE-FAILED" if what == "resolution" else "SM-INSTALL-FAILED",
        severity=Severity.FAIL,
        cell=cell.id,
        subject=", ".join(cell.pins),
        message=f"uv {what} failed for the cell's pins; the resolver said:\n{result.tail(12)}",
    )
    return _failed(code, finding.message, timings, (finding,))


def _failed(
    code: str,
    message: str,
    timings: dict[str, float] | None = None,
    findings: tuple[Finding, ...] = (),
) -> BuildOutcome:
    return BuildOutcome.failed(code, message, findings=findings, data={"timings": timings or {}})


def _log(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text.rstrip("\n") + "\n")
