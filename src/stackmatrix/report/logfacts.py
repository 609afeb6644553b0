"""Configuration facts read from server logs by patterns kept as data.

Some choices an engine makes never reach its resolved arguments: DeepGEMM switches
itself on from an environment check, CUDA graph batch sizes depend on memory. Their only
trace is a log line, so the patterns in compat/log_patterns.toml turn lines into facts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from stackmatrix import _nofollow
from stackmatrix.errors import Unreadable
from stackmatrix.report.compat_data import load_toml, strings, tables

_MAX_EVIDENCE = 160
LOG_READ_LIMIT = 32 << 20  # of a larger log, its first and last 16 MiB are read
_LINE_LIMIT = 64 << 10
# The value of an expected fact when no line of a log matched any of its patterns: the
# report says so instead of leaving the fact out.
NOT_READ = "not read"


@dataclass(frozen=True, kw_only=True)
class LogPattern:
    fact: str
    regex: re.Pattern[str]
    value: str | None = None
    absent: str | None = None
    engines: tuple[str, ...] = ()  # engines whose logs the pattern is for; () = any
    covers: tuple[str, ...] = ()  # "sglang 0.5.14": versions with a captured log line
    expected: bool = False  # every log of those engines should state this fact

    def applies_to(self, engine: str | None) -> bool:
        return not self.engines or engine in self.engines

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> LogPattern:
        try:
            regex = re.compile(str(raw["regex"]))
        except (KeyError, re.error) as exc:
            raise Unreadable(f"log pattern {raw!r} has no valid `regex`: {exc}") from exc
        if raw.get("value") is None and "value" not in regex.groupindex:
            raise Unreadable(
                f"log pattern for {raw.get('fact')!r} needs `value` or a (?P<value>...) group"
            )
        return cls(
            fact=str(raw["fact"]),
            regex=regex,
            value=_text(raw.get("value")),
            absent=_text(raw.get("absent")),
            engines=strings(raw.get("engines")),
            covers=strings(raw.get("covers")),
            expected=bool(raw.get("expected", False)),
        )


@dataclass(frozen=True, kw_only=True)
class LogFact:
    fact: str
    value: str
    evidence: str | None  # the log line (shortened), None for an `absent` default
    file: str | None = None


def load_patterns(directory: Path | None = None) -> tuple[LogPattern, ...]:
    raw = load_toml("log_patterns.toml", directory)
    return tuple(LogPattern.from_dict(p) for p in tables(raw.get("pattern")))


def _text(value: object) -> str | None:
    """A pattern's `value` or `absent` (a TOML number is shown as written)."""
    return None if value is None else str(value)


def read_facts(
    logs: Sequence[Path], patterns: Sequence[LogPattern], *, engine: str | None = None
) -> dict[str, LogFact]:
    """Facts found in a cell's server logs; the first match of each fact wins.

    Only the patterns for `engine` apply (all of them when it is None). An expected
    fact that no line states reads NOT_READ.

    When launches of one cell disagree (one captured more CUDA graphs than another),
    the value lists each distinct one, in launch order.
    """
    patterns = [p for p in patterns if engine is None or p.applies_to(engine)]
    per_log = [_facts_of(path, patterns, engine) for path in logs if path.is_file()]
    facts: dict[str, LogFact] = {}
    for fact in {name for found in per_log for name in found}:
        seen = [found[fact] for found in per_log if fact in found]
        values = list(dict.fromkeys(f.value for f in seen))
        first = next((f for f in seen if f.evidence), seen[0])
        facts[fact] = LogFact(
            fact=fact, value=" | ".join(values), evidence=first.evidence, file=first.file
        )
    return facts


def _facts_of(
    path: Path, patterns: Sequence[LogPattern], engine: str | None = None
) -> dict[str, LogFact]:
    found: dict[str, LogFact] = {}
    try:  # bounded: a sparse or runaway log is read only at its start and its end
        text = _nofollow.read_ends(path, limit=LOG_READ_LIMIT).decode("utf-8", "replace")
    except Unreadable:
        text = ""
    # the lines a text-mode file gives (universal newlines), each cut short: a fact is
    # stated on a short line
    for whole in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = whole[:_LINE_LIMIT]
        for pattern in patterns:
            if pattern.fact not in found:
                fact = _match(pattern, line, path.name)
                if fact is not None:
                    found[pattern.fact] = fact
    for pattern in _absent_defaults(patterns):
        found.setdefault(
            pattern.fact, LogFact(fact=pattern.fact, value=str(pattern.absent), evidence=None)
        )
    for pattern in patterns:
        # expected of a known engine only: a log of unknown origin proves nothing
        if pattern.expected and engine is not None and engine in pattern.engines:
            found.setdefault(
                pattern.fact, LogFact(fact=pattern.fact, value=NOT_READ, evidence=None)
            )
    return found


def unread(facts: dict[str, LogFact]) -> list[str]:
    """The expected facts that no log line stated."""
    return sorted(f.fact for f in facts.values() if f.value == NOT_READ)


def _absent_defaults(patterns: Iterable[LogPattern]) -> list[LogPattern]:
    return [p for p in patterns if p.absent is not None]


def _match(pattern: LogPattern, line: str, file: str) -> LogFact | None:
    m = pattern.regex.search(line)
    if m is None:
        return None
    value = m.group("value") if "value" in pattern.regex.groupindex else pattern.value
    text = line.strip()
    if len(text) > _MAX_EVIDENCE:
        # Timestamps and logger prefixes say little: keep the line from the match on.
        text = line[m.start() : m.start() + _MAX_EVIDENCE].strip() + "..."
    return LogFact(fact=pattern.fact, value=str(value), evidence=text, file=file)
