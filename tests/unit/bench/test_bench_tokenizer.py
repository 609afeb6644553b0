"""Random prompts fitted by a real tokenizer.json (built here with `tokenizers`) to
exactly their input_len, special tokens included; the fallback to words, recorded."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from tests.support.tokenizer_json import write_tokenizer

from stackmatrix.bench import tokenizer, workload
from stackmatrix.errors import SpecError
from stackmatrix.spec_model import Workload

WL = Workload(input_len=120, output_len=8, num_prompts=40, range_ratio=0.3, seed=5, warmup=3)


def _found(model: Path) -> tokenizer.PromptTokenizer:
    tok, lengths = tokenizer.find(None, str(model), None)
    assert tok is not None and lengths.exact, lengths
    return tok


def test_words_are_not_tokens_of_a_small_vocabulary(tmp_path):
    """The case the tokenizer exists for: by words, the lengths are far off."""
    tok = _found(write_tokenizer(tmp_path / "m", vocab=300, bos=True))
    by_words = workload.generate(WL)
    assert all(tok.count(r.prompt) > r.input_len for r in by_words.measured)


@pytest.mark.parametrize("bos", [True, False])
def test_every_prompt_has_exactly_its_length(tmp_path, bos):
    tok = _found(write_tokenizer(tmp_path / "m", vocab=300, bos=bos))
    ws = workload.generate(WL, tokenizer=tok)
    assert ws.exact_lengths and ws.unfitted == 0
    reqs = (*ws.measured, *ws.warmup)
    assert len({r.input_len for r in ws.measured}) > 5  # range_ratio still draws lengths
    for r in reqs:
        assert tok.count(r.prompt) == r.input_len, r
    # the same draws as by words: a fitted prompt starts with its words' first word
    by_words = workload.generate(WL)
    for fitted, words in zip(ws.measured, by_words.measured, strict=True):
        assert (fitted.input_len, fitted.max_tokens, fitted.arrival_s) == (
            words.input_len,
            words.max_tokens,
            words.arrival_s,
        )
        assert fitted.prompt.split()[0] == words.prompt.split()[0]


def test_same_seed_same_bytes(tmp_path):
    tok = _found(write_tokenizer(tmp_path / "m", vocab=300, bos=True))
    a = workload.generate(WL, tokenizer=tok)
    b = workload.generate(WL, tokenizer=_found(tmp_path / "m"))
    assert a.to_jsonl() == b.to_jsonl()
    other = workload.generate(Workload(**{**WL.__dict__, "seed": 6}), tokenizer=tok)
    assert other.hash != a.hash


def test_prompts_of_one_token_words_are_unchanged(tmp_path):
    """Where each word is already one token, fitting changes nothing: the same bytes,
    the same hash as the prompts by words."""
    tok = _found(write_tokenizer(tmp_path / "m", vocab=2000, bos=False))
    assert all(tok.count(" " + w) == 1 for w in workload.WORDS)
    assert workload.generate(WL, tokenizer=tok).hash == workload.generate(WL).hash


def test_too_few_words_are_repeated(tmp_path):
    """A BOS-less tokenizer with one-token words, asked for more tokens than words."""
    tok = _found(write_tokenizer(tmp_path / "m", vocab=2000, bos=False))
    text, n = tok.fit(["the", "of"], 7)
    assert n == 7 and tok.count(text) == 7 and text.split()[:2] == ["the", "of"]


def test_a_file_workload_is_left_as_it_is(tmp_path):
    tok = _found(write_tokenizer(tmp_path / "m", vocab=300, bos=True))
    (tmp_path / "p.jsonl").write_text(json.dumps({"prompt": "government themselves"}) + "\n")
    wl = Workload(kind="file", path=str(tmp_path / "p.jsonl"), num_prompts=2, warmup=1)
    ws = workload.generate(wl, tokenizer=tok)
    assert not ws.exact_lengths
    assert [r.prompt for r in (*ws.measured, *ws.warmup)] == ["government themselves"] * 3


def test_found_by_bench_tokenizer_relative_to_the_spec(tmp_path):
    write_tokenizer(tmp_path / "tok", vocab=300, bos=True)
    tok, lengths = tokenizer.find("tok", "some/hub-model", tmp_path)
    assert tok is not None
    data = (tmp_path / "tok" / "tokenizer.json").read_bytes()
    assert lengths.to_dict() == {
        "by": "tokenizer",
        "tokenizer": str(tmp_path / "tok" / "tokenizer.json"),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def test_no_tokenizer_json_falls_back_to_words_and_says_why(tmp_path):
    (tmp_path / "m").mkdir()
    for model in (str(tmp_path / "m"), "moonshotai/Kimi-K2"):
        tok, lengths = tokenizer.find(None, model, None)
        assert tok is None
        assert lengths.to_dict() == {"by": "words", "why": f"no tokenizer.json at {model!r}"}


def test_a_broken_model_tokenizer_falls_back(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "tokenizer.json").write_text("{not json")
    tok, lengths = tokenizer.find(None, str(tmp_path / "m"), None)
    assert tok is None and not lengths.exact
    assert lengths.why is not None and "is not a tokenizer" in lengths.why


def test_a_named_tokenizer_that_cannot_be_read_is_an_error(tmp_path):
    with pytest.raises(SpecError, match=r"no tokenizer\.json there"):
        tokenizer.find(str(tmp_path / "missing"), "m", None)
    (tmp_path / "tokenizer.json").write_text("[]")
    with pytest.raises(SpecError, match="is not a tokenizer"):
        tokenizer.find(str(tmp_path), "m", None)


IDS = Workload(**{**WL.__dict__, "prompt_form": "token_ids"})


@pytest.mark.parametrize(("bos", "eos"), [(True, False), (False, False), (True, True)])
def test_token_ids_have_exactly_their_length(tmp_path, bos, eos):
    """Every prompt sent as ids has input_len of them, the tokenizer's specials where
    it adds them (a BOS first, an EOS last), the draws those of the text prompts."""
    tok = _found(write_tokenizer(tmp_path / "m", vocab=300, bos=bos, eos=eos))
    ws = workload.generate(IDS, tokenizer=tok)
    text = workload.generate(WL, tokenizer=tok)
    assert ws.exact_lengths and ws.prompt_form == "token_ids"
    for r, t in zip((*ws.measured, *ws.warmup), (*text.measured, *text.warmup), strict=True):
        assert r.prompt_ids is not None and len(r.prompt_ids) == r.input_len == t.input_len
        assert (r.max_tokens, r.arrival_s) == (t.max_tokens, t.arrival_s)
        assert (r.prompt_ids[0] == 1) is bos  # <s>
        assert (r.prompt_ids[-1] == 2) is eos  # </s>
        assert r.prompt.split()[0] == t.prompt.split()[0]  # the same words, decoded
        assert r.sent_prompt == list(r.prompt_ids)
    assert text.measured[0].sent_prompt == text.measured[0].prompt


def test_token_ids_longer_than_the_words_repeat_them(tmp_path):
    tok = _found(write_tokenizer(tmp_path / "m", vocab=2000, bos=True))
    ids = tok.ids(["the", "of"], 7)
    assert len(ids) == 7 and ids[0] == 1 and ids[1:5] == ids[3:7]


def test_token_ids_are_kept_and_read_back_text_prompts_unchanged(tmp_path):
    """workload.jsonl holds each prompt's ids beside its text; a text workload's bytes
    have no such key (their hash is what earlier results recorded)."""
    tok = _found(write_tokenizer(tmp_path / "m", vocab=300, bos=True))
    ws = workload.generate(IDS, tokenizer=tok)
    workload.write(tmp_path, ws)
    back = workload.read(tmp_path)
    assert [r.prompt_ids for r in back.measured] == [r.prompt_ids for r in ws.measured]
    text = workload.generate(WL, tokenizer=tok)
    assert b"prompt_ids" not in text.to_jsonl() and b"prompt_ids" in ws.to_jsonl()


def test_token_ids_need_a_tokenizer():
    with pytest.raises(SpecError, match="token_ids"):
        workload.generate(IDS)


def test_a_file_workload_as_token_ids_is_its_own_text_encoded(tmp_path):
    tok = _found(write_tokenizer(tmp_path / "m", vocab=300, bos=True))
    (tmp_path / "p.jsonl").write_text(json.dumps({"prompt": "government themselves"}) + "\n")
    wl = Workload(
        kind="file",
        path=str(tmp_path / "p.jsonl"),
        num_prompts=2,
        warmup=1,
        prompt_form="token_ids",
    )
    ws = workload.generate(wl, tokenizer=tok)
    assert ws.exact_lengths
    for r in (*ws.measured, *ws.warmup):
        assert r.prompt == "government themselves"
        assert r.prompt_ids == tok.encode(r.prompt) and r.input_len == tok.count(r.prompt)
