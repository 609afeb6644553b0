"""Undefined dynamic symbols, symbol versions and the C++11 ABI flag of an extension."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from stackmatrix import _log
from stackmatrix.check._elftypes import DynSymbol
from stackmatrix.check.libs import Closure, LibraryIndex
from stackmatrix.findings import Finding, Severity

log = _log.Logger(__name__)

# (pattern on the demangled name, flags, library expected to provide it); first match
# wins. Compiled when first needed: `inspect` never asks.
_PROVIDER_PATTERNS: tuple[tuple[str, int, str], ...] = (
    (r"^(?:_?Py|PyInit_)", 0, "python"),
    (r"c10::cuda::|c10_cuda", 0, "libc10_cuda.so"),
    (r"^(?:\S+ )?\(?(?:anonymous namespace\)::)?c10::|^c10::", 0, "libc10.so"),
    (r"\bc10::", 0, "libc10.so"),
    (r"\b(?:at::cuda|torch::cuda|at::native::\w*cuda)", re.I, "libtorch_cuda.so"),
    (r"\btorch::(?:python|jit::python|detail::\w*Py)|\bTHP", 0, "libtorch_python.so"),
    (r"\b(?:at|torch|caffe2)::", 0, "libtorch_cpu.so"),
    (r"^cu[A-Z]", 0, "libcuda.so.1"),
    (r"^(?:cuda[A-Z]|__cuda)", 0, "libcudart"),
    (r"^cublasLt", 0, "libcublasLt"),
    (r"^cublas", 0, "libcublas"),
    (r"^nvrtc", 0, "libnvrtc"),
    (r"^nccl", 0, "libnccl"),
    (r"^numa_", 0, "libnuma.so.1"),
)


@functools.cache
def _providers() -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(pattern, flags), lib) for pattern, flags, lib in _PROVIDER_PATTERNS)


_TORCH_LIBS = (
    "libc10.so",
    "libc10_cuda.so",
    "libtorch_cpu.so",
    "libtorch_cuda.so",
    "libtorch_python.so",
)
# version nodes defined by the C runtime and the C++ runtime of the base system
SYSTEM_RUNTIME = re.compile(
    r"^(?:libc\.so|libm\.so|libpthread\.so|libdl\.so|librt\.so|ld-linux|libstdc\+\+\.so|libgcc_s\.so)"
)
_CXX11 = "cxx11"
_OLD_STRING = re.compile(r"[RP]K?Ss")


class UnresolvedGroup(NamedTuple):
    provider: str  # the library expected to define these symbols
    provider_missing: bool  # that library was not found (see SM-LIB-MISSING)
    symbols: tuple[str, ...]  # demangled
    cause: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "provider_missing": self.provider_missing,
            "count": len(self.symbols),
            "symbols": list(self.symbols[:50]),
            "cause": self.cause,
        }


class VersionProblem(NamedTuple):
    soname: str
    required: tuple[str, ...]
    provided_by: Path
    missing: tuple[str, ...]


class SymbolReport(NamedTuple):
    undefined_count: int
    groups: tuple[UnresolvedGroup, ...] = ()
    cxx11_abi: bool | None = None
    torch_cxx11_abi: bool | None = None


def demangle(names: Sequence[str]) -> list[str]:
    """Demangle with binutils' c++filt in one batch; the names unchanged if it is absent."""
    # imported here: `inspect` imports this module but never demangles
    import shutil

    from stackmatrix import _proc

    tool = shutil.which("c++filt")
    if tool is None or not names:
        if names:
            log.info("c++filt not found; symbols are reported mangled")
        return list(names)
    result = _proc.run([tool], stdin_data="\n".join(names).encode() + b"\n", timeout=60)
    lines = result.output.splitlines()
    if not result.ok or len(lines) != len(names):
        return list(names)
    return lines


def provider_of(symbol: DynSymbol, demangled: str) -> str:
    if symbol.version_file:
        return symbol.version_file
    for pattern, provider in _providers():
        if pattern.search(demangled) or pattern.search(symbol.name):
            return provider
    return "unknown"


def _is_missing(provider: str, missing: Iterable[str]) -> bool:
    return any(m == provider or m.startswith(provider + ".so") for m in missing)


def cxx11_abi(names: Iterable[str]) -> bool | None:
    """True when std::__cxx11 types appear (the new ABI), False when the old ABI's
    std::string (mangled `Ss`) is passed by reference, None when nothing says."""
    old_abi = False
    for name in names:
        if _CXX11 in name:
            return True
        if not old_abi and name.startswith("_Z") and _OLD_STRING.search(name):
            old_abi = True
    return False if old_abi else None


def _cause(provider: str, missing: bool, abi_differs: bool) -> str:
    if missing:
        return f"{provider} is not found, so these cannot be checked (see SM-LIB-MISSING)"
    if provider in _TORCH_LIBS:
        if abi_differs:
            return "built with the other C++11 ABI setting than the installed torch"
        return "built against another torch version than the one installed"
    if provider == "python":
        return "built for another Python version or ABI"
    return f"the installed {provider} differs from (or is older than) the one it was built against"


def check_symbols(
    symbols: Sequence[DynSymbol],
    resolved: Mapping[str, Path],
    missing: Iterable[str],
    index: LibraryIndex,
) -> SymbolReport:
    """Which undefined, non-weak symbols nothing in the needed closure defines."""
    missing = list(missing)
    undefined = [s for s in symbols if not s.defined and not s.weak]
    provided: set[str] = set()
    for path in resolved.values():
        provided |= index.defined(path)
    unresolved = [s for s in undefined if s.name not in provided]
    readable = demangle([s.name for s in unresolved])
    ext_abi = cxx11_abi(s.name for s in symbols)
    torch_abi = _torch_abi(resolved, index)
    abi_differs = ext_abi is not None and torch_abi is not None and ext_abi != torch_abi
    by_provider: dict[str, list[str]] = {}
    for sym, text in zip(unresolved, readable, strict=True):
        prov = provider_of(sym, text)
        if prov == "python":
            continue  # the interpreter provides these; extensions don't link libpython
        by_provider.setdefault(prov, []).append(text)
    groups = tuple(
        UnresolvedGroup(
            provider=prov,
            provider_missing=_is_missing(prov, missing),
            symbols=tuple(sorted(names)),
            cause=_cause(prov, _is_missing(prov, missing), abi_differs),
        )
        for prov, names in sorted(by_provider.items())
    )
    return SymbolReport(
        undefined_count=len(undefined),
        groups=groups,
        cxx11_abi=ext_abi,
        torch_cxx11_abi=torch_abi,
    )


def _torch_abi(resolved: Mapping[str, Path], index: LibraryIndex) -> bool | None:
    path = resolved.get("libc10.so")
    return cxx11_abi(index.defined(path)) if path is not None else None


def check_versions(
    needs: Mapping[str, Sequence[str]], resolved: Mapping[str, Path], index: LibraryIndex
) -> tuple[VersionProblem, ...]:
    """Version nodes (GLIBC_2.34, GLIBCXX_3.4.30...) needed but not defined by the library found."""
    problems: list[VersionProblem] = []
    for soname, versions in sorted(needs.items()):
        path = resolved.get(soname)
        if path is None:
            continue
        defined = set(index.version_defs(path))
        lacking = tuple(v for v in versions if v not in defined)
        if lacking and defined:
            problems.append(
                VersionProblem(
                    soname=soname, required=tuple(versions), provided_by=path, missing=lacking
                )
            )
    return tuple(problems)


# --- findings -------------------------------------------------------------------------


def symbol_findings(
    report: SymbolReport,
    versions: Sequence[VersionProblem],
    closure: Closure,
    relpath: str,
    cell: str | None,
) -> list[Finding]:
    """SM-SYM-UNDEFINED or SM-SYM-GLOBAL, SM-CXX-ABI, SM-GLIBC and SM-SYMVER-MISSING
    of the extension `relpath`, whose needed closure is `closure`."""
    out: list[Finding] = []
    checked = [g for g in report.groups if not g.provider_missing]
    if closure.missing:
        # a library it needs is missing (its own finding): what that library would
        # have defined is a consequence, not a second problem
        checked = [g for g in checked if g.provider != "unknown"]
    if checked:
        total = sum(len(g.symbols) for g in checked)
        causes = "; ".join(f"{len(g.symbols)} from {g.provider}: {g.cause}" for g in checked)
        example = checked[0].symbols[0]
        linked = _linked_provider(closure, checked)
        out.append(
            Finding(
                code="SM-SYM-UNDEFINED" if linked else "SM-SYM-GLOBAL",
                # Extensions linked against a library that lacks their symbols will not
                # load. Others (cuda.core's torch bridge, plugins) take symbols from
                # whatever the process loaded first: a warning, not a verdict.
                severity=Severity.FAIL if linked else Severity.WARN,
                cell=cell,
                subject=relpath,
                message=f"{relpath} uses {total} symbol(s) nothing in its libraries defines "
                f"({causes}); e.g. {example}",
                details={"groups": [g.to_dict() for g in checked]},
            )
        )
    out += _abi_findings(report, relpath, cell)
    out += [_version_finding(p, relpath, cell) for p in versions]
    return out


def _linked_provider(closure: Closure, groups: list[UnresolvedGroup]) -> bool:
    """Whether the expected provider of some missing symbols is in the needed closure."""
    needed = set(closure.resolved)
    return any(
        g.provider != "unknown" and any(n.startswith(g.provider) for n in needed) for g in groups
    )


def _abi_findings(rep: SymbolReport, relpath: str, cell: str | None) -> list[Finding]:
    if rep.cxx11_abi is None or rep.torch_cxx11_abi is None or rep.cxx11_abi == rep.torch_cxx11_abi:
        return []
    return [
        Finding(
            code="SM-CXX-ABI",
            severity=Severity.FAIL,
            cell=cell,
            subject=relpath,
            message=f"{relpath} is built with _GLIBCXX_USE_CXX11_ABI={int(rep.cxx11_abi)} "
            "but torch "
            f"uses {int(rep.torch_cxx11_abi)}; install a build made for this torch",
            details={"extension": rep.cxx11_abi, "torch": rep.torch_cxx11_abi},
        )
    ]


def _version_finding(p: VersionProblem, relpath: str, cell: str | None) -> Finding:
    system = bool(SYSTEM_RUNTIME.match(p.soname))
    return Finding(
        code="SM-GLIBC" if system else "SM-SYMVER-MISSING",
        severity=Severity.FAIL,
        cell=cell,
        subject=relpath,
        message=f"{relpath} needs {', '.join(p.missing)} from {p.soname}, which "
        f"{p.provided_by} does not provide"
        + ("; use a newer base system (or a build for an older one)" if system else ""),
        details={
            "soname": p.soname,
            "missing": list(p.missing),
            "provided_by": str(p.provided_by),
        },
    )
