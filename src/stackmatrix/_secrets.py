"""Secrets never land in results, logs or reports: redact by name and by value.

A name is secret when one of its `_`/`-`/`.`-separated words is a credential word
(`AWS_SECRET_ACCESS_KEY`, `api-key`) or it ends in `token`, `auth` or `key` (`hf_token`),
not when it merely contains one: `tokenizer_path`, `max_total_tokens`,
`tbo_token_distribution_threshold` or `enable_forward_pass_metrics` are configuration
that a comparison between cells must show; and only a string value is
hidden, never a number, a boolean or a list. A value is secret when it has the
shape of a well-known credential (a Hugging Face, OpenAI, GitHub or AWS key, a
bearer header), whatever its name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

# Kept in step with check/_probe_script.py, which runs inside a cell's interpreter
# and cannot import this module (a unit test compares the two).
CREDENTIAL_NAME_PATTERN = (
    r"(?:^|[_\-.])(?:secret|passw(?:or)?d|api[_\-]?key|access[_\-]?key|private[_\-]?key|"
    r"credentials?|authorization|cookie|session[_\-]?key)(?:$|[_\-.])"
    r"|(?:^|[_\-.])(?:token|auth|key)$"
)
_SECRET_NAME = re.compile(CREDENTIAL_NAME_PATTERN, re.IGNORECASE)
# More credential names (the probe keeps a copy of these too): `MY_CREDS`,
# `GPG_PASSPHRASE`, `--authkey`; `DB_PASS`, `--db-pass`, and
# `pass`, `passwd`, `password` glued to a prefix (`PGPASS`, `PGPASSWORD`). Not `pass`
# inside a name (`PASSTHROUGH_MODE`, `enable_forward_pass_metrics`) nor the English
# words ending in it (`COMPASS`, `BYPASS`): those are configuration to compare.
MORE_CREDENTIAL_NAME_PATTERN = (
    r"(?:^|[_\-.])(?:creds?|passphrase|auth[_\-]?(?:key|token))(?:$|[_\-.])"
    r"|passw(?:or)?d$|passphrase$"
    r"|(?<!com)(?<!by)(?<!sur)(?<!tres)(?<!over)(?<!under)pass$"
)
_MORE_SECRET_NAMES = re.compile(MORE_CREDENTIAL_NAME_PATTERN, re.IGNORECASE)
# Shapes of credentials, so a token passed under an innocent name is still hidden.
_SECRET_VALUE = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_\-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|"
    r"github_pat_[A-Za-z0-9_]{20,}|AKIA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9\-]{10,})\b"
    r"|(?i:bearer\s+[A-Za-z0-9._\-]{16,})"
)
REDACTED = "<redacted>"


def is_secret_name(name: str) -> bool:
    # camelCase words count as words too (`hfToken`, `apiKey`)
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return bool(_SECRET_NAME.search(spaced) or _MORE_SECRET_NAMES.search(spaced))


def is_secret_value(value: object) -> bool:
    """A token's shape or a URL's password anywhere in `value` (what redact_text hides)."""
    return isinstance(value, str) and redact_text(value) != value


# The password of a URL's user info (`https://user:TOKEN@index.example/simple`); a lone
# `https://TOKEN@host` is a token too. The user name and the host stay readable. A scheme
# starts only where a scheme's character does not precede it: a 100 kB word is then
# tried once, not from each of its characters (16 s for one log line).
_URL_USERINFO = re.compile(
    r"(?<![A-Za-z0-9+.\-])(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^/\s:@]+)(?P<password>:[^/\s@]*)?@"
)


def _url_userinfo(m: re.Match[str]) -> str:
    if m.group("password") is None:
        return f"{m.group('scheme')}{REDACTED}@"
    return f"{m.group('scheme')}{m.group('user')}:{REDACTED}@"


def mask_url_passwords(text: str) -> str:
    """`text` with each URL's password (or lone token) shown as `***`, the user name and
    the host kept: an error message that quotes a value stays one a person can act on."""

    def mask(m: re.Match[str]) -> str:
        if m.group("password") is None:
            return f"{m.group('scheme')}***@"
        return f"{m.group('scheme')}{m.group('user')}:***@"

    return _URL_USERINFO.sub(mask, text)


# `name=value`, `name='value'` and `"name": "value"` in free text (sglang prints its
# ServerArgs as `api_key='...'`; a URL's query `?access_token=...`): hidden when the
# name is a secret one. A name starts only after a character that cannot be in one, so a
# long word without `=` is tried once, not from each of its characters.
_TEXT_ASSIGNMENT = re.compile(
    r"""(?<![A-Za-z0-9_.\-])(?P<name>[A-Za-z][A-Za-z0-9_.\-]*)(?P<q>["']?)"""
    r"""(?:(?P<eq>\s*=\s*)(?P<value>'[^'\n]*'|"[^"\n]*"|[^\s,;&)'"]+)"""
    r"""|(?P<colon>\s*:\s*)(?P<quoted>'[^'\n]*'|"[^"\n]*"))"""
)
_NO_VALUE = ("", "None", "null")  # sglang prints `api_key=None` when none is set


def _hide_assigned(m: re.Match[str]) -> str:
    value = m.group("value") or m.group("quoted")
    bare = value.strip("'\"")
    if not is_secret_name(m.group("name")) or bare in _NO_VALUE or bare == REDACTED:
        return m.group(0)
    quote = value[0] if value[0] in "'\"" else ""
    shown = f"{quote}{REDACTED}{quote}"
    return f"{m.group('name')}{m.group('q')}{m.group('eq') or m.group('colon')}{shown}"


def redact_text(text: str) -> str:
    """`text` with every credential-shaped substring replaced, and the value assigned to
    a secret name (`api_key='...'`)."""
    text = _URL_USERINFO.sub(_url_userinfo, _SECRET_VALUE.sub(REDACTED, text))
    return _TEXT_ASSIGNMENT.sub(_hide_assigned, text) if "=" in text or ":" in text else text


def redact(data: Any) -> Any:
    """A copy of `data` with the values of secret-looking keys replaced (nested)."""
    if isinstance(data, dict):
        return {
            k: (REDACTED if is_secret_name(str(k)) and _credential_like(v) else redact(v))
            for k, v in data.items()
        }
    if isinstance(data, list):
        return [redact(v) for v in data]
    if isinstance(data, str):
        return redact_text(data)
    return data


def _credential_like(value: object) -> bool:
    # A credential is a non-empty string: `bucket_time_to_first_token = [0.1, 0.5]` or
    # a boolean `enable_auth` is configuration whatever its name says.
    return isinstance(value, str) and value != ""


def _argv_secrets(argv: Sequence[str]) -> Iterator[tuple[int, str, str]]:
    """(index, flag prefix, secret value) of each value a secret flag hands over:
    `--api-key X` gives (i+1, "", X), `--hf-token=X` gives (i, "--hf-token=", X)."""
    take_next = False
    for i, arg in enumerate(argv):
        if take_next:
            take_next = False
            yield i, "", arg
            continue
        flag, eq, value = arg.partition("=")
        if flag.startswith("-") and is_secret_name(flag.lstrip("-")):
            if eq:
                yield i, f"{flag}=", value
            else:
                take_next = True


def redact_argv(argv: Sequence[str]) -> list[str]:
    """`--api-key X` and `--hf-token=X` keep the flag, lose the value."""
    out = [redact_text(a) for a in argv]
    for i, prefix, _ in _argv_secrets(argv):
        out[i] = f"{prefix}{REDACTED}"
    return out


def secret_values(argv: Sequence[str] = (), env: Mapping[str, str] | None = None) -> set[str]:
    """The values a command line and an environment hand over as secrets (`--api-key X`,
    `--hf-token=X`, `HF_TOKEN=X`): what a child may print back in clear (sglang logs
    its whole ServerArgs, api_key included)."""
    found = {value for _, _, value in _argv_secrets(argv)}
    found |= {v for k, v in (env or {}).items() if is_secret_name(k) and _credential_like(v)}
    return {v for v in found if len(v) >= _MIN_SECRET_LEN}


_MIN_SECRET_LEN = 4  # shorter "secrets" (`--api-key x`) would redact half of every log


def redact_known(text: str, known: Iterable[str] = ()) -> str:
    """`text` redacted (redact_text) and with each of the `known` secrets (what a command
    line and an environment handed a child: `secret_values`) hidden too."""
    hidden = redact_text(text)
    for literal in _literals(known):
        hidden = hidden.replace(literal, REDACTED)
    return hidden


def _literals(known: Iterable[str]) -> list[str]:
    return sorted({k for k in known if k}, key=len, reverse=True)  # longest first


def redact_files(*paths: Path, known: Iterable[str] = ()) -> None:
    """Files a tool had to read or write with credentials in them (uv's requirements and
    lock, a docker build context, a server's log) keep none once it is done: rewritten
    line by line with credential-shaped values and the `known` secrets hidden, so they
    stay for the user to read. A missing, linked or unreadable file is left alone."""
    literals = _literals(known)
    for path in paths:
        try:
            _redact_file(path, literals)
        except (OSError, UnicodeDecodeError):
            continue


def _redact_file(path: Path, literals: list[str]) -> None:
    if path.is_symlink() or not path.is_file():
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.redacting")
    changed = False
    enc, err = "utf-8", "surrogateescape"
    # "x": never through a link or onto a file someone else put there
    with (
        path.open("r", encoding=enc, errors=err, newline="") as src,
        tmp.open("x", encoding=enc, errors=err, newline="") as dst,
    ):
        for line in src:
            hidden = redact_known(line, literals)
            changed = changed or hidden != line
            dst.write(hidden)
    if changed:
        tmp.replace(path)
    else:
        tmp.unlink()


def has_credentials(*values: str) -> bool:
    """Whether any of `values` (URLs, pins) carries something redact_text would hide."""
    return any(redact_text(v) != v for v in values)


def redact_spec_text(text: str) -> str:
    """A spec's TOML text with secret values hidden: `KEY = "value"` under a secret name
    (an inline env table's too), the value after a secret flag in a server-args array,
    and every credential-shaped string (a URL's password, a token's shape)."""
    text = _SECRET_ASSIGNMENT.sub(_hide_secret_value, text)
    return redact_text(_hide_flag_values(text))


# `KEY = "value"` in TOML, also inside an inline table such as env = { KEY = "value" }
_SECRET_ASSIGNMENT = re.compile(
    r"""(["']?)([A-Za-z0-9_.\-]+)\1(\s*=\s*)("(?:[^"\\\n]|\\.)*"|'[^'\n]*')"""
)


def _hide_secret_value(match: re.Match[str]) -> str:
    quote, key, eq, _ = match.groups()
    return f'{quote}{key}{quote}{eq}"{REDACTED}"' if is_secret_name(key) else match.group(0)


# the strings of a TOML text, and what separates one from the next in an array: a comma
# and blanks, newlines or comments
_STRING = re.compile(r""""(?:[^"\\\n]|\\.)*"|'[^'\n]*'""")
_ARRAY_GAP = re.compile(r"\s*,\s*(?:#[^\n]*\n\s*)*")


def _hide_flag_values(text: str) -> str:
    """Every server arg after a secret flag (`"--api-key", "value"`, across lines too)
    and the value of `"--hf-token=value"` hidden, however many follow one another."""
    out: list[str] = []
    end = 0
    after_flag = False
    for match in _STRING.finditer(text):
        gap = text[end : match.start()]
        token = match.group(0)
        quote, body = token[0], token[1:-1]
        if after_flag and _ARRAY_GAP.fullmatch(gap):
            token = f'"{REDACTED}"'
            after_flag = False
        else:
            flag, eq, _ = body.partition("=")
            secret = flag.startswith("-") and is_secret_name(flag.lstrip("-"))
            after_flag = secret and not eq
            if secret and eq:
                token = f"{quote}{flag}={REDACTED}{quote}"
        out += [gap, token]
        end = match.end()
    return "".join([*out, text[end:]])
