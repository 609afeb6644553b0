"""matrix.html opened in a real browser (headless Chromium), as a person would.

Needs Debian's `chromium` package (CI installs it); the test fails when it is missing.
"""

import re
import shutil
import subprocess
from collections.abc import Sequence
from html.parser import HTMLParser
from pathlib import Path

import pytest
from tests.support.synthetic import story_cells, write_run

from stackmatrix.report import build_report

pytestmark = pytest.mark.integration

_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("chromium is not installed: as root, `apt-get install -y chromium`")
    return path


def _run(args: Sequence[str], tmp_path: Path) -> str:
    argv = [_chromium(), *_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class _Tables(HTMLParser):
    """Collects each rendered table as rows of cell texts, and the svg shapes drawn."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.shapes: dict[str | None, int] = {}
        self.tags: set[str] = set()
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag in ("circle", "rect", "line"):
            cls = dict(attrs).get("class", "")
            self.shapes[cls] = self.shapes.get(cls, 0) + 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


@pytest.fixture(scope="module")
def story_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = write_run(
        tmp_path_factory.mktemp("story") / "run",
        spec_name="kimi-k25-cuda13",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    return build_report(run).html


def test_dom_shows_the_tables_plots_and_findings(story_html, tmp_path):
    dom = _run(["--dump-dom", story_html.as_uri()], tmp_path)
    page = _Tables()
    page.feed(dom)
    compat = page.tables[0]
    assert compat[0] == ["cell", "build", "compat", "sm_120", "bench", "verdict"]
    assert compat[2][0] == "cu130" and compat[2][-1] == "slower"
    perf = page.tables[1]
    assert perf[2][0] == "cu130" and perf[2][3].startswith("-") and perf[2][4] == "slower"
    drift = next(t for t in page.tables if t[0][:2] == ["#", "setting"])
    assert drift[1][1:4] == ["attention_backend", "flashinfer", "triton"]
    assert drift[2][1:4] == ["deepgemm", "off", "on"]
    # 5 launches per cell drawn as dots, one interval bar per cell, box plots for
    # TTFT, ITL and TPOT
    assert page.shapes.get("pt") == 10
    assert page.shapes.get("ci base") == 1 and page.shapes.get("ci slower") == 1
    assert page.shapes.get("box") == 6
    assert page.shapes.get("launch") == 10  # the launches in time order
    assert "details" in page.tags and "svg" in page.tags
    assert "SYNTHETIC DATA" in dom


def test_page_is_self_contained(story_html):
    html = story_html.read_text()
    assert "<script" not in html and "<link" not in html and "<img" not in html
    assert not re.search(r'(src|href)="https?:', html)


def test_screenshot_renders_a_full_page(story_html, tmp_path):
    png = tmp_path / "story.png"
    _run([f"--screenshot={png}", "--window-size=1400,2000", story_html.as_uri()], tmp_path)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    # A blank 1400x2000 page compresses to a few kB; tables, badges and plots do not.
    assert len(data) > 60_000, len(data)
