from __future__ import annotations

import itertools
import json
import os
import random
import statistics

import pytest

from stackmatrix.bench import workload
from stackmatrix.errors import SpecError
from stackmatrix.spec_model import Workload


def test_same_seed_same_bytes_other_seed_other_bytes():
    wl = Workload(input_len=50, output_len=20, num_prompts=10, range_ratio=0.5, seed=3)
    a, b = workload.generate(wl), workload.generate(wl)
    assert a.to_jsonl() == b.to_jsonl() and a.hash == b.hash
    other = workload.generate(Workload(input_len=50, output_len=20, num_prompts=10, seed=4))
    assert other.hash != a.hash


def test_lengths_follow_range_ratio():
    wl = Workload(input_len=100, output_len=40, num_prompts=200, range_ratio=0.5, seed=1)
    reqs = workload.generate(wl).measured
    assert len(reqs) == 200
    for r in reqs:
        assert 50 <= r.input_len <= 100 and 20 <= r.max_tokens <= 40
        assert len(r.prompt.split()) == r.input_len
        assert all(w in workload.WORDS for w in r.prompt.split())
    assert len({r.input_len for r in reqs}) > 10  # really drawn, not constant


def test_ratio_one_gives_exact_lengths():
    reqs = workload.generate(Workload(input_len=7, output_len=3, num_prompts=5)).measured
    assert {(r.input_len, r.max_tokens) for r in reqs} == {(7, 3)}


def test_warmup_requests_are_separate_and_same_shape():
    wl = Workload(input_len=30, output_len=10, num_prompts=4, warmup=3)
    ws = workload.generate(wl)
    assert len(ws.warmup) == 3 and all(r.warmup for r in ws.warmup)
    assert not any(r.warmup for r in ws.measured)
    assert {r.input_len for r in ws.warmup} == {30}


def test_inf_rate_sends_at_once_and_poisson_is_seeded():
    assert workload.arrival_times(5, float("inf"), random.Random(1)) == [0.0] * 5
    a = workload.arrival_times(2000, 10.0, random.Random(1))
    assert a == workload.arrival_times(2000, 10.0, random.Random(1))
    gaps = [y - x for x, y in itertools.pairwise(a)]
    assert a[0] == 0.0 and all(g >= 0 for g in gaps)
    assert statistics.fmean(gaps) == pytest.approx(0.1, rel=0.1)


def test_write_read_round_trip_and_hash(tmp_path):
    ws = workload.generate(Workload(num_prompts=3, warmup=2))
    digest = workload.write(tmp_path, ws)
    assert digest == ws.hash
    back = workload.read(tmp_path)
    assert back == ws
    first = json.loads((tmp_path / "workload.jsonl").read_text().splitlines()[0])
    assert first["schema_version"] == 1


def test_jsonl_prompt_file(tmp_path):
    (tmp_path / "p.jsonl").write_text(
        json.dumps({"prompt": "hello there world"})
        + "\n"
        + json.dumps({"prompt": "second", "output_len": 5})
        + "\n"
    )
    wl = Workload(kind="file", path="p.jsonl", num_prompts=3, output_len=9)
    reqs = workload.generate(wl, spec_dir=tmp_path).measured
    assert [(r.prompt, r.max_tokens) for r in reqs] == [
        ("hello there world", 9),
        ("second", 5),
        ("hello there world", 9),
    ]


def test_sharegpt_file(tmp_path):
    data = [{"conversations": [{"from": "human", "value": "hi a"}, {"from": "gpt", "value": "x"}]}]
    (tmp_path / "s.json").write_text(json.dumps(data))
    wl = Workload(kind="file", path=str(tmp_path / "s.json"), num_prompts=2)
    assert [r.prompt for r in workload.generate(wl).measured] == ["hi a", "hi a"]


@pytest.mark.parametrize("text", ["not json\n", '[{"nope": 1}]', ""])
def test_bad_prompt_files_say_what_is_wrong(tmp_path, text):
    (tmp_path / "bad.jsonl").write_text(text)
    with pytest.raises(SpecError, match=r"bench\.workload\.path"):
        workload.generate(Workload(kind="file", path=str(tmp_path / "bad.jsonl")))


def test_missing_prompt_file(tmp_path):
    with pytest.raises(SpecError, match="cannot read"):
        workload.generate(Workload(kind="file", path=str(tmp_path / "missing.jsonl")))


def test_prompt_file_that_is_a_device_is_refused():
    with pytest.raises(SpecError, match=r"bench\.workload\.path: not a regular file"):
        workload.generate(Workload(kind="file", path="/dev/zero"))


def test_prompt_file_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "p.jsonl")  # no writer: an ordinary open would wait for one
    with pytest.raises(SpecError, match=r"bench\.workload\.path: not a regular file"):
        workload.generate(Workload(kind="file", path=str(tmp_path / "p.jsonl")))


def test_prompt_file_over_the_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(workload, "PROMPT_FILE_LIMIT", 1 << 10)
    with (tmp_path / "p.jsonl").open("wb") as fh:
        fh.truncate(1 << 20)
    with pytest.raises(SpecError, match=r"bench\.workload\.path: the prompt file is larger"):
        workload.generate(Workload(kind="file", path=str(tmp_path / "p.jsonl")))
