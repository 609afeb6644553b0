"""_sanitize: text from results reaches a terminal, a CI log, markdown, HTML and XML
without escape sequences, controls, workflow commands or bidirectional overrides."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stackmatrix import _sanitize

# what neither function may leave: ESC and every other C0/C1 control but tab and line
# feed, DEL, surrogates, XML's noncharacters, line separators and the bidi controls
LEFT_OUT = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff"
    "\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[31mred\x1b[0m", "red"),
        ("\x1b]0;x\x07title", "title"),  # sets the terminal's title
        ("\x1b]8;;https://x\x1b\\link", "link"),  # a hyperlink, ended by ST
        ("a\x1b", "a"),
        ("\u202eevil", "\\u202eevil"),
        ("\u2066x\u2069\u200e", "\\u2066x\\u2069\\u200e"),
        ("nul\x00bell\x07", "nul\\x00bell\\x07"),
        ("::error::pwned", "\\::error::pwned"),
        ("  ::warning file=x::y", "  \\::warning file=x::y"),
        ("##[set-env name=A]b", "#\\#[set-env name=A]b"),
        ("a: b :: c", "a: b :: c"),
        ("plain text, 1.5 tok/s [-8.1%, -5.4%]", "plain text, 1.5 tok/s [-8.1%, -5.4%]"),
    ],
)
def test_line(raw: str, shown: str) -> None:
    assert _sanitize.line(raw) == shown


def test_a_line_has_no_line_breaks() -> None:
    assert _sanitize.line("a\n::error::pwned\r\nb\tc") == "a ::error::pwned b c"


def test_a_text_keeps_its_lines_and_defuses_each_command() -> None:
    raw = "first\n::error::pwned\r\n  ::add-mask::x\rlast\x1b]0;t\nkept"
    assert _sanitize.text(raw) == "first\n\\::error::pwned\n  \\::add-mask::x\nlast\nkept"


# any character, surrogates included (JSON can hold one), and often the ones that
# start something
ANY = st.characters(blacklist_categories=[])
TEXTS = st.text(st.one_of(ANY, st.sampled_from(list("\x1b[]:#\n\r\t\x07\\ ;0"))))


@given(TEXTS)
def test_any_text_is_safe_everywhere(raw: str) -> None:
    for cleaned in (_sanitize.line(raw), _sanitize.text(raw)):
        assert not LEFT_OUT.search(cleaned)
        assert not re.search(r"^[ \t]*::", cleaned, re.MULTILINE) and "##[" not in cleaned
        cleaned.encode("utf-8")  # a lone surrogate could not be written
        element = ET.Element("t", message=cleaned)
        element.text = cleaned
        ET.fromstring(ET.tostring(element, encoding="unicode"))  # noqa: S314 - written here
    assert "\n" not in _sanitize.line(raw)
