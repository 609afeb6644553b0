"""Every name of the results directory is spelled once, in src/stackmatrix/layout.py.

The scan reads every module's string literals and f-strings with `ast` (docstrings left
out: they describe files, they do not name them for a path) and fails on:

- a word shaped like a file name with one of the results' suffixes (`bench.json`,
  `{phase}.log`, `.live.json`, `block-{k}.json`, ...), unless `NOT_RESULTS` lists it for
  its module with the reason it is not a results-directory file;
- a path component (the right side of `/`, the argument of `joinpath`, `glob`,
  `with_name`, ...) that is one of layout.py's own strings (`cells`, `round-{k}`): a
  name layout.py defines, spelled again beside it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from stackmatrix.check import data as check_data

SRC = Path(__file__).resolve().parents[2] / "src" / "stackmatrix"
LAYOUT = SRC / "layout.py"
SUFFIXES = (
    "json",
    "jsonl",
    "toml",
    "log",
    "out",
    "sh",
    "gz",
    "md",
    "html",
    "xml",
    "sqlite",
    "lock",
    "txt",
    "csv",
    "yaml",
)
# a file-name-shaped word: `run.json`, `{}.log` (an f-string's field), `.live.json`, `*.toml`
_CHARS = r"[\w.{}*/%-]"
_NAME = re.compile(rf"(?<!{_CHARS})({_CHARS}*\.(?:{'|'.join(SUFFIXES)}))(?![\w.])")
_PATH_CALLS = ("joinpath", "glob", "rglob", "with_name", "with_suffix", "with_stem")

_COMPAT = "compat/'s data files, read through check/data.py: not in the results"
_MODEL = "a file of a Hugging Face model directory, the engine's input"
_CONTEXT = "the docker build context (builder/_docker_context.py), not the results"
_ENV = "a venv cell's own directory under the work directory, not the results"
_CACHE = "the static-scan cache under the work directory, not the results"

NOT_RESULTS: dict[str, dict[str, str]] = {
    "_datadir.py": {"loaders.toml": _COMPAT},
    "check/data.py": dict.fromkeys(check_data.FILES, _COMPAT),
    "check/coverage.py": {"loaders.toml": _COMPAT},
    "check/defaults.py": {"features.toml": _COMPAT, "config.json": _MODEL},
    "check/driver.py": {"cuda_driver.toml": _COMPAT},
    "check/environment.py": {"known_bad.toml": _COMPAT},
    "check/features.py": {"features.toml": _COMPAT},
    "check/nvccarch.py": {"nvcc_arch.toml": _COMPAT},
    "check/missinglibs.py": {"system_libs.toml": _COMPAT, "compat/system_libs.toml": _COMPAT},
    "check/samever.py": {"known_bad.toml": _COMPAT},
    "explain/derive.py": {"switches.toml": _COMPAT},
    "report/config_drift.py": {"drift_rank.toml": _COMPAT},
    "report/logfacts.py": {"log_patterns.toml": _COMPAT},
    "report/model.py": {"compat/log_patterns.toml": _COMPAT},
    "check/scancache.py": {"{}.json": _CACHE, "*.json": _CACHE, "*.toml": _COMPAT},
    "check/nvcc.py": {"version.json": "the CUDA toolkit's own version file"},
    "builder/lockscript.py": {"direct_url.json": "an installed distribution's PEP 610 record"},
    "bench/tokenizer.py": {"tokenizer.json": _MODEL},
    "bench/tinymodel.py": {"config.json": _MODEL, "stackmatrix-tiny-model.json": _MODEL},
    "bench/_tinymodel_script.py": {"stackmatrix-tiny-model.json": _MODEL},
    "builder/venv.py": {"stackmatrix-env.json": _ENV, "lock.txt": _ENV, ".lock": _ENV},
    "builder/_docker_context.py": {
        "stackmatrix-compiled.txt": "the resolved lock, kept inside the image's venv",
        "requirements.txt": _CONTEXT,
        "system-python.sh": _CONTEXT,
        "plan.json": _CONTEXT,
    },
    "builder/docker.py": {"requirements.txt": _CONTEXT, "plan.json": _CONTEXT},
    "builder/_docker_cli.py": {".ci/start-dockerd.sh": "a script of this repository, in advice"},
    "specfile/bench.py": {"prompts.jsonl": "an example of a user's prompt file, in a message"},
}


def _text(node: ast.AST) -> str | None:
    """A literal's text; an f-string's with `{}` for each field."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            part.value if isinstance(part, ast.Constant) and isinstance(part.value, str) else "{}"
            for part in node.values
        )
    return None


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = body[0] if body else None
            if isinstance(first, ast.Expr) and _text(first.value) is not None:
                found.add(id(first.value))
    return found


def strings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, text) of every literal and f-string that is not a docstring; an f-string's
    own pieces are read as the whole."""
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            skip.update(id(part) for part in node.values)
    for node in ast.walk(tree):
        text = _text(node)
        if isinstance(node, ast.expr) and text is not None and id(node) not in skip:
            yield node.lineno, text


def file_names(text: str) -> list[str]:
    return _NAME.findall(text)


def path_components(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            parts: list[ast.expr] = [node.right]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            parts = list(node.args) if node.func.attr in _PATH_CALLS else []
        else:
            continue
        for part in parts:
            if (text := _text(part)) is not None:
                yield part.lineno, text


def layout_strings() -> set[str]:
    tree = ast.parse(LAYOUT.read_text(encoding="utf-8"))
    return {text for _, text in strings(tree)}


def spelled_outside_layout() -> list[str]:
    defined = layout_strings()
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if path == LAYOUT or "_compat_data" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        allowed = NOT_RESULTS.get(rel, {})
        for line, text in strings(tree):
            found += [f"{rel}:{line}: {n!r}" for n in file_names(text) if n not in allowed]
        for line, text in path_components(tree):
            if text in defined and text not in allowed:
                found.append(f"{rel}:{line}: {text!r} (a path component layout.py defines)")
    return sorted(set(found))


def test_results_names_are_spelled_only_in_layout() -> None:
    found = spelled_outside_layout()
    assert found == [], (
        "results-directory names spelled outside layout.py (use a layout constant or "
        "function; a name that is not a results file goes into NOT_RESULTS with its "
        "reason):\n  " + "\n  ".join(found)
    )


def test_every_exception_is_still_needed() -> None:
    """An entry of NOT_RESULTS that no module spells any more is dropped."""
    stale = []
    for rel, names in NOT_RESULTS.items():
        path = SRC / rel
        texts = [t for _, t in strings(ast.parse(path.read_text(encoding="utf-8")))]
        spelled = {n for t in texts for n in file_names(t)}
        stale += [f"{rel}: {name!r}" for name in names if name not in spelled]
    assert stale == [], stale


def test_the_scan_finds_names_in_literals_and_f_strings() -> None:
    code = (
        '"""bench.json, in a docstring: not a name"""\n'
        'a = f"{phase}.log"\n'
        'b = "no run.json here"\n'
        'c = d / "cells"\n'
        'e = "pyproject"\n'
        'f = path.with_name(stem + ".live.json")\n'
        'g = f"{stem}.%j.out"\n'
    )
    tree = ast.parse(code)
    names = sorted((line, n) for line, text in strings(tree) for n in file_names(text))
    assert names == [(2, "{}.log"), (3, "run.json"), (6, ".live.json"), (7, "{}.%j.out")]
    assert sorted(path_components(tree)) == [(4, "cells")]
    assert "cells" in layout_strings() and "run.json" in layout_strings()
