"""Does an extension's GPU code run on a target arch: natively, through PTX JIT, or not?

NVIDIA's rules (CUDA C++ Programming Guide, "Binary Compatibility", "PTX
Compatibility", arch-specific and family-specific features):

* a cubin for sm_XY runs on devices of the same major X with minor >= Y;
* an arch-specific cubin (sm_90a) runs only on exactly that arch;
* a family cubin (sm_100f) runs within its family: same major, minor >= Y;
* plain PTX (compute_XY) is JIT-compiled by the driver for any arch >= XY;
* arch-specific PTX (compute_90a) only for exactly that arch, family PTX within
  its family.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from fnmatch import fnmatch
from pathlib import PurePosixPath
from typing import Any, Literal, NamedTuple

from stackmatrix.check import data as _data
from stackmatrix.check.fatbin import FatbinEntry
from stackmatrix.findings import Finding, Severity

Coverage = Literal["native", "ptx", "none", "n/a"]
_RANK: dict[str, int] = {"none": 0, "ptx": 1, "native": 2}
_ARCH_RE = re.compile(r"^(?:sm_|compute_|lto_)?(\d{2,3})([af]?)$|^(\d+)\.(\d)$")


class Target(NamedTuple):
    """A device arch: sm_120 is compute capability 12.0."""

    major: int
    minor: int

    @property
    def sm(self) -> int:
        return self.major * 10 + self.minor

    @property
    def cc(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def name(self) -> str:
        return f"sm_{self.sm}"


def parse_target(text: str) -> Target:
    """ "sm_120", "sm_90a", "compute_90", "120" or "12.0" -> Target; ValueError otherwise."""
    m = _ARCH_RE.match(text.strip().lower())
    if not m:
        raise ValueError(f"not a GPU arch: {text!r} (expected e.g. 'sm_120', 'sm_90a' or '12.0')")
    if m.group(3):
        return Target(major=int(m.group(3)), minor=int(m.group(4)))
    sm = int(m.group(1))
    return Target(major=sm // 10, minor=sm % 10)


def entry_runs_on(entry: FatbinEntry, target: Target) -> bool:
    major, minor = divmod(entry.sm, 10)
    if entry.variant == "a":
        return entry.sm == target.sm
    if entry.kind == "ptx" and entry.variant == "":
        return entry.sm <= target.sm
    # plain and family cubins, family PTX: same major, equal or higher minor
    return major == target.major and minor <= target.minor


def judge(entries: Sequence[FatbinEntry], target: Target) -> Coverage:
    """native / ptx / none for one file on one target; n/a when it has no GPU code."""
    gpu = [e for e in entries if e.kind in ("cubin", "ptx")]
    if not gpu:
        return "n/a"
    if any(e.kind == "cubin" and entry_runs_on(e, target) for e in gpu):
        return "native"
    if any(e.kind == "ptx" and entry_runs_on(e, target) for e in gpu):
        return "ptx"
    return "none"


def worst(values: Iterable[Coverage]) -> Coverage:
    """The worst coverage over several files, ignoring those without GPU code."""
    judged = [v for v in values if v != "n/a"]
    if not judged:
        return "n/a"
    return min(judged, key=lambda v: _RANK[v])


def arch_lists(entries: Sequence[FatbinEntry]) -> dict[str, list[str]]:
    """Distinct cubin and PTX archs, in file order (as a person reads cuobjdump)."""
    cubins = list(dict.fromkeys(e.arch for e in entries if e.kind == "cubin"))
    ptx = list(dict.fromkeys(e.arch for e in entries if e.kind == "ptx"))
    return {"cubins": cubins, "ptx": ptx}


# --- loader rules ------------------------------------------------------------------


class LoaderVariant(NamedTuple):
    glob: str
    cc: tuple[str, ...]


class LoaderRule(NamedTuple):
    package: str
    variants: tuple[LoaderVariant, ...]
    source: str = ""

    def variant_of(self, relpath: str) -> LoaderVariant | None:
        """The variant that file `relpath` (relative to site-packages) belongs to."""
        parts = PurePosixPath(relpath).parts
        if not parts or parts[0] != self.package:
            return None
        inner = "/".join(parts[1:])
        return next((v for v in self.variants if fnmatch(inner, v.glob)), None)

    def selected(self, target: Target) -> LoaderVariant | None:
        for v in self.variants:
            if target.cc in v.cc:
                return v
        return next((v for v in self.variants if not v.cc), None)


def loader_rules(raw: dict[str, Any] | None = None) -> tuple[LoaderRule, ...]:
    data = raw if raw is not None else _data.load("loaders.toml")
    return tuple(
        LoaderRule(
            package=str(item["package"]),
            source=str(item.get("source", "")),
            variants=tuple(
                LoaderVariant(glob=str(v["glob"]), cc=tuple(str(c) for c in v.get("cc", [])))
                for v in item.get("variant", [])
            ),
        )
        for item in data.get("loader", [])
    )


def loaded_on(relpath: str, target: Target, rules: Sequence[LoaderRule]) -> bool:
    """False when a loader rule says another file is loaded instead on `target`."""
    for rule in rules:
        variant = rule.variant_of(relpath)
        if variant is not None:
            return rule.selected(target) == variant
    return True


class OptionalRule(NamedTuple):
    """An extension imported only when a feature is used (see compat/loaders.toml)."""

    glob: str
    feature: str

    def matches(self, relpath: str) -> bool:
        return fnmatch(relpath, self.glob)


def optional_rules(raw: dict[str, Any] | None = None) -> tuple[OptionalRule, ...]:
    data = raw if raw is not None else _data.load("loaders.toml")
    return tuple(
        OptionalRule(glob=str(item["glob"]), feature=str(item.get("feature", "")))
        for item in data.get("optional", [])
    )


def optional_feature(relpath: str, rules: Sequence[OptionalRule]) -> str | None:
    return next((r.feature for r in rules if r.matches(relpath)), None)


class LoadLaterRule(NamedTuple):
    """Files a package loads after its import, from a directory its import does not map
    (compat/loaders.toml [[load_later]]): on the serving path once `after` is imported."""

    glob: str  # relative to site-packages
    after: str  # a top-level import package
    source: str = ""

    def matches(self, relpath: str) -> bool:
        return fnmatch(relpath, self.glob)


def load_later_rules(raw: dict[str, Any] | None = None) -> tuple[LoadLaterRule, ...]:
    data = raw if raw is not None else _data.load("loaders.toml")
    return tuple(
        LoadLaterRule(
            glob=str(item["glob"]), after=str(item["after"]), source=str(item.get("source", ""))
        )
        for item in data.get("load_later", [])
    )


class CudaVariantRule(NamedTuple):
    """Files of which a package loads only the build for torch's CUDA major
    (compat/loaders.toml [[cuda_variant]]): `glob` (relative to site-packages) names
    them all, `suffix` with `{major}` the part of the name that marks each build."""

    glob: str
    suffix: str
    source: str = ""

    def not_loaded(self, relpath: str, torch_major: int | None) -> str | None:
        """Why `relpath` is never loaded next to a CUDA `torch_major` torch, or None."""
        if torch_major is None or not fnmatch(relpath, self.glob):
            return None
        if self.suffix.format(major=torch_major) in PurePosixPath(relpath).name:
            return None
        return (
            f"a build for another runtime than torch's CUDA {torch_major}, which the package "
            f"does not load there (it loads the '{self.suffix.format(major=torch_major)}' one)"
        )


def cuda_variant_rules(raw: dict[str, Any] | None = None) -> tuple[CudaVariantRule, ...]:
    data = raw if raw is not None else _data.load("loaders.toml")
    return tuple(
        CudaVariantRule(
            glob=str(item["glob"]), suffix=str(item["suffix"]), source=str(item.get("source", ""))
        )
        for item in data.get("cuda_variant", [])
    )


def unused_cuda_variant(
    relpath: str, rules: Sequence[CudaVariantRule], torch_major: int | None
) -> str | None:
    return next((w for r in rules if (w := r.not_loaded(relpath, torch_major))), None)


# --- across extensions: the coverage of each target, its findings -------------------------


class ArchCoverage(NamedTuple):
    per_target: dict[str, dict[str, str]]
    summary: dict[str, str]
    not_loaded: dict[str, list[str]]
    optional: dict[str, str]  # relpath -> feature it serves

    def to_dict(self) -> dict[str, Any]:
        return {
            "coverage": self.per_target,
            "target_summary": self.summary,
            "not_loaded": self.not_loaded,
            "optional": self.optional,
        }


def coverage_of(
    extensions: Sequence[tuple[str, Sequence[FatbinEntry]]],
    targets: Sequence[str],
    rules: Sequence[LoaderRule],
    optional: Sequence[OptionalRule],
) -> ArchCoverage:
    """What the GPU code of `extensions` ((relpath, fatbin entries), in order) covers
    on each target, leaving out those a loader rule does not load there."""
    per_target: dict[str, dict[str, str]] = {}
    summary: dict[str, str] = {}
    not_loaded: dict[str, list[str]] = {}
    features = {rel: f for rel, _ in extensions if (f := optional_feature(rel, optional))}
    for text in targets:
        target = parse_target(text)
        per: dict[str, Coverage] = {}
        for rel, fatbin in extensions:
            if not fatbin:
                continue
            if not loaded_on(rel, target, rules):
                not_loaded.setdefault(text, []).append(rel)
                continue
            per[rel] = judge(fatbin, target)
        per_target[text] = dict(per)
        summary[text] = worst(v for k, v in per.items() if k not in features)
    return ArchCoverage(
        per_target=per_target, summary=summary, not_loaded=not_loaded, optional=features
    )


def coverage_findings(cov: ArchCoverage, cell: str | None) -> list[Finding]:
    """SM-ARCH-OPTIONAL, SM-ARCH-NONE, SM-ARCH-PTX-ONLY per target and extension."""
    out: list[Finding] = []
    for target, per in cov.per_target.items():
        for rel, value in sorted(per.items()):
            feature = cov.optional.get(rel)
            said = _arch_problem(rel, target, value, feature)
            if said is None:
                continue
            code, severity, message = said
            details = {"target": target}
            if code == "SM-ARCH-OPTIONAL":
                details["coverage"] = value
            out.append(
                Finding(
                    code=code,
                    severity=severity,
                    cell=cell,
                    subject=rel,
                    message=message,
                    details=details,
                )
            )
    return out


def _arch_problem(
    rel: str, target: str, value: str, feature: str | None
) -> tuple[str, Severity, str] | None:
    if feature is not None and value != "native":
        how = "only through PTX JIT" if value == "ptx" else "not at all"
        return (
            "SM-ARCH-OPTIONAL",
            Severity.INFO,
            f"{rel} runs on {target} {how}; it is imported only for {feature}, "
            "which is therefore unavailable or slow to start there",
        )
    if value == "none":
        return (
            "SM-ARCH-NONE",
            Severity.FAIL,
            f"{rel} has no GPU code that runs on {target} (no matching cubin, no "
            "PTX it can JIT from); use a build that includes this arch",
        )
    if value == "ptx":
        return (
            "SM-ARCH-PTX-ONLY",
            Severity.WARN,
            f"{rel} runs on {target} only through PTX JIT (slow first launch, "
            "needs a driver at least as new as the toolkit); a build with a native "
            "cubin avoids it",
        )
    return None
