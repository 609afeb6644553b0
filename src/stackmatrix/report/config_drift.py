"""Configuration drift: how a cell differs from the baseline, intended or not.

Intended differences are the ones the cell's definition asks for (plan.json's
`differs_from_baseline`: the pins it changes, the server args and env vars it sets, its
CUDA/Python/index choices and what follows from them). Everything else is unintended and
is ranked by how much it tends to move performance, using compat/drift_rank.toml.

A key whose value differs between launches of one cell (a seed or port drawn at every
launch) is volatile: it is named once as such and never counted as a difference. With
one launch there is no such evidence, so the `[volatile]` list of drift_rank.toml names
the keys known to behave so.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from stackmatrix.jsontypes import JSONObject
from stackmatrix.report.compat_data import integer, load_toml, strings, table, tables
from stackmatrix.report.facts import CellFacts, Fact, package_key, text

# Definition fields that change where wheels come from: a package whose only change is
# its local build label (+cu128 -> +cu130) follows from them.
_CHANNEL_FIELDS = ("cuda", "torch_backend", "index_url", "extra_index_urls", "find_links")
# The probe reports imported modules; the lock reports distributions.
# the distributions an import name comes from (sgl_kernel was sgl-kernel, then sglang-kernel)
_MODULE_DISTRIBUTIONS = {
    "flashinfer": ("flashinfer-python",),
    "sgl_kernel": ("sgl-kernel", "sglang-kernel"),
}
_PROBE_VERSION = re.compile(r"probe:(?:imports\.)?(?P<module>[\w.-]+?)\.version")
_SOURCE_NAMES = {
    "lock": "resolved lock",
    "probe": "runtime probe",
    "server": "resolved server arguments",
    "env": "environment",
    "log": "server log",
}


@dataclass(frozen=True, kw_only=True)
class RankRule:
    rank: int
    label: str
    patterns: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Ranking:
    rules: tuple[RankRule, ...]
    default_rank: int = 70
    ignore: tuple[str, ...] = ()  # keys that are measurements, not configuration
    # keys known to change from launch to launch, for cells with too few launches to show it
    volatile: tuple[str, ...] = ()

    def ignored(self, key: str) -> bool:
        return _matches(key, self.ignore)

    def known_volatile(self, key: str) -> bool:
        return _matches(key, self.volatile)

    def of(self, key: str) -> tuple[int, str]:
        for rule in self.rules:
            if _matches(key, rule.patterns):
                return rule.rank, rule.label
        return self.default_rank, "other"


def _matches(key: str, patterns: Sequence[str]) -> bool:
    lowered = key.lower()
    return any(fnmatch.fnmatchcase(lowered, p.lower()) for p in patterns)


def load_ranking(directory: Path | None = None) -> Ranking:
    raw = load_toml("drift_rank.toml", directory)
    rules = tuple(
        RankRule(
            rank=integer(r["rank"]), label=str(r.get("label", "")), patterns=strings(r["match"])
        )
        for r in tables(raw.get("rule"))
    )
    return Ranking(
        rules=rules,
        default_rank=integer(raw.get("default_rank", 70)),
        ignore=strings(table(raw.get("ignore")).get("match")),
        volatile=strings(table(raw.get("volatile")).get("match")),
    )


@dataclass(frozen=True, kw_only=True)
class Difference:
    key: str  # "server:attention_backend", "package:torch", "cell:cuda", ...
    baseline: str | None  # None: not recorded for the baseline
    value: str | None  # None: not recorded for this cell
    intended: bool
    because: str | None = None  # the definition field that asks for it
    rank: int = 0
    label: str = ""
    source: str = ""
    evidence: str | None = None  # e.g. the log line

    @property
    def name(self) -> str:
        return self.key.split(":", 1)[-1]

    def to_dict(self) -> JSONObject:
        return {
            "key": self.key,
            "baseline": self.baseline,
            "value": self.value,
            "intended": self.intended,
            "because": self.because,
            "rank": self.rank,
            "label": self.label,
            "source": self.source,
            "evidence": self.evidence,
        }


@dataclass(frozen=True, kw_only=True)
class Drift:
    intended: tuple[Difference, ...]
    unintended: tuple[Difference, ...]  # most consequential first
    not_compared: tuple[str, ...]  # sources one side lacks, said in words
    # keys drawn anew at each launch (a seed, a port): never a difference, named once
    volatile: tuple[str, ...] = ()

    def to_dict(self) -> JSONObject:
        return {
            "intended": [d.to_dict() for d in self.intended],
            "unintended": [d.to_dict() for d in self.unintended],
            "not_compared": list(self.not_compared),
            "volatile": list(self.volatile),
        }


def diff(
    cell: CellFacts,
    baseline: CellFacts,
    *,
    differs: Mapping[str, object],
    ranking: Ranking,
    cell_server_args: Sequence[str] = (),
) -> Drift:
    """Every recorded difference between `cell` and `baseline`, split and ranked."""
    asked = _asked_keys(differs, cell_server_args)
    shared = cell.sources & baseline.sources
    intended = [_definition_difference(f, v) for f, v in differs.items()]
    unintended: list[Difference] = []
    volatile = set(cell.varying | baseline.varying)
    engine_fact = cell.facts.get("engine:version") or baseline.facts.get("engine:version")
    engine = str(engine_fact.value).split()[0] if engine_fact is not None else ""
    for key in sorted(set(cell.facts) | set(baseline.facts)):
        mine, theirs = cell.facts.get(key), baseline.facts.get(key)
        source = _source_of(mine, theirs)
        if source not in shared or _same(mine, theirs) or ranking.ignored(key):
            continue
        because = (
            asked.get(key)
            or next((asked[p] for p in _packages_of(key) if p in asked), None)
            or asked.get(_engine_package(key, engine))
            or _follows_from_channel(key, mine, theirs, differs)
        )
        # what the cell asks for stays a difference even where it is a seed or a port
        if because is None and (key in volatile or ranking.known_volatile(key)):
            volatile.add(key)
            continue
        item = _difference(key, mine, theirs, because, ranking, source)
        (intended if because else unintended).append(item)
    unintended.sort(key=lambda d: (d.rank, d.key))
    missing = _not_compared(cell.sources, baseline.sources)
    return Drift(
        intended=tuple(intended),
        unintended=tuple(unintended),
        not_compared=missing,
        volatile=tuple(sorted(volatile - {d.key for d in intended})),
    )


def _source_of(a: Fact | None, b: Fact | None) -> str:
    fact = a or b
    return fact.source if fact is not None else ""


def _same(a: Fact | None, b: Fact | None) -> bool:
    if a is None or b is None:
        return False
    return (a.value, a.detail) == (b.value, b.detail)


def _difference(
    key: str,
    mine: Fact | None,
    theirs: Fact | None,
    because: str | None,
    ranking: Ranking,
    source: str,
) -> Difference:
    rank, label = ranking.of(key)
    return Difference(
        key=key,
        baseline=_shown(theirs, mine),
        value=_shown(mine, theirs),
        intended=because is not None,
        because=because,
        rank=rank,
        label=label,
        source=_SOURCE_NAMES.get(source, source),
        evidence=(mine.evidence if mine else None) or (theirs.evidence if theirs else None),
    )


def _shown(fact: Fact | None, other: Fact | None) -> str | None:
    if fact is None:
        return None
    # Same version, different index: that is the difference worth seeing.
    if other is not None and fact.value == other.value and fact.detail != other.detail:
        return f"{fact.value} from {fact.detail or 'default index'}"
    return fact.value


def _definition_difference(field: str, values: Any) -> Difference:
    base, mine = ([*values, None, None])[:2] if isinstance(values, list) else (None, values)
    return Difference(
        key=f"cell:{field}",
        baseline=None if base is None else text(base),
        value=None if mine is None else text(mine),
        intended=True,
        because=field,
        label="cell definition",
        source="plan",
    )


def _asked_keys(differs: Mapping[str, object], cell_server_args: Sequence[str]) -> dict[str, str]:
    """The fact keys the definition asks to change, mapped to the field that asks."""
    asked: dict[str, str] = {}
    pins = differs.get("pins")
    if isinstance(pins, list) and len(pins) == 2:
        asked |= dict.fromkeys(_changed_pins(pins[0] or [], pins[1] or []), "pins")
    env = differs.get("env")
    if isinstance(env, list) and len(env) == 2:
        asked |= dict.fromkeys(
            (f"env:{n}" for n in _changed(_env_map(env[0]), _env_map(env[1]))), "env"
        )
    server = differs.get("server_args")
    if isinstance(server, list) and len(server) == 2:
        names = _arg_names(server[0] or []) | _arg_names(server[1] or [])
        asked |= {f"server:{n}": "server_args" for n in names}
    elif cell_server_args:
        asked |= {f"server:{n}": "server_args" for n in _arg_names(cell_server_args)}
    if "python" in differs:
        asked |= {"python": "python", "probe:python": "python", "probe:python_version": "python"}
    return asked


_ENGINE_VERSION_KEYS = ("engine:version", "server:engine_version", "server:version")


def _engine_package(key: str, engine: str) -> str:
    """The engine's own version follows from the engine's pin (e.g. transformers)."""
    return package_key(engine) if engine and key in _ENGINE_VERSION_KEYS else ""


def _packages_of(key: str) -> list[str]:
    """`probe:imports.flashinfer.version` is the version of package flashinfer-python."""
    m = _PROBE_VERSION.fullmatch(key)
    if m is None:
        return []
    module = m.group("module")
    return [package_key(d) for d in _MODULE_DISTRIBUTIONS.get(module, (module,))]


def _changed_pins(base: Sequence[str], mine: Sequence[str]) -> set[str]:
    a, b = _pin_map(base), _pin_map(mine)
    return {name for name in set(a) | set(b) if a.get(name) != b.get(name)}


def _pin_map(pins: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pin in pins:
        try:
            req = Requirement(str(pin))
        except InvalidRequirement:
            continue
        out[package_key(req.name)] = str(req.specifier) + str(req.url or "")
    return out


def _env_map(env: Any) -> dict[str, str]:
    if isinstance(env, dict):
        return {str(k): text(v) for k, v in env.items()}
    if isinstance(env, list):
        return {str(p[0]): text(p[1]) for p in env if isinstance(p, list | tuple) and len(p) == 2}
    return {}


def _changed(a: dict[str, str], b: dict[str, str]) -> set[str]:
    return {k for k in set(a) | set(b) if a.get(k) != b.get(k)}


def _arg_names(args: Sequence[str] | str) -> set[str]:
    """`--attention-backend triton` and `--attention-backend=triton` name attention_backend."""
    tokens = shlex.split(args) if isinstance(args, str) else [str(a) for a in args]
    names = set()
    for token in tokens:
        if token.startswith("--"):
            names.add(token[2:].split("=", 1)[0].replace("-", "_"))
    return names


def _follows_from_channel(
    key: str, mine: Fact | None, theirs: Fact | None, differs: Mapping[str, object]
) -> str | None:
    """A CUDA-channel change explains local-label changes, the probe's CUDA version and
    the driver that CUDA version needs (not the driver found)."""
    field = next((f for f in _CHANNEL_FIELDS if f in differs), None)
    if field is None:
        return None
    if re.fullmatch(r"probe:(cuda|torch\.cuda|cuda_version|torch_cuda|torch\.arch_list)", key):
        return field
    if key in ("driver:cuda", "driver:required_min", "driver:family_min"):
        return field
    if mine is None or theirs is None:
        return None
    if key.startswith("package:") or key.startswith("probe:torch"):
        return field if _public(mine.value) == _public(theirs.value) else None
    return None


def _public(value: str) -> str:
    version = value.split(" ", 1)[0]
    try:
        return Version(version).public
    except InvalidVersion:
        return version.split("+", 1)[0]


def _not_compared(mine: frozenset[str], theirs: frozenset[str]) -> tuple[str, ...]:
    out = []
    for source, words in _SOURCE_NAMES.items():
        if (source in mine) != (source in theirs):
            side = "the baseline" if source in mine else "this cell"
            out.append(f"{words}: not recorded for {side}, not compared")
    return tuple(out)
