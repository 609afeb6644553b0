from __future__ import annotations

import pytest

from stackmatrix.bench.engines import args_to_flat, flatten, get_engine
from stackmatrix.jsontypes import JSONObject


def test_launch_argv_per_engine():
    py = ("/env/bin/python",)
    tf = get_engine("transformers").launch_argv(py, "/m", "127.0.0.1", 9, ["--device", "cpu"])
    assert tf == [
        "/env/bin/python",
        "-m",
        "transformers.cli.transformers",
        "serve",
        "/m",
        "--host",
        "127.0.0.1",
        "--port",
        "9",
        "--device",
        "cpu",
    ]
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
        [
            "--attn-implementation",
            "sdpa",
            "--no-compile",
            "--continuous-batching",
            "--tp=8",
            "--port",
            "1234",
            "positional",
        ]
    )
    assert flat == {
        "attn_implementation": "sdpa",
        "compile": False,
        "continuous_batching": True,
        "tp": "8",
    }


def test_flatten_nests_and_drops_launch_specific_keys():
    info: JSONObject = {
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


def test_sglang_port_leaves_room_for_its_grpc_port(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from stackmatrix.bench import server

    # The kernel hands out ephemeral ports up to 60999 here; sglang 0.5.14 adds 10000
    # for gRPC and refuses anything above 65535.
    engine = get_engine("sglang")
    assert engine.derived_port_offsets == {"grpc": 10000}

    class HighPortSocket(socket.socket):  # the kernel's choice, forced high
        def bind(self, address: tuple[str, int]) -> None:  # type: ignore[override]
            super().bind((address[0], 0))

        def getsockname(self) -> tuple[str, int]:
            return ("127.0.0.1", 60999)

    monkeypatch.setattr(socket, "socket", HighPortSocket)
    monkeypatch.setattr(server, "_bindable", lambda port: True)
    for _ in range(50):
        port = server.free_port(engine.derived_port_offsets.values())
        assert port >= 1024 and port + 10000 <= 65535


def test_free_port_checks_every_derived_port() -> None:
    from stackmatrix.bench import server

    port = server.free_port([10000, 1])
    assert port + 10000 <= 65535
    assert server._bindable(port) and server._bindable(port + 10000) and server._bindable(port + 1)


def test_sglang_launches_get_one_recorded_seed() -> None:
    sg = get_engine("sglang")
    assert sg.pinned_args(["--tp", "1"], seed=7) == ["--random-seed", "7"]
    assert sg.pinned_args(["--random-seed", "3"], seed=7) == []
    assert sg.pinned_args(["--random-seed=3"], seed=7) == []
    assert get_engine("transformers").pinned_args([], seed=7) == []
