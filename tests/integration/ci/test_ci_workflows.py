"""The workflows lint clean with actionlint (shellcheck included) and zizmor, follow
the project's rules (pinned actions, least privilege, no `${{ }}` in scripts), and
the linters are shown to catch what they are trusted to catch."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
WORKFLOWS = ROOT / ".github" / "workflows"
NAMES = ("matrix.yml", "ci.yml")
USES_RE = re.compile(r"^\s*(?:-\s+)?uses:\s*(\S+)(.*)$")
PINNED_RE = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")
VERSION_COMMENT_RE = re.compile(r"^\s*#\s*(v\d+)(?:\.\d+){0,2}\s*$")
RUN_RE = re.compile(r"^(\s*)(?:-\s+)?run:\s*(.*)$")

BAD_WORKFLOW = """\
name: bad
on: pull_request
jobs:
  greet:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: echo "${{ github.event.pull_request.title }}"
      - run: echo $UNQUOTED
"""


def _env(tools: Path) -> dict[str, str]:
    """PATH with the tools first, so actionlint finds this shellcheck; no GITHUB_*
    variables, so the linters behave here as on a developer's machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env["PATH"] = f"{tools}{os.pathsep}{env.get('PATH', '')}"
    return env


def _actionlint(tools: Path, *files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tools / "actionlint"), "-no-color", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(tools),
    )


def _zizmor(tools: Path, path: Path) -> tuple[int, list[dict[str, object]]]:
    # --offline: no GitHub token and no network; --persona=auditor: every finding,
    # the low-confidence ones included
    proc = subprocess.run(
        [str(tools / "zizmor"), "--offline", "--persona=auditor", "--format=json", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(tools),
    )
    assert proc.stdout.strip(), f"zizmor printed nothing (rc {proc.returncode}):\n{proc.stderr}"
    findings: list[dict[str, object]] = json.loads(proc.stdout)
    return proc.returncode, findings


def _lines(name: str) -> list[str]:
    return (WORKFLOWS / name).read_text(encoding="utf-8").splitlines()


def _run_scripts(lines: list[str]) -> list[tuple[int, str]]:
    """(line number, text) of every line that belongs to a `run:` script."""
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        m = RUN_RE.match(lines[i])
        i += 1
        if not m:
            continue
        indent, rest = len(m.group(1)), m.group(2)
        if rest and rest[0] not in "|>":
            out.append((i, rest))
            continue
        while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > indent):
            out.append((i + 1, lines[i]))
            i += 1
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


@pytest.mark.parametrize("name", NAMES)
def test_workflow_passes_actionlint(lint_tools: Path, name: str) -> None:
    proc = _actionlint(lint_tools, WORKFLOWS / name)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("name", NAMES)
def test_workflow_passes_actionlint_with_tag_refs(
    lint_tools: Path, name: str, tmp_path: Path
) -> None:
    """actionlint checks `with:` inputs and the action's runtime (e.g. a deprecated
    node20) only for refs it knows, which are major tags: lint a copy with each pinned
    SHA replaced by the major version its comment names."""
    text = (WORKFLOWS / name).read_text(encoding="utf-8")
    as_tags = re.sub(r"@[0-9a-f]{40}\s*#\s*(v\d+)[\d.]*", r"@\1", text)
    assert as_tags != text
    copy = tmp_path / ".github" / "workflows" / name
    copy.parent.mkdir(parents=True)
    copy.write_text(as_tags, encoding="utf-8")
    proc = _actionlint(lint_tools, copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_workflows_pass_zizmor(lint_tools: Path) -> None:
    rc, findings = _zizmor(lint_tools, WORKFLOWS)
    described = [f"{f.get('ident')}: {f.get('desc')}" for f in findings]
    assert findings == [], "\n".join(described)
    assert rc == 0


def test_linters_catch_what_they_are_trusted_with(lint_tools: Path, tmp_path: Path) -> None:
    """A workflow with an injectable script, an unpinned action and an unquoted
    variable: both linters must object, or the clean results above mean nothing."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(BAD_WORKFLOW, encoding="utf-8")

    proc = _actionlint(lint_tools, bad)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "github.event.pull_request.title" in proc.stdout
    assert "SC2086" in proc.stdout  # shellcheck ran on the run: script

    rc, findings = _zizmor(lint_tools, bad)
    idents = {str(f.get("ident")) for f in findings}
    assert {"template-injection", "unpinned-uses", "artipacked"} <= idents, idents
    assert rc != 0


@pytest.mark.parametrize("name", NAMES)
def test_actions_are_pinned_by_sha_with_a_version_comment(name: str) -> None:
    uses = [m for line in _lines(name) if (m := USES_RE.match(line))]
    assert uses, f"{name} uses no action"
    for m in uses:
        ref, comment = m.group(1), m.group(2)
        assert PINNED_RE.match(ref), f"{name}: {ref} is not pinned by a full commit SHA"
        assert VERSION_COMMENT_RE.match(comment), f"{name}: {ref} lacks a '# vX.Y.Z' comment"


@pytest.mark.parametrize("name", NAMES)
def test_least_privilege_and_no_persisted_credentials(name: str) -> None:
    lines = _lines(name)
    assert "permissions: {}" in lines, f"{name}: top-level permissions must be {{}}"
    jobs_at = lines.index("jobs:")
    job_starts = [i for i, ln in enumerate(lines) if i > jobs_at and re.match(r"^  [\w-]+:$", ln)]
    for start, end in zip(job_starts, [*job_starts[1:], len(lines)], strict=True):
        body = lines[start:end]
        assert any(ln.startswith("    permissions:") for ln in body), (
            f"{name}: job {lines[start].strip()} sets no permissions of its own"
        )
    checkouts = [i for i, ln in enumerate(lines) if "uses: actions/checkout@" in ln]
    for i in checkouts:
        assert "persist-credentials: false" in "\n".join(lines[i : i + 4]), (
            f"{name}:{i + 1}: checkout without persist-credentials: false"
        )


@pytest.mark.parametrize("name", NAMES)
def test_no_expressions_spliced_into_scripts(name: str) -> None:
    scripts = _run_scripts(_lines(name))
    assert scripts, f"{name}: no run: scripts found (the parser is broken)"
    spliced = [f"{name}:{n}: {text.strip()}" for n, text in scripts if "${{" in text]
    assert spliced == [], "values must reach scripts through env:\n" + "\n".join(spliced)


def test_matrix_workflow_fans_out_through_the_nox_cell_session() -> None:
    text = (WORKFLOWS / "matrix.yml").read_text(encoding="utf-8")
    assert "stackmatrix plan" in text and "--github-matrix" in text
    assert "matrix: ${{ fromJSON(needs.plan.outputs.matrix) }}" in text
    assert "runs-on: ${{ matrix.runs-on }}" in text
    assert "fail-fast: false" in text
    assert 'nox -s cell -- "$CELL" "$SPEC" --output "results/$CELL"' in text
    assert "stackmatrix-cell-${{ matrix.cell }}" in text
    assert "pattern: stackmatrix-cell-*" in text
    assert "GITHUB_STEP_SUMMARY" in text
    # the cell's artifact is uploaded even when the cell's job failed
    upload = text.index("name: Upload the cell's results")
    assert "if: always()" in text[upload : upload + 120]
