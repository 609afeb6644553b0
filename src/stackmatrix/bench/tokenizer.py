"""The model's tokenizer on the client side: random prompts of exactly `input_len` tokens.

Words of the workload's list are close to one token each (see `workload`), but not
exactly: with the Kimi tokenizer, 1000 words reached an SGLang server as 1,086 tokens.
Where the model directory (or `bench.tokenizer`) has a `tokenizer.json` and the
`tokenizers` package is importable, each random prompt is cut or extended until it
encodes, special tokens included (a BOS, where the tokenizer adds one), to exactly its
intended length. Prompts stay text by default: the server tokenizes them as it would in
production, and the same bytes are replayed to every engine. With
`bench.workload.prompt_form = "token_ids"` they are the tokenizer's ids instead,
exactly `input_len` of them (`ids`), which reach the scheduler without the server's
tokenizer in between, as `sglang.bench_serving --tokenize-prompt` sends them.
Elsewhere the prompts are the words as before and `PromptLengths` says why
(RUN/workload.json, docs/bench.md).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from stackmatrix.errors import SpecError
from stackmatrix.jsontypes import JSONObject

if TYPE_CHECKING:
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)

TOKENIZER_FILE = "tokenizer.json"
FIT_TRIES = 8  # re-encodings to reach the length; a cut inside a word can shift it by one


@dataclass(frozen=True, kw_only=True)
class PromptLengths:
    """How the run's random prompts got their lengths: `exact` by `tokenizer` (its
    sha256), or by words with the reason no tokenizer was used."""

    exact: bool
    tokenizer: str | None = None
    sha256: str | None = None
    why: str | None = None

    def to_dict(self) -> JSONObject:
        if self.exact:
            return {"by": "tokenizer", "tokenizer": self.tokenizer, "sha256": self.sha256}
        return {"by": "words", "why": self.why}


@dataclass(frozen=True)
class PromptTokenizer:
    """A `tokenizers.Tokenizer` read from a tokenizer.json, and how it was found."""

    tokenizer: Tokenizer
    lengths: PromptLengths

    def count(self, text: str) -> int:
        """Tokens of `text` as a server counts a completion's prompt: special tokens
        the tokenizer adds (a BOS) included."""
        return len(self.tokenizer.encode(text, add_special_tokens=True).ids)

    def fit(self, words: Sequence[str], target: int) -> tuple[str, int]:
        """A prompt of `target` tokens from `words` (repeated when they are too few) and
        its length: the words joined, unchanged where they already have that length."""
        text = " ".join(words)
        enc = self.tokenizer.encode(text, add_special_tokens=True)
        if len(enc.ids) == target or not words:
            return text, len(enc.ids)
        while len(enc.ids) < target:
            longer = self.tokenizer.encode(text + " " + " ".join(words), add_special_tokens=True)
            if len(longer.ids) <= len(enc.ids):
                break  # a normalizer that drops these words: no length to reach
            text, enc = text + " " + " ".join(words), longer
        content = [
            i for i, special in zip(enc.ids, enc.special_tokens_mask, strict=True) if not special
        ]
        return self._cut(content, len(enc.ids) - len(content), (text, len(enc.ids)), target)

    def ids(self, words: Sequence[str], target: int) -> tuple[int, ...]:
        """A prompt of exactly `target` token ids from `words` (repeated when they are
        too few): the special tokens the tokenizer adds (a BOS first, an EOS last) where
        it adds them, and the words' ids cut to the rest. Nothing is re-encoded, so
        every prompt has its length."""
        enc = self.tokenizer.encode(" ".join(words), add_special_tokens=True)
        mask = list(enc.special_tokens_mask)
        head = next((i for i, special in enumerate(mask) if not special), len(mask))
        tail = next((i for i, special in enumerate(reversed(mask)) if not special), 0)
        ids = list(enc.ids)
        lead, trail = ids[:head], ids[len(ids) - tail :] if tail else []
        content = [i for i, special in zip(ids, mask, strict=True) if not special]
        want = target - len(lead) - len(trail)
        if want <= 0:
            return tuple((lead + trail)[:target])
        if not content:
            raise ValueError("the prompt's words encode to no tokens")
        while len(content) < want:
            content += content
        return tuple(lead + content[:want] + trail)

    def encode(self, text: str) -> tuple[int, ...]:
        """`text`'s ids as a server counts its prompt: special tokens (a BOS) included."""
        return tuple(self.tokenizer.encode(text, add_special_tokens=True).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids)))

    def _cut(
        self, ids: Sequence[int], specials: int, best: tuple[str, int], target: int
    ) -> tuple[str, int]:
        """The text of the longest prefix of `ids` that re-encodes to `target` tokens
        (`specials` of them added by the tokenizer), or the closest of FIT_TRIES tries."""
        k = max(1, target - specials)
        for _ in range(FIT_TRIES):
            cand = self.tokenizer.decode(ids[:k])
            n = self.count(cand)
            if abs(n - target) < abs(best[1] - target):
                best = (cand, n)
            if n == target:
                break
            k = min(len(ids), max(1, k + target - n))
        return best


def find(
    configured: str | None, model: str, spec_dir: Path | None
) -> tuple[PromptTokenizer | None, PromptLengths]:
    """The tokenizer of `bench.tokenizer` (a tokenizer.json or a directory with one,
    relative to the spec) or else of the model directory, and how the lengths are
    made: by words where there is none or `tokenizers` is not installed. A
    `bench.tokenizer` that cannot be read is an error."""
    if configured is not None:
        path = _tokenizer_path(Path(configured), spec_dir)
        if not path.is_file():
            raise SpecError("bench.tokenizer", [f"{configured!r}: no {TOKENIZER_FILE} there"])
        return _load(path, required=True)
    found = _tokenizer_path(Path(model), None) if model else None
    if found is None or not found.is_file():
        return None, PromptLengths(exact=False, why=f"no {TOKENIZER_FILE} at {model!r}")
    return _load(found, required=False)


NOT_INSTALLED = "the tokenizers package is not installed (pip install 'stackmatrix[tokens]')"


def _tokenizer_path(path: Path, spec_dir: Path | None) -> Path:
    if not path.is_absolute() and spec_dir is not None:
        path = spec_dir / path
    return path / TOKENIZER_FILE if path.is_dir() else path


def _load(path: Path, *, required: bool) -> tuple[PromptTokenizer | None, PromptLengths]:
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        if required:
            raise SpecError("bench.tokenizer", [NOT_INSTALLED]) from exc
        return None, PromptLengths(exact=False, why=NOT_INSTALLED)
    data = path.read_bytes()
    try:
        tok = Tokenizer.from_str(data.decode("utf-8"))
    except Exception as exc:  # tokenizers raises a bare Exception for a bad file
        why = f"{str(path)!r} is not a tokenizer: {str(exc)[:200]}"
        if required:
            raise SpecError("bench.tokenizer", [why]) from exc
        return None, PromptLengths(exact=False, why=why)
    sha = hashlib.sha256(data).hexdigest()
    lengths = PromptLengths(exact=True, tokenizer=str(path), sha256=sha)
    return PromptTokenizer(tok, lengths), lengths
