"""A tiny random-weight Llama with a locally trained tokenizer, for CPU benchmarks.

stackmatrix never imports torch: the model is built by an environment's own
interpreter (one that has torch, transformers and tokenizers), which runs the
standalone script `_tinymodel_script.py` fed on stdin. No hub access is needed.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

from stackmatrix import _proc
from stackmatrix.bench.workload import WORDS

log = logging.getLogger(__name__)

MARKER = "stackmatrix-tiny-model.json"


class TinyModelError(Exception):
    """The generated model cannot be had (no built cell, an unknown size, the
    environment failed to build it): every cell's bench status, not a fatal error."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def script_text() -> str:
    """The builder script, with the workload's word list baked into its corpus."""
    raw = resources.files("stackmatrix.bench").joinpath("_tinymodel_script.py").read_text()
    return raw.replace("__WORDS__", " ".join(WORDS))


def make_tiny_model(
    dest: Path,
    *,
    python: Sequence[str] = (sys.executable,),
    env: Mapping[str, str] | None = None,
    timeout_s: float = 600.0,
    size: str = "tiny",
) -> Path:
    """Create the tiny model in `dest` with `python` (an argv prefix); reuse it if present."""
    dest = dest.resolve()
    if (dest / MARKER).is_file() and (dest / "config.json").is_file():
        return dest
    try:
        result = _proc.run(
            [*python, "-", str(dest), size],
            stdin_data=script_text().encode("utf-8"),
            timeout=timeout_s,
            env=env,
        )
    except OSError as exc:
        raise TinyModelError(
            f"cannot run {' '.join(python)!r} to build the tiny model: {exc}"
        ) from exc
    if not result.ok or not (dest / MARKER).is_file():
        raise TinyModelError(
            f"building the tiny model in {dest} with {' '.join(python)!r} failed "
            f"(exit {result.returncode}); that interpreter needs torch, transformers and "
            f"tokenizers installed. Output:\n{result.tail()}"
        )
    log.info("tiny model written to %s", dest)
    return dest


def tiny_model_main(argv: Sequence[str] | None = None) -> int:
    """`stackmatrix tiny-model DEST [--python PY]`: build the tiny model, print its path."""
    parser = argparse.ArgumentParser(
        prog="stackmatrix tiny-model",
        description="Create a tiny random-weight Llama with a locally trained tokenizer.",
    )
    parser.add_argument("dest", type=Path, help="directory to write the model into")
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="interpreter that has torch, transformers and tokenizers (default: this one)",
    )
    args = parser.parse_args(argv)
    try:
        path = make_tiny_model(args.dest, python=[args.python])
    except TinyModelError as exc:
        print(exc.message, file=sys.stderr)
        return 1
    print(path)
    return 0
