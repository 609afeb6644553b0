"""Teardown waits for the GPU to let go of the server it killed before the next launch
starts (bench/server.py _wait_gpu_released): on the H200 a killed SGLang scheduler was
still listed by nvidia-smi right after the kill."""

from __future__ import annotations

import pytest

from stackmatrix.bench import envfacts, server


def test_it_waits_until_the_gpu_lets_go_of_our_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    listed = [[11, 12, 99], [12, 99], [99]]  # 99 is not ours: never waited for
    monkeypatch.setattr(envfacts, "gpu_pids", lambda: listed.pop(0) if listed else [99])
    monkeypatch.setattr(server, "POLL_S", 0.0)
    assert server._wait_gpu_released([11, 12, 13]) == []
    assert listed == []  # asked until none of ours was listed


def test_it_gives_up_after_its_bound_and_names_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(envfacts, "gpu_pids", lambda: [12, 11])
    monkeypatch.setattr(server, "POLL_S", 0.0)
    monkeypatch.setattr(server, "GPU_RELEASE_TIMEOUT_S", 0.05)
    assert server._wait_gpu_released([11, 12]) == [11, 12]


def test_without_a_gpu_it_does_not_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(envfacts, "gpu_pids", lambda: [])
    monkeypatch.setattr(server, "GPU_RELEASE_TIMEOUT_S", 3600.0)
    assert server._wait_gpu_released([11]) == []
