"""The differences of a cell from the baseline that can be taken back, and how.

Each `Change` says what one difference is and how to set the baseline's value on the
candidate: flags appended to its server arguments, environment variables, or a pin.
A difference with no known way back is kept with the reason, never guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from stackmatrix import _jsonload, engine_registry
from stackmatrix.check import data as _data
from stackmatrix.jsontypes import JSONObject, JSONValue
from stackmatrix.report.config_drift import Difference
from stackmatrix.spec_model import Cell


@dataclass(frozen=True, kw_only=True)
class Change:
    """One difference (or an inseparable group) and how to revert it on the candidate."""

    key: str  # "server:attention_backend", "package:torch", "env:X", "log:deepgemm"
    label: str  # "attention_backend triton -> flashinfer" (candidate -> baseline)
    to_value: str = ""  # the baseline's value the revert sets (names the derived cell)
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    pins: tuple[str, ...] = ()  # replace same-named pins of the candidate
    server_args: tuple[str, ...] | None = None  # replace the candidate's own server_args
    members: tuple[str, ...] = ()  # keys reverted together (an inseparable group)
    reason: str = ""  # why they go together

    @property
    def slug(self) -> str:
        name = self.key.split(":", 1)[-1]
        if self.members:
            return "+".join(m.split(":", 1)[-1] for m in self.members)
        return name

    def to_dict(self) -> JSONObject:
        return {
            "key": self.key,
            "label": self.label,
            "args": list(self.args),
            "env": dict(self.env),
            "pins": list(self.pins),
            "server_args": None if self.server_args is None else list(self.server_args),
            "members": list(self.members),
            "reason": self.reason,
        }


@dataclass(frozen=True, kw_only=True)
class Derived:
    changes: tuple[Change, ...]
    cannot: tuple[tuple[str, str], ...] = ()  # (key, why it cannot be isolated)
    notes: tuple[str, ...] = field(default_factory=tuple)


def derive(
    intended: Sequence[Difference],
    unintended: Sequence[Difference],
    *,
    engine: str,
    baseline: Cell,
    cell: Cell,
) -> Derived:
    """Every difference that can be reverted alone, inseparable ones grouped."""
    changes: list[Change] = []
    cannot: list[tuple[str, str]] = []
    for diff in unintended:
        made = _unintended_change(diff, engine)
        if isinstance(made, Change):
            changes.append(made)
        else:
            cannot.append((diff.key, made))
    changes += _intended_changes(intended, baseline, cell, engine)
    grouped, notes = _group_inseparable(changes)
    return Derived(changes=tuple(grouped), cannot=tuple(cannot), notes=tuple(notes))


def _label(diff: Difference) -> str:
    return f"{diff.name} {diff.value} -> {diff.baseline}"


def _unintended_change(diff: Difference, engine: str) -> Change | str:
    source, _, name = diff.key.partition(":")
    if diff.baseline is None:
        return f"no switch known for {diff.key}: the baseline did not record it"
    if source == "server":
        return _server_change(diff, name, engine)
    if source == "env":
        return Change(
            key=diff.key, label=_label(diff), to_value=diff.baseline, env=((name, diff.baseline),)
        )
    if source == "log":
        return _log_change(diff, engine)
    if source == "package":
        return _package_change(diff)
    return f"no switch known for {diff.key}"


def _package_change(diff: Difference) -> Change | str:
    """An unpinned package the resolver moved: pin it at the baseline's version."""
    assert diff.baseline is not None
    version, _, rest = diff.baseline.partition(" (")
    name = rest.rstrip(")") or diff.name
    _, _, theirs = (diff.value or "").partition(" (")
    if theirs and theirs.rstrip(")") != name:
        return (
            f"cannot be isolated: {diff.key} changes its build ({theirs.rstrip(')')} -> {name}), "
            "which follows the CUDA major of torch"
        )
    if not version or version == "?":
        return f"no switch known for {diff.key}: the baseline's version is unknown"
    return Change(key=diff.key, label=_label(diff), to_value=version, pins=(f"{name}=={version}",))


def _server_change(diff: Difference, name: str, engine: str) -> Change | str:
    traits = engine_registry.find(engine)
    if traits is None or not traits.setting_flags:
        return f"no switch known for {diff.key}: {engine or 'this engine'} flags are not known"
    if "." in name:  # a field of a structured setting (cuda_graph_config.decode.max_bs)
        return f"no switch known for {diff.key}: a field of a structured setting, not a flag"
    value = _plain(diff.baseline)
    flag = "--" + name.replace("_", "-")
    if value is None:
        return f"no switch known for {diff.key}: the baseline's value is the engine default (null)"
    if isinstance(value, bool):
        if value:
            return Change(key=diff.key, label=_label(diff), to_value="true", args=(flag,))
        return f"no switch known for {diff.key}: a flag cannot be set back to false"
    if isinstance(value, list | dict):
        return f"no switch known for {diff.key}: a structured value"
    return Change(key=diff.key, label=_label(diff), to_value=str(value), args=(flag, str(value)))


def _plain(text: str | None) -> JSONValue:
    """The recorded value: facts hold strings, non-strings as JSON."""
    if text is None:
        return None
    try:
        value: JSONValue = _jsonload.loads(text)
    except ValueError:
        return text
    return value


def _log_change(diff: Difference, engine: str) -> Change | str:
    for rule in _data.load("switches.toml").get("switch", []):
        if rule["fact"] == diff.key and rule["engine"] == engine and rule["value"] == diff.baseline:
            env = tuple(sorted((str(k), str(v)) for k, v in (rule.get("env") or {}).items()))
            args = tuple(str(a) for a in rule.get("args") or ())
            return Change(
                key=diff.key, label=_label(diff), to_value=str(rule["value"]), env=env, args=args
            )
    return f"no switch known for {diff.key} = {diff.baseline!r} in {engine or 'this engine'}"


def _intended_changes(
    intended: Sequence[Difference], base: Cell, cell: Cell, engine: str
) -> list[Change]:
    out: list[Change] = []
    base_pins = _pins(base.pins)
    for name, pin in _pins(cell.pins).items():
        theirs = base_pins.get(name)
        if theirs is not None and theirs != pin:
            out.append(
                Change(
                    key=f"package:{name}",
                    label=f"{name} {pin} -> {theirs}",
                    to_value=_pinned_version(theirs),
                    pins=(theirs,),
                )
            )
    base_args, cell_args = list(base.server_args), list(cell.server_args)
    if base_args != cell_args:
        per_flag = _flag_changes(base_args, cell_args, intended, engine)
        if per_flag is not None:
            out += per_flag
        else:
            shown, back = " ".join(cell_args) or "(none)", " ".join(base_args) or "(none)"
            out.append(
                Change(
                    key="cell:server_args",
                    label=f"server_args {shown} -> {back}",
                    to_value="baseline",
                    server_args=tuple(base_args),
                )
            )
    base_env, cell_env = dict(base.env), dict(cell.env)
    for name in sorted(set(base_env) | set(cell_env)):
        if base_env.get(name) == cell_env.get(name) or name not in base_env:
            continue  # same, or nothing to set back to (an env var cannot be unset)
        label = f"{name} {cell_env.get(name)} -> {base_env[name]}"
        out.append(
            Change(
                key=f"env:{name}",
                label=label,
                to_value=base_env[name],
                env=((name, base_env[name]),),
            )
        )
    return out


def _flags(args: Sequence[str]) -> dict[str, tuple[str, ...]] | None:
    """`--flag value...` (or `--flag=value`) per flag; None when the list is not only that
    (a positional argument, a repeated flag): then the arguments go back as a whole."""
    out: dict[str, tuple[str, ...]] = {}
    flag: str | None = None
    for arg in args:
        if arg.startswith("--") and len(arg) > 2:
            name, eq, value = arg.partition("=")
            if name in out:
                return None
            out[name] = (value,) if eq else ()
            flag = None if eq else name
        elif flag is None:
            return None
        else:
            out[flag] = (*out[flag], arg)
    return out


def _flag_changes(
    base_args: Sequence[str],
    cell_args: Sequence[str],
    intended: Sequence[Difference],
    engine: str,
) -> list[Change] | None:
    """One revert per server flag that differs, so explain can tell which of the cell's own
    flags matters. A flag only the candidate sets goes back to the baseline's resolved value
    (the engine's default, read from it); when any flag cannot be set back alone, None."""
    base, cell = _flags(base_args), _flags(cell_args)
    if base is None or cell is None:
        return None
    resolved = {d.key.split(":", 1)[1]: d for d in intended if d.key.startswith("server:")}
    out: list[Change] = []
    for flag in sorted(set(base) | set(cell)):
        mine, theirs = cell.get(flag), base.get(flag)
        if mine == theirs:
            continue
        name = flag[2:].replace("-", "_")
        shown = " ".join(mine) if mine else "(set)" if mine is not None else "(not set)"
        if theirs is not None:
            back = " ".join(theirs)
            out.append(
                Change(
                    key=f"arg:{flag[2:]}",
                    label=f"{flag} {shown} -> {back or '(set)'}",
                    to_value=back or "true",
                    args=(flag, *theirs),
                )
            )
            continue
        diff = resolved.get(name)
        made = _server_change(diff, name, engine) if diff and diff.baseline else None
        if not isinstance(made, Change) or made.args[:1] != (flag,):
            return None  # only the candidate sets it, and its default is not known
        out.append(
            Change(
                key=f"arg:{flag[2:]}",
                label=f"{flag} {shown} -> {made.to_value}",
                to_value=made.to_value,
                args=made.args,
            )
        )
    return out or None


def _pinned_version(pin: str) -> str:
    spec = str(Requirement(pin).specifier)
    return spec.removeprefix("==") or "baseline"


def pin_names(pins: Sequence[str]) -> set[str]:
    return set(_pins(pins))


def _pins(pins: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pin in pins:
        try:
            out[canonicalize_name(Requirement(pin).name)] = pin
        except InvalidRequirement:
            continue
    return out


def _group_inseparable(changes: list[Change]) -> tuple[list[Change], list[str]]:
    groups = _data.load("switches.toml").get("inseparable", [])
    out = list(changes)
    notes: list[str] = []
    for group in groups:
        names = {canonicalize_name(p) for p in group["packages"]}
        members = [c for c in out if c.key.startswith("package:") and c.key[8:] in names]
        if len(members) < 2:
            continue
        out = [c for c in out if c not in members]
        keys = tuple(c.key for c in members)
        merged = Change(
            key=keys[0],
            label=" and ".join(c.label for c in members),
            pins=tuple(p for c in members for p in c.pins),
            members=keys,
            to_value="baseline",
            reason=str(group["reason"]),
        )
        out.append(merged)
        notes.append(f"{', '.join(k[8:] for k in keys)} are reverted together: {group['reason']}")
    return out, notes
