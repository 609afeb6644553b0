"""Serving-path relevance: which findings are about files the server never loads.

An environment holds more native extensions than its server loads: torchao's and
torchaudio's libraries next to an SGLang server that never imports them, or imports
them behind a guarded import and goes on without them. A finding about such a file
cries wolf. The runtime probe imports the engine's serving modules and reports the
shared objects its process then has mapped (_probe_script.py `probe_serving`); a
finding about a file of the import path that is not among them is *latent*: it stays
in the findings, marked `details["latent"]`, and no longer decides the verdict
(static.verdict_of).

Conservative where the facts are missing: without a loaded set (no probe, no engine,
no serving module imported, a truncated list) nothing is latent; nor is a file of a
package whose serving import failed (the server would load it where the import
works, e.g. on a GPU host), nor a finding that is not about one file (the driver,
torch's CUDA major, an import error).
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, cast

from stackmatrix.check import coverage, libs
from stackmatrix.findings import Finding

# about the driver's libraries, which the driver provides to every process alike
_NEVER_LATENT = frozenset({"SM-DRIVER-LIB-ABSENT"})
_MISSING = re.compile(r"No module named '([\w.]+)'")
LATENT_NOTE = "latent: the serving process does not load this file"


class LoadedSet(NamedTuple):
    """What the serving process had mapped, as host files."""

    identities: frozenset[tuple[int, int]]  # (st_dev, st_ino): immune to symlinked paths
    paths: frozenset[str]
    failed_packages: frozenset[str]  # top-level packages whose serving import failed
    module: str
    imported_packages: frozenset[str] = frozenset()  # top-level packages imported fine

    def loads(self, path: Path) -> bool:
        ident = _identity(path)
        return (ident is not None and ident in self.identities) or (
            os.path.realpath(path) in self.paths
        )


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def loaded_set(probe_data: Mapping[str, Any] | None, root: Path) -> LoadedSet | None:
    """The loaded set the probe reported, None when it says nothing about the server."""
    serving = (probe_data or {}).get("serving")
    loaded = (probe_data or {}).get("loaded_libraries")
    if not isinstance(serving, dict) or not isinstance(loaded, list):
        return None
    if not serving.get("imported") or serving.get("truncated"):
        return None
    files = [libs.in_root(root, p) for p in loaded if isinstance(p, str)]
    attempts = [a for a in serving.get("modules", []) if isinstance(a, dict)]
    failed = {_top(a) for a in attempts if not a.get("ok") and not absent(a)}
    return LoadedSet(
        identities=frozenset(i for f in files if (i := _identity(f)) is not None),
        paths=frozenset(os.path.realpath(f) for f in files),
        failed_packages=frozenset(failed - {""}),
        module=str(serving["imported"]),
        imported_packages=frozenset(
            ({_top(a) for a in attempts if a.get("ok")} | set(_names(serving.get("packages"))))
            - {""}
        ),
    )


def _names(raw: Any) -> list[str]:
    return [n for n in raw if isinstance(n, str)] if isinstance(raw, list) else []


def _top(attempt: Mapping[str, Any]) -> str:
    return str(attempt.get("module", "")).split(".", 1)[0]


def absent(attempt: Mapping[str, Any]) -> bool:
    """An import that failed only because that very module, or a subpackage of its
    package on the way to it, is not in this version (vllm._C_stable_libtorch before
    the stable-ABI build; an engine release without `srt.entrypoints`): nothing the
    server would load failed, so the package's files can still be latent. A missing
    dependency names another module, and a missing top-level package means the engine
    is not installed at all: both stay failures."""
    error = attempt.get("error")
    if not isinstance(error, dict) or error.get("type") != "ModuleNotFoundError":
        return False
    module = str(attempt.get("module"))
    missing = _MISSING.fullmatch(str(error.get("message")))
    name = missing.group(1) if missing else ""
    return name == module or ("." in name and module.startswith(name + "."))


def latent_files(
    extensions: Iterable[Mapping[str, Any]],
    site: Sequence[Path],
    loaded: LoadedSet | None,
    added: Collection[str] = (),
) -> dict[str, Path]:
    """relpath -> host path of each extension of the import path the server does not
    load; `added` (relpaths the server loads later, `load_later_files`) never is."""
    if loaded is None:
        return {}
    out: dict[str, Path] = {}
    for ext in extensions:
        path = Path(str(ext.get("path", "")))
        rel = str(ext.get("relpath", ""))
        if rel and rel not in added and _latent(path, site, loaded):
            out[rel] = path
    return out


def imported(loaded: LoadedSet, site: Sequence[Path]) -> set[str]:
    """Top-level packages the probe imported: a serving import that worked, or a file of
    the package among the mapped ones."""
    tops = set(loaded.imported_packages)
    for sp in site:
        prefix = os.path.realpath(sp) + os.sep
        for p in loaded.paths:
            if p.startswith(prefix):
                tops.add(p[len(prefix) :].split(os.sep, 1)[0].removesuffix(".so").split(".")[0])
    return tops


def load_later_files(
    extensions: Iterable[Mapping[str, Any]],
    site: Sequence[Path],
    loaded: LoadedSet | None,
    targets: Sequence[str],
    *,
    loaders: Sequence[coverage.LoaderRule] | None = None,
    later: Sequence[coverage.LoadLaterRule] | None = None,
) -> dict[str, str]:
    """relpath -> the rule by which the server loads a file the probe did not map.

    A loader rule's variant that the loader picks for one of the cell's targets (on a
    machine without a GPU the probe's import picks the fallback: sgl_kernel's
    sm100/common_ops, while an sm_90 target loads sm90/common_ops), once its package was
    imported; a `[[load_later]]` file (flashinfer's prebuilt JIT modules) once the
    package that loads it was."""
    if loaded is None:
        return {}
    loaders = coverage.loader_rules() if loaders is None else loaders
    later = coverage.load_later_rules() if later is None else later
    parsed = [t for t in (_target(x) for x in targets) if t is not None]
    tops = imported(loaded, site)
    out: dict[str, str] = {}
    for ext in extensions:
        rel = str(ext.get("relpath", ""))
        if not rel or loaded.loads(Path(str(ext.get("path", "")))):
            continue  # mapped already: on the serving path without a rule
        why = _loader_reason(rel, parsed, tops, loaders) or _later_reason(rel, tops, later)
        if why is not None:
            out[rel] = why
    return out


def _target(text: str) -> coverage.Target | None:
    try:
        return coverage.parse_target(text)
    except ValueError:
        return None


def _loader_reason(
    rel: str,
    targets: Sequence[coverage.Target],
    tops: Collection[str],
    loaders: Sequence[coverage.LoaderRule],
) -> str | None:
    for rule in loaders:
        variant = rule.variant_of(rel)
        if variant is None or rule.package not in tops:
            continue
        on = [t.name for t in targets if rule.selected(t) == variant]
        if on:
            return f"loader rule: {rule.package} loads {variant.glob} on {', '.join(on)}"
    return None


def _later_reason(
    rel: str, tops: Collection[str], later: Sequence[coverage.LoadLaterRule]
) -> str | None:
    rule = next((r for r in later if r.after in tops and r.matches(rel)), None)
    return None if rule is None else f"load-later rule: {rule.after} loads {rule.glob}"


def _latent(path: Path, site: Sequence[Path], loaded: LoadedSet) -> bool:
    under = next((sp for sp in site if path.is_relative_to(sp)), None)
    if under is None:
        return False
    top = path.relative_to(under).parts[0]
    return top.removesuffix(".so").split(".", 1)[0] not in loaded.failed_packages and (
        not loaded.loads(path)
    )


def finding_file(finding: Finding) -> str | None:
    """The shared object a finding is about: its subject, an extension's
    site-packages-relative path or a host path. None for a finding about no one file
    (the driver, CUDA majors, a rule, an absent feature file) and for the driver's
    libraries. The one rule that both the static relevance (`mark_latent`) and the
    live server's mapped set (report/mapped.py) apply."""
    subject = finding.subject or ""
    name = subject.rsplit("/", 1)[-1]
    if finding.code in _NEVER_LATENT or not (name.endswith(".so") or ".so." in name):
        return None
    return subject


def mark_latent(findings: Sequence[Finding], latent: Mapping[str, Path]) -> list[Finding]:
    """Copies of `findings`, those about a latent file marked (same code and severity)."""
    by_path = {str(p): rel for rel, p in latent.items()}
    out = []
    for f in findings:
        file = finding_file(f)
        rel = file if file in latent else by_path.get(str(file))
        if file is None or rel is None:
            out.append(f)
            continue
        out.append(
            f._replace(
                message=f"{f.message} ({LATENT_NOTE})",
                details={**f.details, "latent": True},
            )
        )
    return out


def is_latent(finding: Finding) -> bool:
    return finding.details.get("latent") is True


def serving_summary(
    cov: Mapping[str, Mapping[str, str]], optional: Iterable[str], latent: Iterable[str]
) -> dict[str, str]:
    """Each target's coverage over the files the server loads (optional ones left out,
    as in the full summary)."""
    skip = set(optional) | set(latent)
    return {
        target: coverage.worst(
            cast("coverage.Coverage", v) for rel, v in per.items() if rel not in skip
        )
        for target, per in cov.items()
    }
