"""The workload: generated once per run, saved with the results, replayed byte for byte.

Random prompts are drawn from a fixed list of common English words with a seeded
RNG. With byte-level BPE vocabularies (Llama, Qwen, Kimi, the tiny test model) each
of these words, preceded by a space, is one token, so a prompt of N words is close
to N tokens even without a tokenizer; with the model's tokenizer (`tokenizer`) each
prompt is fitted to exactly N tokens. See docs/bench.md.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from stackmatrix import _atomic, _jsonload, _nofollow, layout
from stackmatrix.bench.tokenizer import PromptTokenizer
from stackmatrix.errors import SpecError
from stackmatrix.jsontypes import JSONObject
from stackmatrix.spec_model import Workload

SCHEMA_VERSION = 1
PROMPT_FILE_LIMIT = 1 << 30  # far beyond any real prompt set; /dev/zero never ends
WORKLOAD_FILE = layout.WORKLOAD_JSONL

_WORD_TEXT = """
    the of and to in is was for on that with as by at from his her it an are were
    be this which or had not but have they one all their has been there can who
    would more other when will into if its some than them time only two so these
    may first then do any like my now over such our man me even most made after
    also did many before must through back years where much your way well down
    should because each just those people how too little state good very make world
    still own see men work long get here between both life being under never day
    same another know while last might us great old year off come since against go
    came right used take three states himself few house use during without again
    place around however home small found thought went say part once general high
    upon school every does got united left number course war until always away
    something fact though water less public put think almost hand enough far took
    head yet government system better set told nothing night end why called
    didn find going look asked later knew point next city business give group
    toward young days let room president side social present given several order
    national second possible rather per face among form important often things
    early white case john become large big need four within felt along children
    saw best church ever least power development light thing seemed family
    interest want members mind country area others done turned although open
    problem god service certain kind began different door thus help sense means
    whole matter perhaps itself york times law human line above name example
    action company hands local show whether five history gave today either act
    feet across taken past quite anything seen having death week experience body
    word half really field am car words already themselves information tell
    college shall money period held keep sure probably free seems real behind cannot
    miss political air question making office brought whose special heard major
"""
WORDS: tuple[str, ...] = tuple(_WORD_TEXT.split())


@dataclass(frozen=True, kw_only=True)
class BenchRequest:
    """One request of the workload, identical in every cell."""

    index: int
    prompt: str
    # intended prompt length in tokens: exact for random prompts fitted by the model's
    # tokenizer, else its words
    input_len: int
    max_tokens: int
    arrival_s: float  # offset from the round's start; 0.0 when request_rate is inf
    warmup: bool = False
    # prompt_form = "token_ids": what is sent instead of `prompt` (which is then their
    # decoding, for the reader), exactly input_len of them
    prompt_ids: tuple[int, ...] | None = None

    def to_dict(self) -> JSONObject:
        out = self._fields()
        if self.prompt_ids is not None:  # absent for text prompts: their bytes unchanged
            out["prompt_ids"] = list(self.prompt_ids)
        return out

    @property
    def sent_prompt(self) -> str | list[int]:
        """The completion's `prompt`: the ids where there are, else the text."""
        return list(self.prompt_ids) if self.prompt_ids is not None else self.prompt

    def _fields(self) -> JSONObject:
        return {
            "schema_version": SCHEMA_VERSION,
            "index": self.index,
            "warmup": self.warmup,
            "arrival_s": self.arrival_s,
            "input_len": self.input_len,
            "max_tokens": self.max_tokens,
            "prompt": self.prompt,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> BenchRequest:
        return cls(
            index=_int(raw["index"]),
            prompt=str(raw["prompt"]),
            input_len=_int(raw["input_len"]),
            max_tokens=_int(raw["max_tokens"]),
            arrival_s=_float(raw["arrival_s"]),
            warmup=bool(raw.get("warmup", False)),
            prompt_ids=_ids(raw.get("prompt_ids")),
        )


@dataclass(frozen=True, kw_only=True)
class WorkloadSet:
    """The measured requests and the warm-up requests sent before every round."""

    measured: tuple[BenchRequest, ...]
    warmup: tuple[BenchRequest, ...]
    # every prompt was fitted to its input_len by the model's tokenizer, so the
    # server's usage.prompt_tokens is checked against it (never part of the bytes)
    exact_lengths: bool = False
    unfitted: int = 0  # prompts no cut brought to their length (they are a token off)
    prompt_form: str = "text"  # "token_ids": each request's prompt_ids are sent

    def to_jsonl(self) -> bytes:
        lines = [json.dumps(r.to_dict(), sort_keys=True) for r in (*self.warmup, *self.measured)]
        return ("\n".join(lines) + "\n").encode("utf-8")

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.to_jsonl()).hexdigest()


def generate(
    workload: Workload, *, spec_dir: Path | None = None, tokenizer: PromptTokenizer | None = None
) -> WorkloadSet:
    """Build the requests that `workload` describes (deterministic for a given seed and
    tokenizer); random prompts fitted to their lengths by `tokenizer` where given."""
    rng = random.Random(workload.seed)
    ids = workload.prompt_form == "token_ids"
    if ids and tokenizer is None:
        raise SpecError(
            "bench.workload.prompt_form",
            ["\"token_ids\" needs the model's tokenizer (its directory's or bench.tokenizer)"],
        )
    # a file's prompts are its own: fitted by nobody, but sent as their ids when asked
    fitter = _Fitter(tokenizer if workload.kind == "random" or ids else None, ids=ids)
    if workload.kind == "file":
        measured_specs = [fitter.own(p, m) for p, m in _file_prompts(workload, spec_dir)]
    else:
        measured_specs = _random_prompts(workload, rng, workload.num_prompts, fitter)
    arrivals = arrival_times(len(measured_specs), workload.request_rate, rng)
    measured = tuple(
        BenchRequest(
            index=i, prompt=p.text, input_len=n, max_tokens=m, arrival_s=t, prompt_ids=p.ids
        )
        for i, ((p, n, m), t) in enumerate(zip(measured_specs, arrivals, strict=True))
    )
    warm_rng = random.Random(workload.seed + 1_000_003)
    warm_specs = _random_prompts(workload, warm_rng, workload.warmup, fitter)
    if workload.kind == "file" and measured_specs:
        warm_specs = [measured_specs[i % len(measured_specs)] for i in range(workload.warmup)]
    warmup = tuple(
        BenchRequest(
            index=i,
            prompt=p.text,
            input_len=n,
            max_tokens=m,
            arrival_s=0.0,
            warmup=True,
            prompt_ids=p.ids,
        )
        for i, (p, n, m) in enumerate(warm_specs)
    )
    exact = fitter.tokenizer is not None
    return WorkloadSet(
        measured=measured,
        warmup=warmup,
        exact_lengths=exact,
        unfitted=fitter.unfitted,
        prompt_form=workload.prompt_form,
    )


@dataclass(frozen=True)
class _Prompt:
    text: str
    ids: tuple[int, ...] | None = None  # prompt_form = "token_ids"


@dataclass
class _Fitter:
    """Joins a prompt's words, fitted to its length by the tokenizer where there is one;
    with `ids`, the tokenizer's ids of exactly that length, and their text."""

    tokenizer: PromptTokenizer | None
    ids: bool = False
    unfitted: int = 0

    def prompt(self, words: Sequence[str], target: int) -> _Prompt:
        if self.tokenizer is None:
            return _Prompt(" ".join(words))
        if self.ids:
            ids = self.tokenizer.ids(words, target)
            return _Prompt(self.tokenizer.decode(ids), ids)
        text, n = self.tokenizer.fit(words, target)
        self.unfitted += n != target
        return _Prompt(text)

    def own(self, text: str, max_tokens: int) -> tuple[_Prompt, int, int]:
        """A prompt file's prompt as it is, its length in words, or in ids when sent so."""
        if not self.ids or self.tokenizer is None:
            return _Prompt(text), len(text.split()), max_tokens
        ids = self.tokenizer.encode(text)
        return _Prompt(text, ids), len(ids), max_tokens


def arrival_times(count: int, rate: float, rng: random.Random) -> list[float]:
    """Poisson arrivals (exponential gaps) at `rate` per second; all 0.0 when inf."""
    if math.isinf(rate) or rate <= 0:
        return [0.0] * count
    times, now = [], 0.0
    for _ in range(count):
        times.append(round(now, 6))
        now += rng.expovariate(rate)
    return times


def _lengths(target: int, ratio: float, rng: random.Random) -> int:
    low = max(1, int(target * ratio))
    return rng.randint(low, max(low, target))


def _random_prompts(
    workload: Workload, rng: random.Random, count: int, fitter: _Fitter
) -> list[tuple[_Prompt, int, int]]:
    """The RNG draws the same words with or without a tokenizer: it only cuts them."""
    out = []
    for _ in range(count):
        n_in = _lengths(workload.input_len, workload.range_ratio, rng)
        n_out = _lengths(workload.output_len, workload.range_ratio, rng)
        words = [rng.choice(WORDS) for _ in range(n_in)]
        out.append((fitter.prompt(words, n_in), n_in, n_out))
    return out


def _file_prompts(workload: Workload, spec_dir: Path | None) -> list[tuple[str, int]]:
    if not workload.path:
        raise SpecError("bench.workload", ["kind = 'file' needs bench.workload.path"])
    path = Path(workload.path)
    if not path.is_absolute() and spec_dir is not None:
        path = spec_dir / path
    rows = _parse_prompt_file(_read_prompt_file(path), path)
    if not rows:
        raise SpecError(str(path), ["bench.workload.path: the file has no prompts"])
    picked = [rows[i % len(rows)] for i in range(workload.num_prompts)]
    return [(p, m or workload.output_len) for p, m in picked]


def _read_prompt_file(path: Path) -> str:
    """The prompt file's text: a regular file (a link to one is the user's own choice) of
    at most PROMPT_FILE_LIMIT bytes; a FIFO or a device would block or never end."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not block
    except OSError as exc:
        raise SpecError(
            str(path), [f"bench.workload.path: cannot read the prompt file: {exc.strerror}"]
        ) from exc
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SpecError(
                str(path),
                [
                    "bench.workload.path: not a regular file (a FIFO, a device or a "
                    "directory); name a JSONL or ShareGPT JSON file"
                ],
            )
        data = fh.read(PROMPT_FILE_LIMIT + 1)
    if len(data) > PROMPT_FILE_LIMIT:
        raise SpecError(
            str(path),
            [
                f"bench.workload.path: the prompt file is larger than "
                f"{PROMPT_FILE_LIMIT >> 20} MiB; keep only the prompts the bench uses"
            ],
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(
            str(path), [f"bench.workload.path: the prompt file is not UTF-8: {exc}"]
        ) from exc


def _parse_prompt_file(text: str, path: Path) -> list[tuple[str, int | None]]:
    """JSONL ({"prompt": ..., "output_len"?: N} per line) or ShareGPT JSON."""
    stripped = text.lstrip()
    try:
        if stripped.startswith("["):
            return [_sharegpt_row(item) for item in _jsonload.loads(stripped)]
        return [_jsonl_row(_jsonload.loads(line)) for line in text.splitlines() if line.strip()]
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise SpecError(
            str(path),
            [
                f"bench.workload.path: not JSONL with a 'prompt' per line nor ShareGPT "
                f"JSON with 'conversations': {exc}"
            ],
        ) from exc


def _jsonl_row(raw: Mapping[str, object]) -> tuple[str, int | None]:
    out = raw.get("output_len")
    return str(raw["prompt"]), _int(out) if out is not None else None


def _sharegpt_row(raw: Mapping[str, object]) -> tuple[str, int | None]:
    turns = raw["conversations"]
    if not isinstance(turns, list):
        raise TypeError(f"'conversations' is {type(turns).__name__}, not a list")
    first = turns[0]
    if not isinstance(first, Mapping):
        raise TypeError(f"a conversation turn is {type(first).__name__}, not an object")
    return str(first["value"]), None


def _ids(value: object) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise TypeError(f"prompt_ids: expected a list of token ids, not {type(value).__name__}")
    return tuple(_int(x) for x in value)


def _int(value: object) -> int:
    """int() of a JSON value: a number or a numeric string; TypeError for the rest."""
    if isinstance(value, int | float | str):
        return int(value)
    raise TypeError(f"expected a number, not {type(value).__name__}")


def _float(value: object) -> float:
    """float() of a JSON value: a number or a numeric string; TypeError for the rest."""
    if isinstance(value, int | float | str):
        return float(value)
    raise TypeError(f"expected a number, not {type(value).__name__}")


def write(run_path: Path, workloads: WorkloadSet) -> str:
    """Write RUN/workload.jsonl and return its sha256."""
    data = workloads.to_jsonl()
    _atomic.write_bytes(run_path / WORKLOAD_FILE, data)
    return hashlib.sha256(data).hexdigest()


def read(run_path: Path) -> WorkloadSet:
    """Read RUN/workload.jsonl back (the bytes every cell replays)."""
    # never through a link, never a FIFO; its prompts come from at most one prompt file
    data = _nofollow.read_bytes(run_path / WORKLOAD_FILE, limit=2 * PROMPT_FILE_LIMIT)
    lines = data.decode("utf-8").splitlines()
    reqs = [BenchRequest.from_dict(_jsonload.loads(line)) for line in lines if line.strip()]
    return WorkloadSet(
        measured=tuple(r for r in reqs if not r.warmup),
        warmup=tuple(r for r in reqs if r.warmup),
    )


def write_requests(path: Path, rows: Sequence[Mapping[str, object]]) -> None:
    """A per-request JSONL file, one schema-versioned object per line."""
    lines = [json.dumps({"schema_version": SCHEMA_VERSION, **row}) for row in rows]
    _atomic.write_text(path, "\n".join(lines) + ("\n" if lines else ""))
