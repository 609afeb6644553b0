from __future__ import annotations

import pytest

from stackmatrix.bench.engines import args_to_flat, flatten, get_engine


def test_launch_argv_per_engine():
    py = ("/env/bin/python",)
    tf = get_engine("transformers").launch_argv(py, "/m", "127.0.0.1", 9, ["--device", "cpu"])
    assert tf == [
        "/env/bin/python", "-m", "transformers.cli.transformers", "serve", "/m",
        "--host", "127.0.0.1", "--port", "9", "--device", "cpu",
    ]  # fmt: skip
    sg = get_engine("sglang").launch_argv(py, "/m", "127.0.0.1", 9, ["--tp", "8"])
    assert sg[:3] == ["/env/bin/python", "-m", "sglang.launch_server"]
    assert sg[3:5] == ["--model-path", "/m"] and sg[-2:] == ["--tp", "8"]
    vl = get_engine("vllm").launch_argv(py, "/m", "h", 1, [])
    assert vl[1:5] == ["-m", "vllm.entrypoints.cli.main", "serve", "/m"]


def test_engine_facts():
    assert get_engine("transformers").accepts_ignore_eos is False
    assert get_engine("sglang").needs_gpu and get_engine("vllm").needs_gpu
    assert not get_engine("transformers").needs_gpu
    assert get_engine("sglang").ready_paths == ("/health_generate",)
    with pytest.raises(TypeError):
        get_engine("external").module_argv("m", "h", 1)
    with pytest.raises(ValueError, match="known engines: external, sglang"):
        get_engine("tgi")


def test_args_to_flat():
    flat = args_to_flat(
        ["--attn-implementation", "sdpa", "--no-compile", "--continuous-batching",
         "--tp=8", "--port", "1234", "positional"]
    )  # fmt: skip
    assert flat == {
        "attn_implementation": "sdpa", "compile": False, "continuous_batching": True, "tp": "8"
    }  # fmt: skip


def test_flatten_nests_and_drops_launch_specific_keys():
    info = {
        "attention_backend": "flashinfer",
        "port": 30000,
        "internal_states": [{"last_gen_throughput": 1.0}],
        "speculative": {"algorithm": None, "num_steps": 3},
        "version": "0.5.9",
    }
    assert flatten(info) == {
        "attention_backend": "flashinfer",
        "speculative.algorithm": None,
        "speculative.num_steps": 3,
        "version": "0.5.9",
    }
