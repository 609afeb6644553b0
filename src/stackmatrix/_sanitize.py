"""Text from results made safe for where it is shown: a terminal, a CI log, markdown,
HTML or XML.

Cell ids, phase messages and a server's last log lines come from results directories
and CI artifacts that someone else may have written. Shown as they are, they could set
the terminal's title or hide text (escape sequences), make junit.xml not well-formed
(XML 1.0 allows no C0 control but tab and line breaks), give the CI runner commands (a
log line starting with `::`, GitHub Actions' workflow commands), or show text in another
order than it is read (the bidirectional overrides of "Trojan Source", CVE-2021-42574).

`line` is for a field of one line (an id, a status, a table cell), `text` for a text
that may span lines (a message quoting a server's log). Both are the identity on
ordinary text.
"""

from __future__ import annotations

import re

# ECMA-48: CSI (ESC [ ... final byte), the string commands (OSC, DCS, SOS, PM, APC:
# ESC ] P X ^ _ ... up to BEL or ST, or the end of the line when unterminated), and
# the two- and three-byte escapes (ESC c, ESC ( B ...). They are formatting: dropped.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x1b[\]PX^_][^\x07\x1b\n]*(?:\x07|\x1b\\)?"
    r"|\x1b[ -/]*[0-~]?"
)
# What is left that a terminal or an XML parser treats as more than a character: C0
# (but tab and line feed) and C1 controls, DEL, lone surrogates (no UTF-8 encoding), the
# noncharacters XML refuses, the line and paragraph separators, and the bidirectional
# marks, embeddings, overrides and isolates. Shown escaped, so a reader sees they were
# there.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff"
    "\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
# A line the GitHub Actions runner reads as a workflow command: `::name ...::` once
# leading blanks are trimmed (actions/runner ActionCommand.TryParseV2). An escaped
# first colon keeps the line readable and makes it plain text; markdown shows `\:` as `:`.
_COMMAND = re.compile(r"^([ \t]*):(?=:)", re.MULTILINE)
# the runner's older form, `##[name ...]`, is looked for anywhere in a line
_LEGACY_COMMAND = re.compile(r"##\[")


def text(value: object) -> str:
    """`value` as a text that may span lines: line feeds are kept (CR LF and a lone CR
    become one), tabs too; everything else as `line` makes it."""
    cleaned = _ESCAPES.sub("", str(value)).replace("\r\n", "\n").replace("\r", "\n")
    cleaned = _UNSAFE.sub(_escaped, cleaned)
    return _COMMAND.sub(r"\1\\:", _LEGACY_COMMAND.sub(r"#\\#[", cleaned))


def line(value: object) -> str:
    """`value` as one line: escape sequences dropped, line breaks and tabs made spaces,
    other controls and bidirectional characters escaped, a workflow command defused."""
    return text(re.sub(r"[\r\n\t]+", " ", _ESCAPES.sub("", str(value))))


def _escaped(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
